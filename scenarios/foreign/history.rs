//! A controlled run's history: every turn the conductor gave, every request and reply the
//! proxies saw, and every event the services and the driver recorded, in story order, each
//! as one line; hashed, so that two runs of one seed are compared as the simulation's
//! self-check compares two runs of one seed, and the first line where they part is named.
//!
//! What a program makes up afresh each run is named by its first appearance instead of its
//! bytes: the value a copy sets its lease to (a random token, as every lock library draws
//! one) is `‹value 1›`, `‹value 2›`... wherever it appears; and what a server says of
//! itself (`INFO`, `CLIENT`, `HELLO`: its uptime, a connection's number and port) is left
//! out. The database's process numbers are not in the lines.

use crate::live::log::LogLine;
use crate::live::pgproxy::PgObserved;
use crate::live::proxy::Observed;
use fencesim_model::WorkerId;
use std::collections::BTreeMap;

/// One run's history, line by line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    pub lines: Vec<String>,
}

/// Where two histories part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parting {
    /// The first differing line's place, from 1.
    pub line: usize,
    pub first: Option<String>,
    pub second: Option<String>,
}

/// What a run saw, as the history is made of it.
pub struct Seen<'a> {
    pub turns: &'a [(u64, String)],
    pub redis: &'a [(WorkerId, Observed)],
    pub database: &'a [(WorkerId, PgObserved)],
    /// The services' and the driver's events.
    pub events: &'a [LogLine],
    /// The story's start on the wall clock's scale.
    pub start_us: u64,
}

/// A client library's own commands, which tell of the server or the connection and change
/// nothing of the run (a handshake, a ready check, a name): a copy sends them when its
/// library decides, on its own clock, so they are not turns (`foreign::turns`) and not in
/// the history.
pub const HOUSEKEEPING: [&str; 10] =
    ["INFO", "CLIENT", "HELLO", "SELECT", "AUTH", "PING", "ECHO", "COMMAND", "READONLY", "READWRITE"];

/// Whether a Redis request (its words) is a client library's own (`HOUSEKEEPING`).
pub fn housekeeping(request: &str) -> bool {
    let command = request.split_whitespace().next().unwrap_or_default().to_ascii_uppercase();
    HOUSEKEEPING.contains(&command.as_str())
}

impl History {
    pub fn of(seen: &Seen) -> History {
        let mut lines: Vec<(u64, u8, usize, String)> = Vec::new();
        for (i, (at, what)) in seen.turns.iter().enumerate() {
            lines.push((*at, 0, i, format!("turn {what}")));
        }
        let mut values = Values::default();
        let mut redis: Vec<&(WorkerId, Observed)> = seen.redis.iter().collect();
        redis.sort_by_key(|(_, o)| (o.sent_us, o.answered_us));
        redis.retain(|(_, o)| !housekeeping(&o.args.join(" ")));
        for (i, (worker, o)) in redis.into_iter().enumerate() {
            let line = values.redis_line(*worker, o);
            lines.push((o.answered_us.saturating_sub(seen.start_us), 1, i, line));
        }
        let mut database: Vec<&(WorkerId, PgObserved)> = seen.database.iter().collect();
        database.sort_by_key(|(_, o)| (o.sent_us, o.answered_us, o.nth));
        for (i, (worker, o)) in database.into_iter().enumerate() {
            let line = format!(
                "{worker} database: {} {:?} -> {} {:?} {:?}",
                o.sql.split_whitespace().collect::<Vec<_>>().join(" "),
                o.params,
                o.tag.as_deref().unwrap_or("-"),
                o.error,
                o.rows
            );
            lines.push((o.answered_us.saturating_sub(seen.start_us), 2, i, line));
        }
        for (i, event) in seen.events.iter().enumerate() {
            let told = serde_json::to_string(&event.happened).unwrap_or_default();
            lines.push((event.at_us.saturating_sub(seen.start_us), 3, i, values.renamed(&told)));
        }
        lines.sort();
        History { lines: lines.into_iter().map(|(at, _, _, line)| format!("{at} {line}")).collect() }
    }

    /// A hash of every line (64-bit xxHash, as the simulation's trace hash), the same for
    /// the same lines on any machine.
    pub fn hash(&self) -> String {
        let mut hasher = twox_hash::XxHash64::with_seed(0);
        for line in &self.lines {
            std::hash::Hasher::write(&mut hasher, line.as_bytes());
            std::hash::Hasher::write(&mut hasher, b"\n");
        }
        format!("{:016x}", std::hash::Hasher::finish(&hasher))
    }

    /// Where `other` parts from this history, if it does.
    pub fn parting(&self, other: &History) -> Option<Parting> {
        let longest = self.lines.len().max(other.lines.len());
        (0..longest).find(|&i| self.lines.get(i) != other.lines.get(i)).map(|i| Parting {
            line: i + 1,
            first: self.lines.get(i).cloned(),
            second: other.lines.get(i).cloned(),
        })
    }
}

/// The values the copies set their leases to, each named by its first appearance.
#[derive(Default)]
struct Values {
    named: BTreeMap<String, String>,
}

impl Values {
    fn redis_line(&mut self, worker: WorkerId, o: &Observed) -> String {
        let command = o.args.first().map(|c| c.to_ascii_uppercase()).unwrap_or_default();
        if command == "SET" {
            if let Some(value) = o.args.get(2).filter(|_| o.args.len() > 3) {
                let next = format!("‹value {}›", self.named.len() + 1);
                self.named.entry(value.clone()).or_insert(next);
            }
        }
        format!("{worker} redis: {} -> {}", self.renamed(&o.args.join(" ")), self.renamed(&o.reply))
    }

    fn renamed(&self, text: &str) -> String {
        self.named.iter().fold(text.to_owned(), |text, (value, name)| text.replace(value, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(nth: u64, args: &[&str], reply: &str) -> (WorkerId, Observed) {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let o = Observed {
            party: "A".into(),
            connection: 1,
            nth,
            sent_us: nth * 10,
            answered_us: nth * 10 + 1,
            request: args.join(" "),
            reply: reply.into(),
            args,
        };
        (WorkerId(0), o)
    }

    fn history(redis: &[(WorkerId, Observed)]) -> History {
        History::of(&Seen { turns: &[], redis, database: &[], events: &[], start_us: 0 })
    }

    #[test]
    fn a_random_lease_value_is_named_by_its_first_appearance() {
        let run = |token: &str| {
            history(&[
                observed(1, &["SET", "lock:settle:m_1", token, "NX", "PX", "30000"], "OK"),
                observed(2, &["EVAL", "release", "1", "lock:settle:m_1", token], "1"),
                observed(3, &["INFO"], &format!("uptime_in_seconds:{}", token.len())),
            ])
        };
        let (first, second) = (run("A:1f2e"), run("A:99aa0"));
        assert_eq!(first, second, "the same run with another random token");
        assert_eq!(first.hash(), second.hash());
        assert!(first.lines[1].contains("‹value 1›"), "{:?}", first.lines);
    }

    #[test]
    fn two_histories_part_at_their_first_different_line() {
        let one = history(&[observed(1, &["INCR", "fence"], "1"), observed(2, &["GET", "x"], "a")]);
        let two = history(&[observed(1, &["INCR", "fence"], "1"), observed(2, &["GET", "x"], "b")]);
        assert_ne!(one.hash(), two.hash());
        let parting = one.parting(&two).expect("they part");
        assert_eq!(parting.line, 2);
        assert!(parting.first.expect("a line").ends_with("-> a"));
        assert_eq!(one.parting(&one), None);
    }
}
