//! Coverage: what a set of runs exercised. Which fault kinds fired, at which protocol
//! steps faults were triggered, and the `sometimes` checks that show a suite reached the
//! situations it claims to test.

use crate::scenario::random::TRIGGER_STEPS;
use fencesim_model::{Step, RETRY};
use fencesim_sim::{EventKind, FaultName, Hop, RunRecord, Trigger, WorldConfig};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use strum::EnumCount;

/// Situations a suite should reach at least sometimes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sometimes {
    LeaseExpiredWhileHeld,
    StaleWriteRejected,
    JobDeliveredAgain,
    CounterWentBackwards,
    RefundTimedOut,
    GatewayErrorRetried,
    RedisRefused,
    RefundsArrivedWhileLeased,
    RowFoundSent,
    FailoverLostLease,
    FailoverSentCounterBack,
    LookupSaidNoForAPaidRefund,
}

impl Sometimes {
    pub const ALL: [Sometimes; 12] = [
        Sometimes::LeaseExpiredWhileHeld,
        Sometimes::StaleWriteRejected,
        Sometimes::JobDeliveredAgain,
        Sometimes::CounterWentBackwards,
        Sometimes::RefundTimedOut,
        Sometimes::GatewayErrorRetried,
        Sometimes::RedisRefused,
        Sometimes::RefundsArrivedWhileLeased,
        Sometimes::RowFoundSent,
        Sometimes::FailoverLostLease,
        Sometimes::FailoverSentCounterBack,
        Sometimes::LookupSaidNoForAPaidRefund,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Sometimes::LeaseExpiredWhileHeld => "a lease expired while held",
            Sometimes::StaleWriteRejected => "a stale write was rejected by a newer fence",
            Sometimes::JobDeliveredAgain => "a job was delivered again",
            Sometimes::CounterWentBackwards => "a counter went backwards",
            Sometimes::RefundTimedOut => "a refund call timed out",
            Sometimes::GatewayErrorRetried => "a gateway request was retried",
            Sometimes::RedisRefused => "a Redis command was refused while it restarted",
            Sometimes::RefundsArrivedWhileLeased => "refunds arrived while their merchant's lease was held",
            Sometimes::RowFoundSent => "a write found its row already sent by another holder",
            Sometimes::FailoverLostLease => "a failover lost a lease key",
            Sometimes::FailoverSentCounterBack => "a failover sent a counter back",
            Sometimes::LookupSaidNoForAPaidRefund => "a lookup said no for a refund the ledger had",
        }
    }
}

/// A small set of indices, one bit each: an exploration keeps one per seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bits(u32);

const _: () = assert!(FaultName::COUNT <= 32 && Sometimes::ALL.len() <= 32, "Bits holds 32");

impl Bits {
    pub fn insert(&mut self, index: usize) {
        self.0 |= 1 << index;
    }

    pub fn contains(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }
}

/// What one run exercised, in a few bytes: an exploration keeps one per seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// The fault kinds that fired, by `FaultKind::index`.
    pub fault_kinds: Bits,
    /// Faults fired by a step trigger, per step of `TRIGGER_STEPS`.
    pub step_triggers: [u16; TRIGGER_STEPS.len()],
    /// Faults fired by a call trigger, per hop.
    pub call_triggers: [u16; Hop::COUNT],
    /// Faults fired by a within trigger, per hop.
    pub within_triggers: [u16; Hop::COUNT],
    /// The `Sometimes` situations reached, by their place in `Sometimes::ALL`.
    pub sometimes: Bits,
    /// What the mechanism cost, counted in the same pass: leases granted (each job needs
    /// one; every one more is a handoff), writes a fence turned away, and writes that found
    /// their row already sent by another holder.
    pub leases: u32,
    pub fence_rejections: u32,
    pub found_sent: u32,
}

impl Touched {
    fn triggered(&mut self, trigger: &Trigger) {
        match trigger {
            Trigger::Step { step, .. } => {
                if let Some(i) = TRIGGER_STEPS.iter().position(|known| known == step) {
                    self.step_triggers[i] = self.step_triggers[i].saturating_add(1);
                }
            }
            Trigger::Call { hop, .. } => {
                self.call_triggers[*hop as usize] = self.call_triggers[*hop as usize].saturating_add(1)
            }
            Trigger::Within { hop, .. } => {
                self.within_triggers[*hop as usize] = self.within_triggers[*hop as usize].saturating_add(1)
            }
            Trigger::At { .. } => {}
        }
    }

    fn reached(&mut self, situation: Sometimes) {
        self.sometimes.insert(situation as usize);
    }

