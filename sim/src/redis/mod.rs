//! The simulated Redis: a pure core of keys with expiry by Redis's own clock.
//!
//! `apply(command, now)` is all the behaviour there is; the world's clients call it and
//! record what happened. Keys expire when Redis's clock passes their deadline, as the real
//! server's do: a key is still there at its deadline's millisecond and gone from the next
//! one. The world asks `next_expiry` for that first millisecond without the key and removes
//! it then with `expire_due`, and a command that arrives in the same millisecond sees it
//! gone already.

mod lua;
mod lua_calls;
mod script_call;

pub use lua::{compile_script, sha1_hex, INSTRUCTION_LIMIT};
pub use script_call::{MODELLED as SCRIPT_COMMANDS, NAMES as SCRIPT_COMMAND_NAMES};

use script_call::Called;
use std::collections::{BTreeMap, BTreeSet};

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
    /// `SET key value`: no NX, no expiry (a script may send it).
    Set {
        key: &'a str,
        value: &'a str,
    },
    /// `EXISTS key` (a script may send it).
    Exists {
        key: &'a str,
    },
    /// `EVAL script numkeys key... arg...`: the script runs in Lua, at one instant.
    Eval {
        script: &'a str,
        keys: &'a [&'a str],
        args: &'a [&'a str],
    },
    /// `EVALSHA sha numkeys key... arg...`: a script this instance has run since it started.
    EvalSha {
        sha: &'a str,
        keys: &'a [&'a str],
        args: &'a [&'a str],
    },
    /// `PTTL key`: milliseconds left, -1 with no expiry, -2 with no key. No worker asks it;
    /// the conformance tests read a TTL with it, on the simulated Redis and a real one.
    PTtl {
        key: &'a str,
    },
}

impl<'a> Command<'a> {
    /// The keys this command may change: a script's are the keys it names, as Redis asks
    /// of a script.
    pub fn written_keys(&self) -> &[&'a str] {
        match self {
            Command::Get { .. } | Command::PTtl { .. } | Command::Exists { .. } => &[],
            Command::SetNxPx { key, .. }
            | Command::SetNx { key, .. }
            | Command::SetPx { key, .. }
            | Command::Set { key, .. }
            | Command::Del { key }
            | Command::Incr { key }
            | Command::PExpire { key, .. } => std::slice::from_ref(key),
            Command::Eval { keys, .. } | Command::EvalSha { keys, .. } => keys,
        }
    }
}

/// What a real server answers `SET ... PX 0`.
pub(crate) const INVALID_EXPIRE: &str = "ERR invalid expire time in 'set' command";

