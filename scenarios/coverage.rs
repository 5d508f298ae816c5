//! Coverage: what a set of runs exercised. Which fault kinds fired, at which protocol
//! steps faults were triggered, and the `sometimes` checks that show a suite reached the
//! situations it claims to test.

use fencesim_sim::{EventKind, FaultKind, RunRecord, Trigger};
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
            fault_kinds: FaultKind::NAMES.iter().map(|n| (*n, 0)).collect(),
            step_triggers: crate::random::TRIGGER_STEPS.iter().map(|s| (s.name(), 0)).collect(),
            sometimes: SOMETIMES.iter().map(|n| (*n, 0)).collect(),
        }
    }

    /// Adds what one run exercised.
    pub fn add(&mut self, record: &RunRecord) {
        self.runs += 1;
        let mut kinds = [false; FaultKind::NAMES.len()];
        let mut seen = [false; SOMETIMES.len()];
        let mut last_token: BTreeMap<&str, i64> = BTreeMap::new();
        for e in &record.events {
            match &e.kind {
                EventKind::FaultFired { fault, trigger } => {
                    kinds[fault.index()] = true;
                    if let Trigger::Step { step, .. } = trigger {
                        *self.step_triggers.entry(step.name()).or_default() += 1;
                    }
                }
                EventKind::LeaseExpired { epoch: Some(_), .. } => seen[0] = true,
                EventKind::Write { rows: 0, token: Some(_), .. } => seen[1] = true,
                EventKind::JobDelivered { delivery, .. } if *delivery > 1 => seen[2] = true,
                EventKind::TokenIssued { key, token, .. }
                    if last_token.insert(key.as_str(), token.0).is_some_and(|prev| token.0 <= prev) =>
                {
                    seen[3] = true;
                }
                _ => {}
            }
        }
        for (i, fired) in kinds.iter().enumerate() {
            if *fired {
                *self.fault_kinds.entry(FaultKind::NAMES[i]).or_default() += 1;
            }
        }
        for (i, hit) in seen.iter().enumerate() {
            if *hit {
                *self.sometimes.entry(SOMETIMES[i]).or_default() += 1;
            }
        }
    }

    pub fn merge(&mut self, other: &Coverage) {
        self.runs += other.runs;
        for (k, v) in &other.fault_kinds {
            *self.fault_kinds.entry(k).or_default() += v;
        }
        for (k, v) in &other.step_triggers {
            *self.step_triggers.entry(k).or_default() += v;
        }
        for (k, v) in &other.sometimes {
            *self.sometimes.entry(k).or_default() += v;
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
