//! A replica of the lease's Redis, replicated asynchronously: every change the primary
//! makes to a key (a write, an expiry, a removal) reaches the replica `lag_ms` later, as
//! the key's value with its deadline as an absolute time on the primary's clock (a primary
//! propagates `SET ... PX` as `PXAT`, and an expiry as a `DEL`). While it is a replica it
//! never expires a key by itself; promoted, it does, by its own clock. A failover promotes
//! it with whatever had reached it: every change still on its way is lost.

use crate::redis::{Command, Entry, Expired, RedisCore, Reply};
use fencesim_model::WorkerId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// A deployment of a primary with one replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replication {
    /// How long a change of the primary takes to reach the replica.
    pub lag_ms: u64,
    /// How long after the primary stops the promoted replica answers: every command sent
    /// in that time fails, as a connection refused.
    pub switch_over_ms: u64,
}

/// One change on its way to the replica.
#[derive(Clone, Debug)]
enum Change {
    /// A key as the primary holds it after a write (none: removed or expired).
    Key(String, Option<Entry>),
    /// The primary's whole data set (a full resynchronisation, after it restarted).
    Everything(Vec<(String, Entry)>),
}

/// The replication link: what the replica holds, and what is on its way to it.
pub struct ReplicaLink {
    lag_ms: u64,
    /// The replica's data set, as far as the stream has reached it.
    copy: BTreeMap<String, Entry>,
    /// Changes on their way, oldest first, each with when it arrives.
    stream: VecDeque<(u64, Change)>,
    /// Connections broken so far (a failover, a restart): a `WAIT` begun before one is
    /// answered by a connection that is gone.
    pub generation: u32,
    /// Per worker: the connection (by generation) its last command went on, and when
    /// everything the primary had sent by then arrives.
    last_command: Vec<(u32, u64)>,
}

/// What a failover did.
pub struct Promotion {
    /// The promoted replica, expiring keys by its own clock from now on.
    pub core: RedisCore,
    /// Changes the replica never received.
    pub lost: u32,
}

impl ReplicaLink {
    pub fn new(primary: &RedisCore, lag_ms: u64, workers: usize) -> ReplicaLink {
        let copy = primary.entries().map(|(key, entry)| (key.clone(), entry.clone())).collect();
        ReplicaLink {
            lag_ms,
            copy,
            stream: VecDeque::new(),
            generation: 0,
            last_command: vec![(0, 0); workers],
        }
    }

    /// Applies one command to the primary at `now_ms`, and sends what it changed (the keys
    /// it expired first, then the command's own key) on its way to the replica.
    pub fn apply(
        &mut self,
        primary: &mut RedisCore,
        cmd: Command<'_>,
        now_ms: u64,
        expired: &mut Vec<Expired>,
    ) -> Reply {
        let named = cmd.written_keys();
        let before: Vec<Option<Entry>> = named.iter().map(|key| primary.entry(key).cloned()).collect();
        let from = expired.len();
        let reply = primary.apply(cmd, now_ms, expired);
        for e in &expired[from..] {
            self.sent(&e.key, None, e.at_ms);
        }
        for (key, before) in named.iter().zip(&before) {
            let after = primary.entry(key);
            if after != before.as_ref() {
                self.sent(key, after.cloned(), now_ms);
            }
        }
        // a script may write a key it does not name: sent as it stands after the script
        let unnamed: Vec<(String, Option<Entry>)> = primary
            .last_writes()
            .filter(|(key, before)| !named.contains(key) && primary.entry(key) != *before)
            .map(|(key, _)| (key.to_owned(), primary.entry(key).cloned()))
            .collect();
        for (key, after) in unnamed {
            self.sent(&key, after, now_ms);
        }
        reply
    }

    /// The primary changed `key` at `now_ms` (to `entry`, or removed it).
    pub fn sent(&mut self, key: &str, entry: Option<Entry>, now_ms: u64) {
        self.stream.push_back((now_ms + self.lag_ms, Change::Key(key.to_owned(), entry)));
    }

    /// The primary restarted: the replica's connection breaks and it resynchronises from
    /// the primary's whole data set.
    pub fn resync(&mut self, primary: &RedisCore, now_ms: u64) {
        let everything = primary.entries().map(|(key, entry)| (key.clone(), entry.clone())).collect();
        self.stream.push_back((now_ms + self.lag_ms, Change::Everything(everything)));
        self.generation += 1;
    }

    /// `worker` sent a command at `now_ms`: a later `WAIT` waits for what was sent by then.
    pub fn commanded(&mut self, worker: WorkerId, now_ms: u64) {
        let due = self.stream.back().map_or(now_ms, |(due, _)| *due);
        self.last_command[worker.0 as usize] = (self.generation, due);
    }

    /// When everything the primary had sent by `worker`'s last command has arrived; none
    /// if that command went on a connection that broke since (a `WAIT` on it fails).
    pub fn acked_at(&self, worker: WorkerId) -> Option<u64> {
        let (generation, due) = self.last_command[worker.0 as usize];
        (generation == self.generation).then_some(due)
    }