/// What a server answers `EVALSHA` of a script it has not run since it started.
const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// The lease's scripts are the model's own; the simulated Redis runs them as `EVAL`.
pub use fencesim_model::mechanism::{COMPARE_AND_DELETE_LUA, COMPARE_AND_EXTEND_LUA};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Nil,
    Bulk(String),
    Int(i64),
    /// A status other than `OK` (a script's `redis.status_reply`).
    Status(String),
    Error(String),
    /// What a script returns as a table.
    Array(Vec<Reply>),
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
    /// How many of `recent`'s last entries the command being applied logged.
    logged_now: usize,
    /// The scripts run since the instance started: what `EVALSHA` finds.
    scripts: BTreeSet<String>,
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
                let redis_now = self.redis_now(now_ms);
                while let Some(w) = self.recent.pop_back() {
                    if w.at_ms + 1_000 <= now_ms {
                        break;
                    }
                    n += 1;
                    // A key the file brings back past its deadline is gone as the server
                    // loads it: it is not put back to expire a second time.
                    match w.before.filter(|entry| entry.gone_at_ms.is_none_or(|at| at > redis_now)) {
                        Some(entry) => self.keys.insert(w.key, entry),
                        None => self.keys.remove(&w.key),
                    };
                }
                n
            }
            Persistence::AofAlways => 0,
        };
        self.recent.clear();
        self.scripts.clear();
        lost
    }

    /// Logs a write of `key`, once per command: what it held before, for a restart to undo.
    fn log_write(&mut self, key: &str, now_ms: u64) {
        if self.recent.iter().rev().take(self.logged_now).any(|w| w.key == key) {
            return;
        }
        while self.recent.front().is_some_and(|w| w.at_ms + 1_000 <= now_ms) {
            self.recent.pop_front();
        }
        let before = self.keys.get(key).cloned();
        self.recent.push_back(Logged { at_ms: now_ms, key: key.to_owned(), before });
        self.logged_now += 1;
    }

    /// The keys the last command wrote, each with what it held before, in the order written.
    pub fn last_writes(&self) -> impl Iterator<Item = (&str, Option<&Entry>)> {
        let from = self.recent.len() - self.logged_now;
        self.recent.iter().skip(from).map(|w| (w.key.as_str(), w.before.as_ref()))
    }

    /// Applies one command at simulated time `now_ms`; keys due by then expire first. A
    /// script's keys are logged as written as it starts (the append-only file carries a
    /// script's effects as one unit), and any other key it writes as it writes it.
    pub fn apply(&mut self, cmd: Command<'_>, now_ms: u64, expired: &mut Vec<Expired>) -> Reply {
        self.expire_due(now_ms, expired);
        self.logged_now = 0;
        if let Command::EvalSha { sha, .. } = cmd {
            if self.script_named(sha).is_none() {
                return Reply::Error(NOSCRIPT.to_owned());
            }
        }
        for key in cmd.written_keys() {
            self.log_write(key, now_ms);
        }
        self.execute(cmd, now_ms)
    }

    /// Runs one command on the keys as they are, at `now_ms`.
    fn execute(&mut self, cmd: Command<'_>, now_ms: u64) -> Reply {
        let redis_now = self.redis_now(now_ms);
        match cmd {
            Command::SetNxPx { key, value, ttl_ms } => {
                self.set_if_absent(key, value, Some(ttl_ms), redis_now)
            }
            Command::SetNx { key, value } => self.set_if_absent(key, value, None, redis_now),
            Command::SetPx { ttl_ms: 0, .. } => Reply::Error(INVALID_EXPIRE.to_owned()),
            Command::SetPx { key, value, ttl_ms } => self.set(key, value, Some(gone_at(redis_now, ttl_ms))),
            Command::Set { key, value } => self.set(key, value, None),
            Command::Get { key } => match self.keys.get(key) {
                None => Reply::Nil,
                Some(Entry { value: Value::Str(s), .. }) => Reply::Bulk(s.clone()),
                Some(Entry { value: Value::Int(n), .. }) => Reply::Bulk(n.to_string()),
            },
            Command::Exists { key } => Reply::Int(i64::from(self.keys.contains_key(key))),
            Command::Del { key } => Reply::Int(i64::from(self.keys.remove(key).is_some())),
            Command::Incr { key } => self.incr(key),
            Command::PExpire { key, ttl_ms } => match self.keys.get_mut(key) {
                None => Reply::Int(0),
                Some(entry) => {
                    entry.gone_at_ms = Some(gone_at(redis_now, ttl_ms));
                    Reply::Int(1)
                }
            },
            Command::PTtl { key } => Reply::Int(match self.keys.get(key) {
                None => -2,
                Some(Entry { gone_at_ms: None, .. }) => -1,
                Some(Entry { gone_at_ms: Some(at), .. }) => at.saturating_sub(redis_now + 1) as i64,
            }),
            Command::Eval { script, keys, args } => {
                if !self.scripts.contains(script) {
                    self.scripts.insert(script.to_owned());
                }
                lua::eval(self, script, keys, args, now_ms)
            }
            Command::EvalSha { sha, keys, args } => {
                let script = self.script_named(sha).expect("apply looked for it").to_owned();
                lua::eval(self, &script, keys, args, now_ms)
            }
        }
    }

    fn set(&mut self, key: &str, value: &str, gone_at_ms: Option<u64>) -> Reply {
        self.keys.insert(key.to_owned(), Entry { value: Value::Str(value.to_owned()), gone_at_ms });
        Reply::Ok
    }

    /// The script run since the start whose digest is `sha`.
    fn script_named(&self, sha: &str) -> Option<&str> {
        self.scripts.iter().find(|script| sha1_hex(script).eq_ignore_ascii_case(sha)).map(String::as_str)
    }

    /// One command a script sent, run at the script's instant.
    fn script_command(&mut self, argv: &[String], now_ms: u64) -> Reply {
        match script_call::read(argv) {
            Err(message) => Reply::Error(message),
            Ok(Called::One(cmd)) => {
                for key in cmd.written_keys() {
                    self.log_write(key, now_ms);
                }
                self.execute(cmd, now_ms)
            }
            Ok(Called::DelMany(keys)) => Reply::Int(
                keys.iter()
                    .map(|key| {
                        self.log_write(key, now_ms);
                        i64::from(self.keys.remove(key).is_some())
                    })
                    .sum(),
            ),
        }
    }

    /// `SET key value NX [PX ttl]` (`SETNX` without a TTL): set only if absent.
    fn set_if_absent(&mut self, key: &str, value: &str, ttl_ms: Option<u64>, redis_now: u64) -> Reply {
        if ttl_ms == Some(0) {
            return Reply::Error(INVALID_EXPIRE.to_owned());
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
                Err(_) => return Reply::Error("ERR value is not an integer or out of range".to_owned()),
            },
        };
        let Some(next) = current.checked_add(1) else {
            return Reply::Error("ERR increment or decrement would overflow".to_owned());
        };
        entry.value = Value::Int(next);
        Reply::Int(next)
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
mod tests;
