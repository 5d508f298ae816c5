//! What a team's worker did at Redis, read from its proxy's record: each request and reply
//! becomes the event the simulated Redis would have recorded for it (a lease granted or
//! refused, a token issued, a lease read, released, extended, deleted or set), and the
//! step of the worker's that the reply shows (it holds the lease, it has its token).
//!
//! Which keys are leases and counters is the world's (its mechanism's key shapes); a
//! request on any other key is not a lease's. A script is known by what it does to the
//! lease key: one that deletes it is a release (deleted when it answers 1), one that
//! re-arms its expiry an extension; its text is read from the request itself (`EVAL`,
//! `SCRIPT LOAD`), or by its digest from an earlier one (`EVALSHA`).
//!
//! A request's event is put at the middle of its round trip: the server did it somewhere
//! between the request leaving the proxy and the reply coming back.

use crate::live::log::LogLine;
use crate::live::proxy::Observed;
use fencesim_model::{MerchantId, Step, Token, WorkerId};
use fencesim_sim::{EventKind, WorldConfig};
use std::collections::{BTreeMap, BTreeSet};

/// The world's lease keys (each with its merchant) and counter keys.
pub struct Keys {
    leases: BTreeMap<String, MerchantId>,
    counters: BTreeSet<String>,
}

impl Keys {
    pub fn of(world: &WorldConfig) -> Keys {
        let spec = world.mechanism.spec();
        let merchants: BTreeSet<MerchantId> = world.rows.iter().map(|row| row.merchant).collect();
        let leases = merchants
            .iter()
            .flat_map(|&m| spec.lease_keys(m, world.workers).into_iter().map(move |key| (key, m)))
            .collect();
        let counters = merchants.iter().flat_map(|&m| spec.counter_keys(m, world.workers)).collect();
        Keys { leases, counters }
    }

    /// Every lease key of the world.
    pub fn lease_keys(&self) -> impl Iterator<Item = &String> {
        self.leases.keys()
    }

    pub fn lease(&self, key: &str) -> Option<MerchantId> {
        self.leases.get(key).copied()
    }

    pub fn counter(&self, key: &str) -> bool {
        self.counters.contains(key)
    }
}

/// What the reading keeps from one request to the next.
#[derive(Default)]
struct Reading {
    /// Scripts by their digest.
    scripts: BTreeMap<String, String>,
    /// The value each lease key was last given.
    holders: BTreeMap<String, String>,
    /// Leases each worker was granted so far.
    acquisitions: BTreeMap<WorkerId, u32>,
}

/// Every worker's Redis requests (`seen`: the worker and the proxy's record), as the events
/// they stand for, in wall-clock microseconds. `scale`: real time per story time.
pub fn events(seen: &[(WorkerId, Observed)], keys: &Keys, scale: f64) -> Vec<LogLine> {
    let mut order: Vec<&(WorkerId, Observed)> = seen.iter().collect();
    order.sort_by_key(|(_, o)| (o.answered_us, o.sent_us));
    let mut reading = Reading::default();
    let mut lines = Vec::new();
    for (worker, observed) in order {
        let at_us = observed.sent_us + (observed.answered_us - observed.sent_us) / 2;
        for happened in reading.read(*worker, observed, keys, scale) {
            lines.push(LogLine { at_us, happened, sent_us: None });
        }
    }
    lines
}

/// A number of milliseconds of real time as story milliseconds.
fn story(real_ms: u64, scale: f64) -> u64 {
    (real_ms as f64 / scale).round() as u64
}

/// The expiry a `SET` asks for, in real milliseconds.
fn ttl_of(options: &[String]) -> Option<u64> {
    let upper: Vec<String> = options.iter().map(|o| o.to_ascii_uppercase()).collect();
    let at = |name: &str| {
        upper.iter().position(|o| o == name).and_then(|i| options.get(i + 1)?.parse::<u64>().ok())
    };
    at("PX").or_else(|| at("EX").map(|s| s * 1000))
}

