//! One history from the files of a live run. The lines are put in wall-clock order and
//! given the story's milliseconds; then the epochs are worked out as the simulated Redis
//! works them out, from the grants, releases and expiries the files hold, and every write
//! and refund call is attributed to its worker's epoch at that moment.
//!
//! An expiry is seen through Redis's keyspace notifications, which name the key but not
//! the value: it ends the lease that holds the key. A notification can arrive after the
//! next holder's grant (the server expires a key lazily, when the next `SET NX` touches
//! it): a grant on a key whose lease has not ended yet shows that it expired, so the
//! expiry is put right before that grant, and its late notification is dropped.

use crate::live::clock::LiveClock;
use crate::live::log::LogLine;
use fencesim_sim::ledger::EpochLedger;
use fencesim_sim::{Epoch, Event, EventKind, Moment};
use std::collections::BTreeMap;

/// The merged history and the epochs it shows.
pub struct Merged {
    pub events: Vec<Event>,
    pub epochs: Vec<Epoch>,
}

#[derive(Default)]
struct Leases {
    /// Refund calls that timed out and land later, by (worker, refund, when sent), with
    /// the sender's epoch when it sent them.
    late: BTreeMap<(fencesim_model::WorkerId, fencesim_model::RefundId, u64), Option<u32>>,
    /// Each crashed worker's last crash: when (wall-clock µs) and the epoch it held then. A
    /// statement its process sent by then and the database committed later (a server
    /// finishes what a dead client sent) is that process's, written in that epoch.
    crashed: BTreeMap<fencesim_model::WorkerId, (u64, Option<u32>)>,
    /// The value each lease key holds, as far as the history has told.
    holders: BTreeMap<String, String>,
    /// Expiries already put before a grant, whose notifications are still to come.
    early: BTreeMap<String, u32>,
}

pub fn merge(lines: Vec<LogLine>, clock: LiveClock, workers: usize) -> Merged {
    let mut ledger = EpochLedger::new(1, workers);
    let mut leases = Leases::default();
    let mut events = Vec::with_capacity(lines.len());
    for line in lines {
        let at_ms = clock.story_ms(line.at_us);
        let sent = as_sent(line.happened, line.at_us, line.sent_us, &ledger, &mut leases);
        if let Some(kind) = attribute(sent, at_ms, &mut ledger, &mut leases, &mut events) {
            events.push(Event { at_ms, kind });
        }
    }
    Merged { events, epochs: ledger.take_epochs() }
}

/// A call that timed out is noted with its sender's epoch; when it lands, it is the
/// epoch it is attributed to (the merge attributes other calls as they land). So is a
/// write its process sent before it was killed and the database committed after.
/// `true` beside the event when its epoch is settled here.
fn as_sent(
    mut kind: EventKind,
    at_us: u64,
    sent_us: Option<u64>,
    ledger: &EpochLedger,
    leases: &mut Leases,
) -> (EventKind, bool) {
    let settled = match (&mut kind, sent_us) {
        (EventKind::RefundTimedOut { worker, refund, .. }, _) => {
            leases.late.insert((*worker, *refund, at_us), ledger.current(*worker));
            false
        }
        (EventKind::RefundCalled { worker, refund, epoch, .. }, Some(sent_us)) => {
            *epoch = leases.late.remove(&(*worker, *refund, sent_us)).flatten();
            true
        }
        (EventKind::FaultFired { fault: fencesim_sim::FaultKind::Crash { worker, .. }, .. }, _) => {
            leases.crashed.insert(*worker, (at_us, ledger.current(*worker)));
            false
        }
        (EventKind::Write { worker, epoch, .. }, Some(sent_us)) => match leases.crashed.get(worker) {
            Some(&(crash_us, held)) if sent_us <= crash_us && at_us >= crash_us => {
                *epoch = held;
                true
            }
            _ => false,
        },
        _ => false,
    };
    (kind, settled)
}

