//! The simulated Redis: a pure core of keys with expiry by Redis's own clock.
//!
//! `apply(command, now)` is all the behaviour there is; the world's clients call it and
//! record what happened. Keys expire when Redis's clock passes their deadline, as the real
//! server's do: a key is still there at its deadline's millisecond and gone from the next
//! one. The world asks `next_expiry` for that first millisecond without the key and removes
//! it then with `expire_due`, and a command that arrives in the same millisecond sees it
//! gone already.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Str(String),
    Int(i64),
}

/// A key's value and when it is gone: what a replica receives of a write (the time as an
/// absolute one on the primary's clock, as a primary propagates `SET ... PX` as `PXAT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub value: Value,
    /// The first millisecond on Redis's clock without the key: one past its deadline (a
    /// real server keeps a key through its deadline's millisecond), or the very moment an
    /// expiry of 0 ms was set.
    pub gone_at_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// `SET key value NX PX ttl`
    SetNxPx {
        key: &'a str,
        value: &'a str,
        ttl_ms: u64,
    },
    /// `SETNX key value`: set if absent, with no expiry at all.
    SetNx {
        key: &'a str,
        value: &'a str,
    },
    /// `SET key value PX ttl`, no NX.
    SetPx {
        key: &'a str,
        value: &'a str,
        ttl_ms: u64,
    },
    Get {
        key: &'a str,
    },
    Del {
        key: &'a str,
    },
    Incr {
        key: &'a str,
    },
    /// `PEXPIRE key ms`
    PExpire {
        key: &'a str,
        ttl_ms: u64,
    },
    /// Delete only if the key holds `value` (the release script).
    CompareAndDelete {
        key: &'a str,
        value: &'a str,
    },
    /// Re-arm the TTL only if the key holds `value` (the renewal script).
    CompareAndExtend {
        key: &'a str,
        value: &'a str,
        ttl_ms: u64,
    },
    /// `PTTL key`: milliseconds left, -1 with no expiry, -2 with no key. No worker asks it;
    /// the conformance tests read a TTL with it, on the simulated Redis and a real one.
    PTtl {
        key: &'a str,
    },
}

impl Command<'_> {
    /// The key this command may change, if it is a write.
    pub fn written_key(&self) -> Option<&str> {
        match *self {
            Command::Get { .. } | Command::PTtl { .. } => None,
            Command::SetNxPx { key, .. }
            | Command::SetNx { key, .. }
            | Command::SetPx { key, .. }
            | Command::Del { key }
            | Command::Incr { key }
            | Command::PExpire { key, .. }
            | Command::CompareAndDelete { key, .. }
            | Command::CompareAndExtend { key, .. } => Some(key),
        }
    }
}

/// What a real server answers `SET ... PX 0`.
const INVALID_EXPIRE: &str = "ERR invalid expire time in 'set' command";

/// The release script as a real server runs it: `KEYS[1]` is the lock, `ARGV[1]` the
/// holder's value. `Command::CompareAndDelete` is what it does, in one step.
pub const COMPARE_AND_DELETE_LUA: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// The renewal script as a real server runs it: `ARGV[2]` is the new TTL in
/// milliseconds. `Command::CompareAndExtend` is what it does, in one step.
pub const COMPARE_AND_EXTEND_LUA: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Nil,
    Bulk(String),
    Int(i64),
    Error(&'static str),
}

/// A key Redis removed because its deadline passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired {
    pub key: String,
    pub value: Value,
    /// When, on the simulation's clock.
    pub at_ms: u64,
}

/// What survives a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// Nothing: every key, the lease and the counter alike, is gone.
    None,
    /// Append-only file flushed every second: the last second of writes is lost.
    AofEverySec,
    /// Append-only file flushed on every write: nothing is lost.
    AofAlways,
}

impl Persistence {
    pub const ALL: [Persistence; 3] = [Persistence::None, Persistence::AofEverySec, Persistence::AofAlways];

    /// What a restart keeps, in words.
    pub fn words(self) -> &'static str {
        match self {
            Persistence::None => "no persistence: every key is lost",
            Persistence::AofEverySec => "an append-only file flushed every second: the last second is lost",
            Persistence::AofAlways => "an append-only file flushed on every write: nothing is lost",
        }
    }
}

