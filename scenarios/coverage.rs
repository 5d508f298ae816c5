//! Coverage: what a set of runs exercised. Which fault kinds fired, at which protocol
//! steps faults were triggered, and the `sometimes` checks that show a suite reached the
//! situations it claims to test.

use crate::random::TRIGGER_STEPS;
use fencesim_sim::{EventKind, FaultName, RunRecord, Trigger};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Situations a suite should reach at least sometimes.
pub const SOMETIMES: [&str; 4] = [
    "a lease expired while held",
    "a stale write was rejected",
    "a job was delivered again",
    "a counter went backwards",
];

/// What one run exercised, in a few bytes: an exploration keeps one per seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// One bit per fault kind that fired.
    pub fault_kinds: u16,
    /// Faults fired by a step trigger, per step of `TRIGGER_STEPS`.
    pub step_triggers: [u16; TRIGGER_STEPS.len()],
    /// One bit per `SOMETIMES` situation reached.
    pub sometimes: u8,
}

impl Touched {
    pub fn of(record: &RunRecord) -> Touched {
        let mut t = Touched::default();
        let mut last_token: BTreeMap<&str, i64> = BTreeMap::new();
        for e in &record.events {
            match &e.kind {
                EventKind::FaultFired { fault, trigger } => {
                    t.fault_kinds |= 1 << fault.kind() as usize;
                    if let Trigger::Step { step, .. } = trigger {
                        if let Some(i) = TRIGGER_STEPS.iter().position(|s| s == step) {
                            t.step_triggers[i] = t.step_triggers[i].saturating_add(1);
                        }
                    }
                }
                EventKind::LeaseExpired { epoch: Some(_), .. } => t.sometimes |= 1,
                EventKind::Write { rows: 0, token: Some(_), .. } => t.sometimes |= 2,
                EventKind::JobDelivered { delivery, .. } if *delivery > 1 => t.sometimes |= 4,
                EventKind::TokenIssued { key, token, .. } => {
                    let previous = last_token.insert(key.as_str(), token.0);
                    t.sometimes |= u8::from(previous.is_some_and(|prev| token.0 <= prev)) << 3;
                }
                _ => {}
            }
        }
        t
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub runs: u64,
    /// Runs in which each fault kind fired, by kind name.
    pub fault_kinds: BTreeMap<&'static str, u64>,
    /// Faults fired by a step trigger, by step name.
    pub step_triggers: BTreeMap<&'static str, u64>,
    /// Runs in which each `sometimes` situation happened.
    pub sometimes: BTreeMap<&'static str, u64>,
}

impl Coverage {
    pub fn new() -> Coverage {
        Coverage {
            runs: 0,
            fault_kinds: FaultName::all().map(|kind| (kind.name(), 0)).collect(),
            step_triggers: TRIGGER_STEPS.iter().map(|s| (s.name(), 0)).collect(),
            sometimes: SOMETIMES.iter().map(|n| (*n, 0)).collect(),
        }
    }

    /// Adds what one run exercised.
    pub fn add(&mut self, t: &Touched) {
        self.runs += 1;
        for (i, name) in FaultName::all().map(FaultName::name).enumerate() {
            if t.fault_kinds & (1 << i) != 0 {
                *self.fault_kinds.entry(name).or_default() += 1;
            }
        }
        for (i, step) in TRIGGER_STEPS.iter().enumerate() {
            *self.step_triggers.entry(step.name()).or_default() += u64::from(t.step_triggers[i]);
        }
        for (i, name) in SOMETIMES.iter().enumerate() {
            if t.sometimes & (1 << i) != 0 {
                *self.sometimes.entry(name).or_default() += 1;
            }
        }
    }

    /// The fault kinds that never fired.
    pub fn silent_fault_kinds(&self) -> Vec<&'static str> {
        self.fault_kinds.iter().filter(|(_, n)| **n == 0).map(|(k, _)| *k).collect()
    }

    pub fn render(&self) -> String {
        let mut out = format!("coverage over {} runs\n  fault kinds fired (runs):", self.runs);
        for (k, v) in &self.fault_kinds {
            let _ = write!(out, " {k} {v},");
        }
        out.pop();
        out.push_str("\n  faults triggered at steps:");
        for (k, v) in &self.step_triggers {
            let _ = write!(out, " {k} {v},");
        }
        out.pop();
        out.push_str("\n  sometimes (runs):");
        for (k, v) in &self.sometimes {
            let _ = write!(out, " {k}: {v};");
        }
        out.pop();
        out.push('\n');
        out
    }
}