    /// Applies the changes that have arrived by `now_ms`.
    fn arrive(&mut self, now_ms: u64) {
        while self.stream.front().is_some_and(|(due, _)| *due <= now_ms) {
            match self.stream.pop_front().expect("just looked").1 {
                Change::Key(key, Some(entry)) => {
                    self.copy.insert(key, entry);
                }
                Change::Key(key, None) => {
                    self.copy.remove(&key);
                }
                Change::Everything(everything) => self.copy = everything.into_iter().collect(),
            }
        }
    }

    /// The primary stops at `now_ms` and the replica is promoted: a new core with what had
    /// reached the replica, less the keys whose deadline its own clock has passed (they
    /// were logically expired already, and a promoted replica removes them at once). The
    /// old primary comes back as the new primary's replica, in step with it.
    pub fn fail_over(&mut self, now_ms: u64) -> Promotion {
        self.arrive(now_ms);
        let lost = self.stream.len() as u32;
        self.stream.clear();
        self.copy.retain(|_, entry| entry.gone_at_ms.is_none_or(|at| at > now_ms));
        let mut core = RedisCore::new();
        for (key, entry) in &self.copy {
            core.put(key, Some(entry.clone()));
        }
        self.generation += 1;
        Promotion { core, lost }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::Value;

    fn apply(primary: &mut RedisCore, link: &mut ReplicaLink, cmd: Command<'_>, now: u64) -> Reply {
        link.apply(primary, cmd, now, &mut Vec::new())
    }

    #[test]
    fn a_failover_keeps_what_reached_the_replica_with_the_primarys_deadline_and_loses_the_rest() {
        let mut primary = RedisCore::new();
        primary.preset("fence:settle:m_1", Value::Int(32));
        let mut link = ReplicaLink::new(&primary, 100, 2);
        apply(&mut primary, &mut link, Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 1_000 }, 0);
        apply(&mut primary, &mut link, Command::Incr { key: "fence:settle:m_1" }, 50);
        link.commanded(WorkerId(0), 50);
        assert_eq!(link.acked_at(WorkerId(0)), Some(150));
        // at 120 the SET has arrived, the INCR has not
        let promoted = link.fail_over(120);
        assert_eq!(promoted.lost, 1);
        assert_eq!(link.acked_at(WorkerId(0)), None, "the connection broke with the primary");
        let mut core = promoted.core;
        assert_eq!(core.value_of("fence:settle:m_1"), Some(&Value::Int(32)), "the counter went back");
        assert_eq!(core.value_of("lock"), Some(&Value::Str("A#1".into())));
        // the deadline is the primary's absolute one: 1,000 ms after the SET, not after the failover
        assert_eq!(core.apply(Command::PTtl { key: "lock" }, 120, &mut Vec::new()), Reply::Int(880));
        // there through its deadline's millisecond, gone from the next
        assert_eq!(core.next_expiry(), Some(1_001));
    }

    #[test]
    fn a_key_whose_deadline_passed_before_its_expiry_reached_the_replica_is_gone_when_it_is_promoted() {
        let mut primary = RedisCore::new();
        let mut link = ReplicaLink::new(&primary, 100, 1);
        apply(&mut primary, &mut link, Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 200 }, 0);
        let mut expired = Vec::new();
        primary.expire_due(200, &mut expired);
        link.sent("lock", None, 200);
        // at 250 the replica still holds the key (the expiry arrives at 300), past its deadline
        let promoted = link.fail_over(250);
        assert_eq!(promoted.lost, 1);
        assert_eq!(promoted.core.value_of("lock"), None);
    }

    #[test]
    fn a_restart_resynchronises_the_replica_from_the_primarys_data_set() {
        let mut primary = RedisCore::new();
        primary.preset("fence:settle:m_1", Value::Int(40));
        let mut link = ReplicaLink::new(&primary, 10, 1);
        primary.restart(crate::redis::Persistence::None, 5);
        link.resync(&primary, 5);
        assert_eq!(link.generation, 1);
        let promoted = link.fail_over(20);
        assert_eq!(promoted.core.value_of("fence:settle:m_1"), None, "the empty data set replaced the copy");
    }

    /// A script's effects reach the replica: on the keys it names, and on a key it writes
    /// without naming it.
    #[test]
    fn what_a_script_writes_reaches_the_replica_named_or_not() {
        let mut primary = RedisCore::new();
        let mut link = ReplicaLink::new(&primary, 10, 1);
        apply(&mut primary, &mut link, Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 1_000 }, 0);
        let script = "redis.call('del', KEYS[1]) return redis.call('incr', 'unnamed')";
        let reply = apply(&mut primary, &mut link, Command::Eval { script, keys: &["lock"], args: &[] }, 5);
        assert_eq!(reply, Reply::Int(1));
        let promoted = link.fail_over(20);
        assert_eq!(promoted.lost, 0, "both changes arrived by 15");
        assert_eq!(promoted.core.value_of("lock"), None);
        assert_eq!(promoted.core.value_of("unnamed"), Some(&Value::Int(1)));
    }
}