    /// Tells `on_mark` each situation reached now that was not reached `before`.
    fn tell_reached(&self, before: Bits, at_ms: u64, on_mark: &mut impl FnMut(Mark)) {
        if self.sometimes == before {
            return;
        }
        for situation in Sometimes::ALL {
            if self.sometimes.contains(situation as usize) && !before.contains(situation as usize) {
                on_mark(Mark::Reached { situation, at_ms });
            }
        }
    }

    pub fn of(record: &RunRecord, world: &WorldConfig) -> Touched {
        Touched::scan(record, world, |_| {})
    }

    /// `of`, telling `on_mark` each fault as it fires and each situation the first time
    /// it is reached, in the run's order: what a guided search reads a run's path from.
    pub fn scan(record: &RunRecord, world: &WorldConfig, mut on_mark: impl FnMut(Mark)) -> Touched {
        let mut touched = Touched::default();
        let mut last_token: BTreeMap<&str, i64> = BTreeMap::new();
        // the lease keys held now, from a grant to the first instance that lets go
        let mut held: BTreeSet<&str> = BTreeSet::new();
        for event in &record.events {
            let before = touched.sometimes;
            match &event.kind {
                EventKind::FaultFired { fault, trigger } => {
                    touched.fault_kinds.insert(fault.kind() as usize);
                    touched.triggered(trigger);
                    on_mark(Mark::Fired { kind: fault.kind(), trigger: *trigger, at_ms: event.at_ms });
                }
                EventKind::LeaseExpired { key, epoch: Some(_), .. } => {
                    held.remove(key.as_str());
                    touched.reached(Sometimes::LeaseExpiredWhileHeld)
                }
                EventKind::JobDelivered { delivery, .. } if *delivery > 1 => {
                    touched.reached(Sometimes::JobDeliveredAgain)
                }
                EventKind::RefundTimedOut { .. } => touched.reached(Sometimes::RefundTimedOut),
                EventKind::RedisRefused { .. } => touched.reached(Sometimes::RedisRefused),
                EventKind::LookupBehind { .. } => touched.reached(Sometimes::LookupSaidNoForAPaidRefund),
                EventKind::Step { step: Step::GatewayFailed { attempt, .. }, .. }
                    if *attempt < RETRY.tries =>
                {
                    touched.reached(Sometimes::GatewayErrorRetried)
                }
                EventKind::LeaseGranted { key, epoch: Some(_), .. } => {
                    touched.leases += 1;
                    held.insert(key.as_str());
                }
                EventKind::LeaseReleased { key, deleted: true, .. }
                | EventKind::LeaseDeleted { key, holder: Some(_), .. }
                | EventKind::LeaseExpired { key, epoch: None, .. } => {
                    held.remove(key.as_str());
                }
                EventKind::RefundsArrived { merchant, .. } if leased(&held, world, *merchant) => {
                    touched.reached(Sometimes::RefundsArrivedWhileLeased)
                }
                EventKind::Step {
                    step: Step::FenceViolation { .. } | Step::SettlementFenceViolation { .. },
                    ..
                } => {
                    touched.fence_rejections += 1;
                    touched.reached(Sometimes::StaleWriteRejected)
                }
                EventKind::Step { step: Step::RowAlreadySent { .. }, .. } => {
                    touched.found_sent += 1;
                    touched.reached(Sometimes::RowFoundSent)
                }
                EventKind::RedisFailedOver { leases_lost, counters_back, .. } => {
                    if *leases_lost > 0 {
                        touched.reached(Sometimes::FailoverLostLease);
                    }
                    if *counters_back > 0 {
                        touched.reached(Sometimes::FailoverSentCounterBack);
                    }
                }
                EventKind::TokenIssued { key, token, .. } => {
                    let previous = last_token.insert(key.as_str(), token.0);
                    if previous.is_some_and(|previous| token.0 <= previous) {
                        touched.reached(Sometimes::CounterWentBackwards);
                    }
                }
                _ => {}
            }
            touched.tell_reached(before, event.at_ms, &mut on_mark);
        }
        touched
    }
}

/// Whether one of the keys `merchant`'s lease may be held at is held now.
fn leased(held: &BTreeSet<&str>, world: &WorldConfig, merchant: fencesim_model::MerchantId) -> bool {
    world.mechanism.spec().lease_keys(merchant, world.workers).iter().any(|key| held.contains(key.as_str()))
}

