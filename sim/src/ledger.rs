//! The epoch ledger: the checkers' ground truth about leases. Every lease Redis really
//! grants opens an epoch, numbered in grant order, whatever token (if any) the mechanism
//! uses; with Redlock, the epoch begins when a value reaches a majority of instances and
//! ends when it falls below one without its holder's release.

use fencesim_model::WorkerId;
use std::collections::BTreeMap;

/// A lease Redis granted: the truth the checkers judge by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub number: u32,
    pub worker: WorkerId,
    pub key: String,
    pub value: String,
    pub granted_at_ms: u64,
    /// The index in the history of the event that tells the grant (the SET that made the
    /// majority): events before it happened before the lease began, even in its millisecond.
    pub granted_at_event: usize,
    /// When the lease ended without its holder's release (expiry, a restart, a stranger's DEL).
    pub expired_at_ms: Option<u64>,
    /// When and where in the history the lease ended, however it ended (its holder's
    /// release included): the first event at which Redis no longer held it.
    pub ended: Option<EpochEnd>,
}

/// Where in the history a lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEnd {
    pub at_ms: u64,
    /// The index of the event that tells the end (an expiry, a release, a restart...):
    /// events before it happened while the lease was live, even in the same millisecond.
    pub event: usize,
    /// Its holder released it.
    pub by_owner: bool,
}

/// A moment of the history: its time, and the index the event that tells it has (or will
/// have once recorded), which orders the events of one millisecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment {
    pub at_ms: u64,
    pub event: usize,
}

impl Epoch {
    /// Was the lease live at event `index` (after that event had happened)? Decided by the
    /// history's order, not by milliseconds: two events of one millisecond are told apart.
    pub fn live_at(&self, index: usize) -> bool {
        self.granted_at_event <= index && self.ended.is_none_or(|end| index < end.event)
    }
}

/// A value held on some instances, on its way to (or past) a majority.
struct Grant {
    worker: WorkerId,
    /// One bit per instance that holds it now.
    holders: u8,
    epoch: Option<u32>,
}

pub struct EpochLedger {
    majority: u32,
    /// Grants by key, then by value: found without looking at any other lease's.
    grants: BTreeMap<String, BTreeMap<String, Grant>>,
    epochs: Vec<Epoch>,
    /// The epoch each worker's latest acquisition opened (none after a crash).
    current: Vec<Option<u32>>,
}

impl EpochLedger {
    pub fn new(instances: usize, workers: usize) -> EpochLedger {
        assert!((1..=8).contains(&instances), "one bit per instance in a grant's holders");
        let majority = (instances / 2 + 1) as u32;
        EpochLedger { majority, grants: BTreeMap::new(), epochs: Vec::new(), current: vec![None; workers] }
    }

    fn grant(&self, key: &str, value: &str) -> Option<&Grant> {
        self.grants.get(key)?.get(value)
    }

    fn grant_mut(&mut self, key: &str, value: &str) -> Option<&mut Grant> {
        self.grants.get_mut(key)?.get_mut(value)
    }

    /// `worker`'s `SET key value NX` succeeded on `instance` at `now_ms`. Returns the epoch
    /// this grant opened, if it is the one that reached a majority.
    pub fn granted(
        &mut self,
        instance: u8,
        key: &str,
        value: &str,
        worker: WorkerId,
        at: Moment,
    ) -> Option<u32> {
        let now_ms = at.at_ms;
        // A value no instance holds any more starts a new grant (a lock value that is not
        // unique comes back for another worker).
        if self.grant(key, value).is_none_or(|grant| grant.holders == 0) {
            let grant = Grant { worker, holders: 0, epoch: None };
            self.grants.entry(key.to_owned()).or_default().insert(value.to_owned(), grant);
        }
        let (majority, number) = (self.majority, self.epochs.len() as u32 + 1);
        let grant = self.grant_mut(key, value).expect("just inserted");
        assert!(grant.holders & (1 << instance) == 0, "SET NX succeeded on an instance that holds the value");
        grant.holders |= 1 << instance;
        if grant.epoch.is_some() || grant.holders.count_ones() < majority {
            return None;
        }
        grant.epoch = Some(number);
        if let Some(last) = self.epochs.last() {
            assert!(last.granted_at_ms <= now_ms, "epochs open in time order");
        }
        self.epochs.push(Epoch {
            number,
            worker,
            key: key.to_owned(),
            value: value.to_owned(),
            granted_at_ms: now_ms,
            granted_at_event: at.event,
            expired_at_ms: None,
            ended: None,
        });
        self.current[worker.0 as usize] = Some(number);
        Some(number)
    }

    /// `instance` no longer holds `value` at `key` (expired, lost, deleted): the epoch ends
    /// if its majority is gone, unless its owner released it. Returns the grant's epoch.
    pub fn lost(&mut self, instance: u8, key: &str, value: &str, at: Moment, by_owner: bool) -> Option<u32> {
        let majority = self.majority;
        let grant = self.grant_mut(key, value)?;
        grant.holders &= !(1 << instance);
        let (holders, number) = (grant.holders.count_ones(), grant.epoch?);
        if holders < majority {
            let epoch = &mut self.epochs[number as usize - 1];
            assert!(
                epoch.granted_at_ms <= at.at_ms && epoch.granted_at_event <= at.event,
                "a lease ends no earlier than it began: {epoch:?} at {at:?}"
            );
            epoch.ended.get_or_insert(EpochEnd { at_ms: at.at_ms, event: at.event, by_owner });
            if !by_owner {
                epoch.expired_at_ms.get_or_insert(at.at_ms);
            }
        }
        Some(number)
    }

    /// `instance` holds `value` at `key` again, a grant the ledger had seen end (a promoted
    /// replica that never heard of its release or removal): no new epoch opens, as nobody
    /// was granted anything; the old one's end stays where it was.
    pub fn restored(&mut self, instance: u8, key: &str, value: &str) {
        if let Some(grant) = self.grant_mut(key, value) {
            grant.holders |= 1 << instance;
        }
    }

    /// Keys and values `instance` holds now, as far as grants go.
    pub fn held_on(&self, instance: u8) -> Vec<(String, String)> {
        let values =
            self.grants.iter().flat_map(|(key, values)| values.iter().map(move |(value, g)| (key, value, g)));
        values
            .filter(|(_, _, g)| g.holders & (1 << instance) != 0)
            .map(|(key, value, _)| (key.clone(), value.clone()))
            .collect()
    }

    /// Did `worker` make the grant of `value` at `key`?
    pub fn granted_to(&self, key: &str, value: &str, worker: WorkerId) -> bool {
        self.grant(key, value).is_some_and(|g| g.worker == worker)
    }

    /// The epoch `worker`'s writes are attributed to now.
    pub fn current(&self, worker: WorkerId) -> Option<u32> {
        self.current[worker.0 as usize]
    }

    /// A crashed worker holds no epoch any more.
    pub fn forget(&mut self, worker: WorkerId) {
        self.current[worker.0 as usize] = None;
    }

    /// The epochs, in grant order, for the run's record.
    pub fn take_epochs(&mut self) -> Vec<Epoch> {
        std::mem::take(&mut self.epochs)
    }
}