/// One write, with what the key held before it, for a restart to undo.
#[derive(Clone, Debug)]
struct Logged {
    at_ms: u64,
    key: String,
    before: Option<Entry>,
}

#[derive(Clone, Debug, Default)]
pub struct RedisCore {
    keys: BTreeMap<String, Entry>,
    /// Redis's clock minus the simulation's: a clock jump moves it.
    clock_offset_ms: i64,
    /// When, on the simulation's clock, Redis's clock last jumped: a key the jump expired
    /// vanished then, not at its deadline taken back through the jumped clock, which can
    /// fall before the key was even set.
    jumped_at_ms: u64,
    /// Writes of the last second, oldest first.
    recent: std::collections::VecDeque<Logged>,
}

/// When a key set at `redis_now` with `ttl_ms` is gone: through its deadline's millisecond
/// it is there, as on a real server; an expiry of 0 ms removes it at once, as `PEXPIRE 0`
/// does.
fn gone_at(redis_now: u64, ttl_ms: u64) -> u64 {
    match ttl_ms {
        0 => redis_now,
        ttl => redis_now + ttl + 1,
    }
}

impl RedisCore {
    pub fn new() -> RedisCore {
        RedisCore::default()
    }

    fn redis_now(&self, now_ms: u64) -> u64 {
        (now_ms as i64 + self.clock_offset_ms).max(0) as u64
    }

    /// Sets a key without expiry, as a scenario's starting state (`fence:settle:m = 32`).
    pub fn preset(&mut self, key: &str, value: Value) {
        self.keys.insert(key.to_owned(), Entry { value, gone_at_ms: None });
    }

    /// The next time, on the simulation's clock, at which a key expires: the millisecond
    /// after its deadline, the first one a real server would not answer with it.
    pub fn next_expiry(&self) -> Option<u64> {
        self.keys
            .values()
            .filter_map(|e| e.gone_at_ms)
            .min()
            .map(|at| (at as i64 - self.clock_offset_ms).max(0) as u64)
    }

    /// Removes every key whose deadline has passed, in deadline order.
    pub fn expire_due(&mut self, now_ms: u64, out: &mut Vec<Expired>) {
        let redis_now = self.redis_now(now_ms);
        let mut due: Vec<(u64, String)> = self
            .keys
            .iter()
            .filter_map(|(k, e)| e.gone_at_ms.filter(|&at| at <= redis_now).map(|at| (at, k.clone())))
            .collect();
        due.sort();
        for (at, key) in due {
            let entry = self.keys.remove(&key).expect("due key is present");
            let at_ms = ((at as i64 - self.clock_offset_ms).max(0) as u64).max(self.jumped_at_ms).min(now_ms);
            out.push(Expired { key, value: entry.value, at_ms });
        }
    }

    /// Jumps Redis's clock by `by_ms` at `now_ms` (keys expire by the jumped clock from now on).
    pub fn jump_clock(&mut self, by_ms: i64, now_ms: u64) {
        self.clock_offset_ms += by_ms;
        self.jumped_at_ms = now_ms;
    }

    /// Removes `key` now, as if its deadline had been brought forward to this moment.
    pub fn expire_now(&mut self, key: &str, now_ms: u64) -> Option<Expired> {
        let entry = self.keys.remove(key)?;
        entry.gone_at_ms?;
        Some(Expired { key: key.to_owned(), value: entry.value, at_ms: now_ms })
    }

    /// Restarts the instance; returns how many keys were lost or rolled back.
    pub fn restart(&mut self, persistence: Persistence, now_ms: u64) -> u32 {
        let lost = match persistence {
            Persistence::None => {
                let n = self.keys.len() as u32;
                self.keys.clear();
                n
            }
            Persistence::AofEverySec => {
                let mut n = 0;
                while let Some(w) = self.recent.pop_back() {
                    if w.at_ms + 1_000 <= now_ms {
                        break;
                    }
                    n += 1;
                    match w.before {
                        Some(entry) => self.keys.insert(w.key, entry),
                        None => self.keys.remove(&w.key),
                    };
                }
                n
            }
            Persistence::AofAlways => 0,
        };
        self.recent.clear();
        lost
    }