/// The event with its epoch filled in, or `None` when it is a notification already accounted for.
fn attribute(
    (mut kind, settled): (EventKind, bool),
    at_ms: u64,
    ledger: &mut EpochLedger,
    leases: &mut Leases,
    events: &mut Vec<Event>,
) -> Option<EventKind> {
    match &mut kind {
        EventKind::LeaseGranted { worker, key, value, epoch, .. } => {
            if let Some(before) = leases.holders.remove(key.as_str()) {
                let expired = expire(ledger, key, before, moment(at_ms, events));
                events.push(Event { at_ms, kind: expired });
                *leases.early.entry(key.clone()).or_default() += 1;
            }
            *epoch = ledger.granted(0, key, value, *worker, moment(at_ms, events));
            leases.holders.insert(key.clone(), value.clone());
        }
        EventKind::LeaseReleased { key, value, deleted: true, .. } => {
            ledger.lost(0, key, value, moment(at_ms, events), true);
            leases.holders.remove(key.as_str());
        }
        EventKind::LeaseDeleted { worker, key, holder: Some(value), .. } => {
            let own = ledger.granted_to(key, value, *worker);
            ledger.lost(0, key, value, moment(at_ms, events), own);
            leases.holders.remove(key.as_str());
        }
        // a SET without NX: the key is this value's now, whoever held it. A value never
        // granted at the key is an acquisition's (a team's script that took the key): the
        // holder's epoch ends there and the taker's begins, as in the simulation; a planted
        // bug's sets a value it was granted before, and opens no epoch.
        EventKind::LeaseSet { worker, key, value, .. } => {
            if !ledger.granted_to(key, value, *worker) {
                if let Some(before) = leases.holders.remove(key.as_str()) {
                    let own = ledger.granted_to(key, &before, *worker);
                    ledger.lost(0, key, &before, moment(at_ms, events), own);
                }
                ledger.granted(0, key, value, *worker, moment(at_ms, events));
            }
            leases.holders.insert(key.clone(), value.clone());
        }
        EventKind::LeaseExpired { key, .. } => {
            if let Some(early) = leases.early.get_mut(key.as_str()).filter(|n| **n > 0) {
                *early -= 1;
                return None;
            }
            let value = leases.holders.remove(key.as_str())?;
            return Some(expire(ledger, key, value, moment(at_ms, events)));
        }
        // a late call, or a dead process's write, already has its sender's epoch (or had none)
        EventKind::Write { worker, epoch, .. } if !settled => *epoch = ledger.current(*worker),
        EventKind::RefundCalled { worker, epoch, .. } if !settled => *epoch = ledger.current(*worker),
        // a restart without persistence loses every lease (the server's files keep the
        // others), with no expiry to tell of it
        EventKind::FaultFired {
            fault: fencesim_sim::FaultKind::RedisRestart { persistence: fencesim_sim::Persistence::None, .. },
            ..
        } => {
            for (key, value) in std::mem::take(&mut leases.holders) {
                ledger.lost(0, &key, &value, moment(at_ms, events), false);
            }
        }
        // a crashed process holds nothing, as in the simulation
        EventKind::FaultFired { fault: fencesim_sim::FaultKind::Crash { worker, .. }, .. } => {
            ledger.forget(*worker)
        }
        _ => {}
    }
    Some(kind)
}

/// `at_ms` as the event pushed next onto `events` tells it.
fn moment(at_ms: u64, events: &[Event]) -> Moment {
    Moment { at_ms, event: events.len() }
}

fn expire(ledger: &mut EpochLedger, key: &str, value: String, at: Moment) -> EventKind {
    let epoch = ledger.lost(0, key, &value, at, false);
    EventKind::LeaseExpired { instance: 0, key: key.to_owned(), value, epoch }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::{RefundId, WorkerId, WriteKind};
    use fencesim_sim::{FaultKind, Hop, Trigger};

    const B: WorkerId = WorkerId(1);

    fn line(at_us: u64, happened: EventKind, sent_us: Option<u64>) -> LogLine {
        LogLine { at_us, happened, sent_us }
    }

    fn confirm(sent_us: u64, at_us: u64) -> LogLine {
        let write = EventKind::Write {
            worker: B,
            epoch: None,
            write: WriteKind::Confirm,
            refund: RefundId(69),
            token: None,
            rows: 1,
            after: None,
        };
        line(at_us, write, Some(sent_us))
    }

    fn epochs_of_writes(lines: Vec<LogLine>) -> Vec<Option<u32>> {
        let merged = merge(lines, LiveClock { start_us: 0, scale: 1.0 }, 2);
        let epoch = |e: &Event| match e.kind {
            EventKind::Write { epoch, .. } => Some(epoch),
            _ => None,
        };
        merged.events.iter().filter_map(epoch).collect()
    }

    /// A statement a process sent before it was killed, committed by the database at or
    /// after the kill, is the dead process's write in the lease it held; one sent by the
    /// process started again, before it took a lease, is in none.
    #[test]
    fn a_write_sent_before_a_crash_keeps_the_epoch_its_sender_held() {
        let granted = EventKind::LeaseGranted {
            worker: B,
            instance: 0,
            key: "lock:settle:m_1".into(),
            value: "b".into(),
            ttl_ms: 10_000,
            epoch: None,
        };
        let crash = EventKind::FaultFired {
            fault: FaultKind::Crash { worker: B, restart_after_ms: 200 },
            trigger: Trigger::Call { worker: B, hop: Hop::Database, nth: 11 },
        };
        let lines = vec![
            line(1_000, granted, None),
            line(5_000, crash, None),
            // sent at the kill's microsecond, committed then (a controlled run's tie)
            confirm(5_000, 5_000),
            // sent before the kill, committed after it
            confirm(4_000, 6_000),
            // the new process's, sent after its start
            confirm(300_000, 300_500),
        ];
        let before = epochs_of_writes(lines);
        assert_eq!(before.len(), 3);
        assert!(before[0].is_some() && before[0] == before[1], "{before:?}");
        assert_eq!(before[2], None, "{before:?}");
    }
}