/// A moment of a run's path, as `Touched::scan` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A fault of this kind fired, by this trigger.
    Fired { kind: FaultName, trigger: Trigger, at_ms: u64 },
    /// The run reached this situation for the first time.
    Reached { situation: Sometimes, at_ms: u64 },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub runs: u64,
    /// Runs in which each fault kind fired, by kind name.
    pub fault_kinds: BTreeMap<&'static str, u64>,
    /// Faults fired by a step trigger, by step name.
    pub step_triggers: BTreeMap<&'static str, u64>,
    /// Faults fired by a call trigger, by what the hop counts ("Redis command", ...).
    pub call_triggers: BTreeMap<&'static str, u64>,
    /// Faults fired by a within trigger (inside an operation), by what the hop counts.
    pub within_triggers: BTreeMap<&'static str, u64>,
    /// Runs in which each `sometimes` situation happened.
    pub sometimes: BTreeMap<&'static str, u64>,
}

impl Coverage {
    pub fn new() -> Coverage {
        Coverage {
            runs: 0,
            fault_kinds: FaultName::all().map(|kind| (kind.name(), 0)).collect(),
            step_triggers: TRIGGER_STEPS.iter().map(|step| (step.name(), 0)).collect(),
            call_triggers: Hop::all().map(|hop| (hop.call_name(), 0)).collect(),
            within_triggers: Hop::all().map(|hop| (hop.call_name(), 0)).collect(),
            sometimes: Sometimes::ALL.iter().map(|situation| (situation.name(), 0)).collect(),
        }
    }

    /// Adds what one run exercised.
    pub fn add(&mut self, touched: &Touched) {
        self.runs += 1;
        for (index, name) in FaultName::all().map(FaultName::name).enumerate() {
            if touched.fault_kinds.contains(index) {
                *self.fault_kinds.entry(name).or_default() += 1;
            }
        }
        for (index, step) in TRIGGER_STEPS.iter().enumerate() {
            *self.step_triggers.entry(step.name()).or_default() += u64::from(touched.step_triggers[index]);
        }
        for hop in Hop::all() {
            *self.call_triggers.entry(hop.call_name()).or_default() +=
                u64::from(touched.call_triggers[hop as usize]);
            *self.within_triggers.entry(hop.call_name()).or_default() +=
                u64::from(touched.within_triggers[hop as usize]);
        }
        for situation in Sometimes::ALL {
            if touched.sometimes.contains(situation as usize) {
                *self.sometimes.entry(situation.name()).or_default() += 1;
            }
        }
    }

    /// Adds the counts of another coverage, as its JSON gives them (a shard's): every
    /// count this build keeps must be there, by name.
    pub fn absorb(&mut self, other: &serde_json::Value) -> Result<(), String> {
        self.runs += other["runs"].as_u64().ok_or("a coverage without its runs")?;
        let tables = [
            ("fault_kinds", &mut self.fault_kinds),
            ("step_triggers", &mut self.step_triggers),
            ("call_triggers", &mut self.call_triggers),
            ("within_triggers", &mut self.within_triggers),
            ("sometimes", &mut self.sometimes),
        ];
        for (table, counts) in tables {
            for (name, count) in counts.iter_mut() {
                *count += other[table][*name]
                    .as_u64()
                    .ok_or_else(|| format!("a coverage without {table} '{name}'"))?;
            }
        }
        Ok(())
    }

    /// The fault kinds that never fired.
    pub fn silent_fault_kinds(&self) -> Vec<&'static str> {
        self.fault_kinds.iter().filter(|(_, runs)| **runs == 0).map(|(kind, _)| *kind).collect()
    }

    pub fn render(&self) -> String {
        let mut out = format!("coverage over {} runs\n  fault kinds fired (runs):", self.runs);
        for (kind, runs) in &self.fault_kinds {
            let _ = write!(out, " {kind} {runs},");
        }
        out.pop();
        out.push_str("\n  faults triggered at steps:");
        for (step, faults) in &self.step_triggers {
            let _ = write!(out, " {step} {faults},");
        }
        out.pop();
        out.push_str("\n  faults triggered at calls:");
        for (call, faults) in &self.call_triggers {
            let _ = write!(out, " {call} {faults},");
        }
        out.pop();
        out.push_str("\n  faults triggered inside an operation:");
        for (call, faults) in &self.within_triggers {
            let _ = write!(out, " {call} {faults},");
        }
        out.pop();
        out.push_str("\n  sometimes (runs):");
        for (situation, runs) in &self.sometimes {
            let _ = write!(out, " {situation}: {runs};");
        }
        out.pop();
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_situation_and_fault_kind_has_a_bit_of_its_own() {
        // the kinds and situations fit a `Bits` (checked where it is declared)
        for (index, situation) in Sometimes::ALL.iter().enumerate() {
            assert_eq!(*situation as usize, index);
        }
    }
}
