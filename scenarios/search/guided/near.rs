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
//!   text or kept in a narrower integer going wrong;
//! - a lease key expires, or another worker takes it, between a worker's read of it and
//!   its next command on it, with no protocol step between the two (inside one operation
//!   of two commands): one step from a read-then-delete acting on a lease that is no
//!   longer the one it read.

use fencesim_model::WorkerId;
use fencesim_sim::{EventKind, RunRecord};
use std::collections::BTreeMap;

/// A near miss: what it is, and the invariants it is one step from breaking.
pub struct NearMiss {
    pub name: &'static str,
    pub towards: &'static [&'static str],
}

/// The near misses, in the order `count` gives them.
pub const NEAR_MISSES: [NearMiss; 6] = [
    NearMiss { name: "a worker acted on a lease key another held", towards: &["lease-integrity"] },
    NearMiss { name: "a worker acted on its lease key after it went away", towards: &["lease-integrity"] },
    NearMiss {
        name: "a worker wrote a row while it did not hold its lease",
        towards: &["no-stale-confirm", "monotonic-fences", "token-order"],
    },
    NearMiss { name: "a token grew a digit", towards: &["token-order", "monotonic-fences", "progress"] },
    NearMiss { name: "a lease key expired inside an operation that read it", towards: &["lease-integrity"] },
    NearMiss {
        name: "another worker took a lease key inside an operation that read it",
        towards: &["lease-integrity"],
    },
];

/// Who holds each lease key on each instance, as the events tell it, and who held it last.
#[derive(Default)]
struct Holders<'a> {
    now: BTreeMap<(u8, &'a str), WorkerId>,
    last: BTreeMap<&'a str, WorkerId>,
    /// Each worker's last read of a key, until its next command on it: what has happened
    /// to the key since (0 nothing, 4 it expired, 5 another took it).
    reads: BTreeMap<(WorkerId, u8, &'a str), usize>,
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

    /// The key changed since its readers read it: `what` happened (4 or 5), the larger kept.
    fn changed(&mut self, instance: u8, key: &str, what: usize, by: Option<WorkerId>) {
        for ((reader, on, read), since) in self.reads.iter_mut() {
            if *on == instance && *read == key && by != Some(*reader) {
                *since = (*since).max(what);
            }
        }
    }

    /// A command of `worker` on the key: what happened since its read, if anything.
    fn next_command(&mut self, worker: WorkerId, instance: u8, key: &'a str) -> Option<usize> {
        self.reads.remove(&(worker, instance, key)).filter(|since| *since > 0)
    }

    fn holds_any(&self, worker: WorkerId) -> bool {
        self.now.values().any(|holder| *holder == worker)
    }
}

fn digits(value: i64) -> u32 {
    value.unsigned_abs().checked_ilog10().unwrap_or(0) + 1
}

impl<'a> Holders<'a> {
    /// A command of `worker` on a lease key: how it stood to the key's holder, and what
    /// happened to the key since the worker's last read of it.
    fn command(&mut self, worker: WorkerId, instance: u8, key: &'a str, read: bool) -> [Option<usize>; 2] {
        let acted = self.acted(worker, instance, key);
        let since = self.next_command(worker, instance, key);
        if read {
            self.reads.insert((worker, instance, key), 0);
        }
        [acted, since]
    }

    /// The near misses an event on a lease key is, and what it changes of who holds it.
    fn lease_event(&mut self, kind: &'a EventKind) -> [Option<usize>; 2] {
        match kind {
            EventKind::LeaseGranted { worker, instance, key, .. } => {
                self.now.insert((*instance, key.as_str()), *worker);
                self.last.insert(key.as_str(), *worker);
                self.changed(*instance, key, 5, Some(*worker));
                [None, None]
            }
            EventKind::LeaseExpired { instance, key, .. } => {
                self.now.remove(&(*instance, key.as_str()));
                self.changed(*instance, key, 4, None);
                [None, None]
            }
            EventKind::RedisRestarted { instance, .. } | EventKind::RedisFailedOver { instance, .. } => {
                self.now.retain(|(on, _), _| on != instance);
                [None, None]
            }
            EventKind::LeaseReleased { worker, instance, key, .. }
            | EventKind::LeaseDeleted { worker, instance, key, .. } => {
                let nears = self.command(*worker, *instance, key, false);
                self.now.remove(&(*instance, key.as_str()));
                nears
            }
            EventKind::LeaseExtended { worker, instance, key, .. } => {
                self.command(*worker, *instance, key, false)
            }
            EventKind::LeaseRead { worker, instance, key, .. } => self.command(*worker, *instance, key, true),
            EventKind::LeaseSet { worker, instance, key, .. } => {
                let nears = self.command(*worker, *instance, key, false);
                self.now.insert((*instance, key.as_str()), *worker);
                nears
            }
            _ => [None, None],
        }
    }
}

/// How many times each near miss happened in the run.
pub fn count(record: &RunRecord) -> [u32; NEAR_MISSES.len()] {
    let mut counts = [0u32; NEAR_MISSES.len()];
    let mut holders = Holders::default();
    let mut tokens: BTreeMap<&str, i64> = BTreeMap::new();
    for event in &record.events {
        let nears = match &event.kind {
            EventKind::Write { worker, .. } => [(!holders.holds_any(*worker)).then_some(2), None],
            EventKind::Step { worker, .. } => {
                // a read followed by a protocol step was a check, not the first half of an
                // operation: the gap that matters is inside one
                holders.reads.retain(|(reader, _, _), _| reader != worker);
                [None, None]
            }
            EventKind::TokenIssued { key, token, .. } => {
                let before = tokens.insert(key.as_str(), token.0);
                [before.filter(|before| digits(token.0) > digits(*before)).map(|_| 3), None]
            }
            kind => holders.lease_event(kind),
        };
        for near in nears.into_iter().flatten() {
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
