//! Near misses: moments one step from a breach, which a guided search steers towards.
//! Each is counted per run; a run that has more of one than the runs before is new.
//!
//! - a worker acts on a lease key another worker holds (a release, a renewal, a read, a
//!   plain set or delete): one step from deleting or taking a lease not its own;
//! - a worker acts on its lease key after the key went away: one step from a stale release
//!   or a renewal that brings a dead lease back;
//! - a worker writes a refund row while it does not hold its lease (the key expired or
//!   another holds it), whatever the store then does: one step from a stale write landing;
//! - a token grows a digit (9 to 10, 99 to 100, ...): one step from a fence compared as
//!   text or kept in a narrower integer going wrong.

use fencesim_model::WorkerId;
use fencesim_sim::{EventKind, RunRecord};
use std::collections::BTreeMap;

/// The near misses, in the order `count` gives them.
pub const NEAR_MISSES: [&str; 4] = [
    "a worker acted on a lease key another held",
    "a worker acted on its lease key after it went away",
    "a worker wrote a row while it did not hold its lease",
    "a token grew a digit",
];

/// Who holds each lease key on each instance, as the events tell it, and who held it last.
#[derive(Default)]
struct Holders<'a> {
    now: BTreeMap<(u8, &'a str), WorkerId>,
    last: BTreeMap<&'a str, WorkerId>,
}

impl<'a> Holders<'a> {
    /// What a command of `worker` on `key` at `instance` was: 0 on another's key, 1 on its
    /// own key gone, none otherwise.
    fn acted(&self, worker: WorkerId, instance: u8, key: &'a str) -> Option<usize> {
        match self.now.get(&(instance, key)) {
            Some(holder) if *holder != worker => Some(0),
            None if self.last.get(key) == Some(&worker) => Some(1),
            _ => None,
        }
    }

    fn holds_any(&self, worker: WorkerId) -> bool {
        self.now.values().any(|holder| *holder == worker)
    }
}

fn digits(value: i64) -> u32 {
    value.unsigned_abs().checked_ilog10().unwrap_or(0) + 1
}

/// How many times each near miss happened in the run.
pub fn count(record: &RunRecord) -> [u32; NEAR_MISSES.len()] {
    let mut counts = [0u32; NEAR_MISSES.len()];
    let mut holders = Holders::default();
    let mut tokens: BTreeMap<&str, i64> = BTreeMap::new();
    for event in &record.events {
        let acted = match &event.kind {
            EventKind::LeaseGranted { worker, instance, key, .. } => {
                holders.now.insert((*instance, key.as_str()), *worker);
                holders.last.insert(key.as_str(), *worker);
                None
            }
            EventKind::LeaseExpired { instance, key, .. } => {
                holders.now.remove(&(*instance, key.as_str()));
                None
            }
            EventKind::RedisRestarted { instance, .. } | EventKind::RedisFailedOver { instance, .. } => {
                holders.now.retain(|(on, _), _| on != instance);
                None
            }
            EventKind::LeaseReleased { worker, instance, key, .. }
            | EventKind::LeaseDeleted { worker, instance, key, .. } => {
                let acted = holders.acted(*worker, *instance, key);
                holders.now.remove(&(*instance, key.as_str()));
                acted
            }
            EventKind::LeaseExtended { worker, instance, key, .. }
            | EventKind::LeaseRead { worker, instance, key, .. } => holders.acted(*worker, *instance, key),
            EventKind::LeaseSet { worker, instance, key, .. } => {
                let acted = holders.acted(*worker, *instance, key);
                holders.now.insert((*instance, key.as_str()), *worker);
                acted
            }
            EventKind::Write { worker, .. } => (!holders.holds_any(*worker)).then_some(2),
            EventKind::TokenIssued { key, token, .. } => {
                let before = tokens.insert(key.as_str(), token.0);
                before.filter(|before| digits(token.0) > digits(*before)).map(|_| 3)
            }
            _ => None,
        };
        if let Some(near) = acted {
            counts[near] = counts[near].saturating_add(1);
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digit_is_counted_where_a_number_grows_one() {
        let grown: Vec<u32> = [0, 9, 10, 99, 100, -5, 2_147_483_648].into_iter().map(digits).collect();
        assert_eq!(grown, [1, 1, 2, 2, 3, 1, 10]);
    }
}