    fn log_write(&mut self, key: &str, now_ms: u64) {
        while self.recent.front().is_some_and(|w| w.at_ms + 1_000 <= now_ms) {
            self.recent.pop_front();
        }
        let before = self.keys.get(key).cloned();
        self.recent.push_back(Logged { at_ms: now_ms, key: key.to_owned(), before });
    }

    /// Applies one command at simulated time `now_ms`; keys due by then expire first.
    pub fn apply(&mut self, cmd: Command<'_>, now_ms: u64, expired: &mut Vec<Expired>) -> Reply {
        self.expire_due(now_ms, expired);
        if let Some(key) = cmd.written_key() {
            self.log_write(key, now_ms);
        }
        let redis_now = self.redis_now(now_ms);
        match cmd {
            Command::SetNxPx { key, value, ttl_ms } => {
                self.set_if_absent(key, value, Some(ttl_ms), redis_now)
            }
            Command::SetNx { key, value } => self.set_if_absent(key, value, None, redis_now),
            Command::SetPx { ttl_ms: 0, .. } => Reply::Error(INVALID_EXPIRE),
            Command::SetPx { key, value, ttl_ms } => {
                let entry = Entry {
                    value: Value::Str(value.to_owned()),
                    gone_at_ms: Some(gone_at(redis_now, ttl_ms)),
                };
                self.keys.insert(key.to_owned(), entry);
                Reply::Ok
            }
            Command::Get { key } => match self.keys.get(key) {
                None => Reply::Nil,
                Some(Entry { value: Value::Str(s), .. }) => Reply::Bulk(s.clone()),
                Some(Entry { value: Value::Int(n), .. }) => Reply::Bulk(n.to_string()),
            },
            Command::Del { key } => Reply::Int(i64::from(self.keys.remove(key).is_some())),
            Command::Incr { key } => self.incr(key),
            Command::PExpire { key, ttl_ms } => match self.keys.get_mut(key) {
                None => Reply::Int(0),
                Some(entry) => {
                    entry.gone_at_ms = Some(gone_at(redis_now, ttl_ms));
                    Reply::Int(1)
                }
            },
            Command::CompareAndDelete { key, value } => {
                if self.holds(key, value) {
                    self.keys.remove(key);
                    Reply::Int(1)
                } else {
                    Reply::Int(0)
                }
            }
            Command::PTtl { key } => Reply::Int(match self.keys.get(key) {
                None => -2,
                Some(Entry { gone_at_ms: None, .. }) => -1,
                Some(Entry { gone_at_ms: Some(at), .. }) => at.saturating_sub(redis_now + 1) as i64,
            }),
            Command::CompareAndExtend { key, value, ttl_ms } => {
                if self.holds(key, value) {
                    let entry = self.keys.get_mut(key).expect("held key is present");
                    entry.gone_at_ms = Some(gone_at(redis_now, ttl_ms));
                    Reply::Int(1)
                } else {
                    Reply::Int(0)
                }
            }
        }
    }

    /// `SET key value NX [PX ttl]` (`SETNX` without a TTL): set only if absent.
    fn set_if_absent(&mut self, key: &str, value: &str, ttl_ms: Option<u64>, redis_now: u64) -> Reply {
        if ttl_ms == Some(0) {
            return Reply::Error(INVALID_EXPIRE);
        }
        if self.keys.contains_key(key) {
            return Reply::Nil;
        }
        let entry = Entry {
            value: Value::Str(value.to_owned()),
            gone_at_ms: ttl_ms.map(|ttl| gone_at(redis_now, ttl)),
        };
        self.keys.insert(key.to_owned(), entry);
        Reply::Ok
    }

    /// `INCR`: a missing key counts from 0; a value that is not an integer is an error.
    fn incr(&mut self, key: &str) -> Reply {
        let entry =
            self.keys.entry(key.to_owned()).or_insert(Entry { value: Value::Int(0), gone_at_ms: None });
        let current = match &entry.value {
            Value::Int(n) => *n,
            Value::Str(s) => match s.parse::<i64>() {
                Ok(n) => n,
                Err(_) => return Reply::Error("ERR value is not an integer or out of range"),
            },
        };
        let Some(next) = current.checked_add(1) else {
            return Reply::Error("ERR increment or decrement would overflow");
        };
        entry.value = Value::Int(next);
        Reply::Int(next)
    }