impl Reading {
    fn read(&mut self, worker: WorkerId, o: &Observed, keys: &Keys, scale: f64) -> Vec<EventKind> {
        let Some(command) = o.args.first().map(|c| c.to_ascii_uppercase()) else { return Vec::new() };
        let arg = |i: usize| o.args.get(i).cloned().unwrap_or_default();
        match command.as_str() {
            "SET" => self.set(worker, o, keys, scale),
            "INCR" | "INCRBY" if keys.counters.contains(&arg(1)) => match o.reply.parse::<i64>() {
                Ok(token) => vec![
                    EventKind::TokenIssued { worker, key: arg(1), token: Token(token) },
                    EventKind::Step { worker, step: Step::TokenTaken { token: Token(token) } },
                ],
                Err(_) => Vec::new(),
            },
            "GET" if keys.lease(&arg(1)).is_some() => {
                let holder = (o.reply != "(nil)").then(|| o.reply.clone());
                vec![EventKind::LeaseRead { worker, instance: 0, key: arg(1), holder }]
            }
            "DEL" | "UNLINK" => self.delete(worker, o, keys),
            // a delete that answers with the value it took: whose lease it ended is in the reply
            "GETDEL" if keys.lease(&arg(1)).is_some() => {
                let holder = (o.reply != "(nil)").then(|| o.reply.clone());
                if holder.is_some() {
                    self.holders.remove(&arg(1));
                }
                vec![EventKind::LeaseDeleted { worker, instance: 0, key: arg(1), holder }]
            }
            "PEXPIRE" | "EXPIRE" if keys.lease(&arg(1)).is_some() => {
                let real_ms = arg(2).parse::<u64>().unwrap_or(0) * if command == "EXPIRE" { 1000 } else { 1 };
                let holder = (o.reply == "1").then(|| self.holders.get(&arg(1)).cloned()).flatten();
                let ttl_ms = story(real_ms, scale);
                vec![EventKind::LeaseRearmed { worker, instance: 0, key: arg(1), holder, ttl_ms }]
            }
            "SCRIPT" if arg(1).eq_ignore_ascii_case("LOAD") => {
                self.scripts.insert(fencesim_sim::redis::sha1_hex(&arg(2)), arg(2));
                Vec::new()
            }
            "EVAL" | "EVALSHA" => self.script(worker, o, keys, command == "EVAL"),
            _ => Vec::new(),
        }
    }

    fn set(&mut self, worker: WorkerId, o: &Observed, keys: &Keys, scale: f64) -> Vec<EventKind> {
        let (Some(key), Some(value)) = (o.args.get(1), o.args.get(2)) else { return Vec::new() };
        let Some(merchant) = keys.lease(key) else { return Vec::new() };
        let options = &o.args[3..];
        let ttl_ms = story(ttl_of(options).unwrap_or(0), scale);
        let (key, value) = (key.clone(), value.clone());
        let nx = options.iter().any(|o| o.eq_ignore_ascii_case("NX"));
        match (nx, o.reply == "OK") {
            (true, true) => {
                self.holders.insert(key.clone(), value.clone());
                let acquisition = self.acquisitions.entry(worker).or_default();
                *acquisition += 1;
                let step = Step::LeaseAcquired { merchant, acquisition: *acquisition };
                vec![
                    EventKind::LeaseGranted { worker, instance: 0, key, value, ttl_ms, epoch: None },
                    EventKind::Step { worker, step },
                ]
            }
            (true, false) => vec![
                EventKind::LeaseRefused { worker, instance: 0, key },
                EventKind::Step { worker, step: Step::LeaseBusy { merchant } },
            ],
            (false, true) => {
                self.holders.insert(key.clone(), value.clone());
                vec![EventKind::LeaseSet { worker, instance: 0, key, value, ttl_ms }]
            }
            (false, false) => Vec::new(),
        }
    }

    fn delete(&mut self, worker: WorkerId, o: &Observed, keys: &Keys) -> Vec<EventKind> {
        let removed = o.reply.parse::<u64>().unwrap_or(0) > 0;
        let leases = o.args[1..].iter().filter(|key| keys.lease(key).is_some());
        leases
            .map(|key| {
                let holder = if removed { self.holders.remove(key) } else { None };
                EventKind::LeaseDeleted { worker, instance: 0, key: key.clone(), holder }
            })
            .collect()
    }

    /// A script on a lease key: a release if it deletes the key, an extension if it
    /// re-arms its expiry (its first argument the holder's value in either case).
    fn script(&mut self, worker: WorkerId, o: &Observed, keys: &Keys, eval: bool) -> Vec<EventKind> {
        let Some(body) = o.args.get(1).cloned() else { return Vec::new() };
        let text = match eval {
            true => {
                self.scripts.insert(fencesim_sim::redis::sha1_hex(&body), body.clone());
                body
            }
            false => match self.scripts.get(&body.to_ascii_lowercase()) {
                Some(text) => text.clone(),
                None => return Vec::new(),
            },
        };
        let count = o.args.get(2).and_then(|n| n.parse::<usize>().ok()).unwrap_or(0);
        let (Some(key), value) = (o.args.get(3).filter(|_| count > 0), o.args.get(3 + count)) else {
            return Vec::new();
        };
        if keys.lease(key).is_none() || o.reply.starts_with("(error)") {
            return Vec::new();
        }
        let (key, value, done) = (key.clone(), value.cloned().unwrap_or_default(), o.reply == "1");
        let lower = text.to_ascii_lowercase();
        if lower.contains("'del'") || lower.contains("\"del\"") || lower.contains("'unlink'") {
            if done {
                self.holders.remove(&key);
            }
            let released = EventKind::LeaseReleased { worker, instance: 0, key, value, deleted: done };
            vec![released, EventKind::Step { worker, step: Step::Released { released: done } }]
        } else if lower.contains("expire") {
            vec![EventKind::LeaseExtended { worker, instance: 0, key, extended: done }]
        } else {
            Vec::new()
        }
    }
}