    fn holds(&self, key: &str, value: &str) -> bool {
        matches!(self.keys.get(key), Some(Entry { value: Value::Str(s), .. }) if s == value)
    }

    /// A key's value and deadline, as a replica would receive them.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.keys.get(key)
    }

    /// Every key with its value and deadline, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.keys.iter()
    }

    /// Puts a key as a replica received it (none: the key is gone).
    pub fn put(&mut self, key: &str, entry: Option<Entry>) {
        match entry {
            Some(entry) => self.keys.insert(key.to_owned(), entry),
            None => self.keys.remove(key),
        };
    }

    /// The string value a key holds now, if any.
    pub fn value_of(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|e| &e.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(core: &mut RedisCore, cmd: Command<'_>, now: u64) -> (Reply, Vec<Expired>) {
        let mut expired = Vec::new();
        let reply = core.apply(cmd, now, &mut expired);
        (reply, expired)
    }

    #[test]
    fn set_nx_px_grants_once_and_the_key_is_there_at_its_deadline_and_gone_a_millisecond_later() {
        let mut r = RedisCore::new();
        let set = |v| Command::SetNxPx { key: "lock:settle:m_4471", value: v, ttl_ms: 30_000 };
        assert_eq!(run(&mut r, set("A#1"), 0).0, Reply::Ok);
        assert_eq!(run(&mut r, set("B#1"), 29_999).0, Reply::Nil);
        assert_eq!(run(&mut r, set("B#1"), 30_000), (Reply::Nil, vec![]), "still there at its deadline");
        assert_eq!(r.next_expiry(), Some(30_001));
        let (reply, expired) = run(&mut r, set("B#1"), 30_001);
        assert_eq!(reply, Reply::Ok);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].at_ms, 30_001);
        assert_eq!(expired[0].value, Value::Str("A#1".into()));
    }

    #[test]
    fn incr_counts_from_a_preset_value_and_refuses_a_non_integer() {
        let mut r = RedisCore::new();
        r.preset("fence:settle:m_4471", Value::Int(32));
        assert_eq!(run(&mut r, Command::Incr { key: "fence:settle:m_4471" }, 0).0, Reply::Int(33));
        assert_eq!(run(&mut r, Command::Incr { key: "fence:settle:m_4471" }, 5).0, Reply::Int(34));
        assert_eq!(run(&mut r, Command::Incr { key: "fresh" }, 5).0, Reply::Int(1));
        r.preset("text", Value::Str("abc".into()));
        assert!(matches!(run(&mut r, Command::Incr { key: "text" }, 5).0, Reply::Error(_)));
    }

    #[test]
    fn compare_and_delete_only_deletes_its_own_value() {
        let mut r = RedisCore::new();
        run(&mut r, Command::SetNxPx { key: "k", value: "B#1", ttl_ms: 100 }, 0);
        let del = |v| Command::CompareAndDelete { key: "k", value: v };
        assert_eq!(run(&mut r, del("A#1"), 1).0, Reply::Int(0));
        assert_eq!(r.value_of("k"), Some(&Value::Str("B#1".into())));
        assert_eq!(run(&mut r, del("B#1"), 2).0, Reply::Int(1));
        assert_eq!(run(&mut r, Command::Get { key: "k" }, 3).0, Reply::Nil);
    }

    #[test]
    fn extend_and_pexpire_move_the_deadline() {
        let mut r = RedisCore::new();
        run(&mut r, Command::SetNxPx { key: "k", value: "A#1", ttl_ms: 100 }, 0);
        let ext = |v| Command::CompareAndExtend { key: "k", value: v, ttl_ms: 100 };
        assert_eq!(run(&mut r, ext("B#1"), 50).0, Reply::Int(0));
        assert_eq!(run(&mut r, ext("A#1"), 50).0, Reply::Int(1));
        assert_eq!(r.next_expiry(), Some(151));
        assert_eq!(run(&mut r, Command::PExpire { key: "k", ttl_ms: 10 }, 60).0, Reply::Int(1));
        let mut expired = Vec::new();
        r.expire_due(70, &mut expired);
        assert!(expired.is_empty(), "there at its deadline");
        r.expire_due(71, &mut expired);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].at_ms, 71);
        assert_eq!(run(&mut r, Command::Del { key: "k" }, 72).0, Reply::Int(0));
    }

    /// An expiry of 0 ms is already past, as on a real server: the key is gone to the next
    /// command in the same millisecond, and PTTL reads 0 at a deadline's own millisecond.
    #[test]
    fn pexpire_0_removes_the_key_at_once_and_pttl_reads_0_at_the_deadline() {
        let mut r = RedisCore::new();
        run(&mut r, Command::SetNxPx { key: "k", value: "A#1", ttl_ms: 100 }, 0);
        assert_eq!(run(&mut r, Command::PTtl { key: "k" }, 100).0, Reply::Int(0));
        assert_eq!(run(&mut r, Command::PExpire { key: "k", ttl_ms: 0 }, 50).0, Reply::Int(1));
        let (reply, expired) = run(&mut r, Command::Get { key: "k" }, 50);
        assert_eq!((reply, expired.len(), expired[0].at_ms), (Reply::Nil, 1, 50));
    }

    #[test]
    fn a_restart_keeps_or_loses_keys_by_persistence_mode() {
        let fill = |r: &mut RedisCore| {
            r.preset("fence:settle:m_1", Value::Int(32));
            run(r, Command::Incr { key: "fence:settle:m_1" }, 5_000);
            run(r, Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 30_000 }, 5_500);
        };
        let mut none = RedisCore::new();
        fill(&mut none);
        assert_eq!(none.restart(Persistence::None, 5_800), 2);
        assert_eq!(run(&mut none, Command::Incr { key: "fence:settle:m_1" }, 5_801).0, Reply::Int(1));

        let mut every_sec = RedisCore::new();
        fill(&mut every_sec);
        // the INCR at 5,000 is older than a second at 6,200; the SET at 5,500 is not
        assert_eq!(every_sec.restart(Persistence::AofEverySec, 6_200), 1);
        assert_eq!(every_sec.value_of("fence:settle:m_1"), Some(&Value::Int(33)));
        assert_eq!(every_sec.value_of("lock"), None);

        let mut always = RedisCore::new();
        fill(&mut always);
        assert_eq!(always.restart(Persistence::AofAlways, 5_800), 0);
        assert_eq!(always.value_of("lock"), Some(&Value::Str("A#1".into())));
    }

    #[test]
    fn a_clock_jump_brings_expiry_forward() {
        let mut r = RedisCore::new();
        run(&mut r, Command::SetNxPx { key: "k", value: "A#1", ttl_ms: 30_000 }, 0);
        r.jump_clock(20_000, 5);
        assert_eq!(r.next_expiry(), Some(10_001));
        let expired = r.expire_now("k", 11).unwrap();
        assert_eq!(expired.at_ms, 11);
    }

    /// A jump past a key's deadline expires it at the jump: taken back through the jumped
    /// clock, its deadline would date the expiry before the key was set.
    #[test]
    fn a_key_a_clock_jump_expires_is_dated_at_the_jump() {
        let mut r = RedisCore::new();
        run(&mut r, Command::SetNxPx { key: "early", value: "A#1", ttl_ms: 200 }, 1_000);
        run(&mut r, Command::SetNxPx { key: "late", value: "B#1", ttl_ms: 5_000 }, 1_000);
        r.jump_clock(1_000, 1_050);
        let mut expired = Vec::new();
        r.expire_due(1_050, &mut expired);
        let dated: Vec<(&str, u64)> = expired.iter().map(|e| (e.key.as_str(), e.at_ms)).collect();
        assert_eq!(dated, [("early", 1_050)], "dated at the jump, not at 200 ms");
        // a key the jump did not reach expires just past its deadline on the jumped clock
        r.expire_due(5_000, &mut expired);
        assert_eq!(expired.len(), 1, "there at its deadline");
        r.expire_due(5_001, &mut expired);
        assert_eq!(expired.last().map(|e| (e.key.as_str(), e.at_ms)), Some(("late", 5_001)));
    }

    #[test]
    fn a_zero_ttl_is_an_error_as_in_redis() {
        let mut r = RedisCore::new();
        assert!(matches!(
            run(&mut r, Command::SetNxPx { key: "k", value: "v", ttl_ms: 0 }, 0).0,
            Reply::Error(_)
        ));
    }
}
