//! The runner composes: a scenario (its world names the mechanism) and a seed in, a run and
//! its verdicts out.

use crate::check::chain::Chain;
use crate::check::{check_all, violations, Check, Facts};
use crate::mutant::{Mutant, Planted};
use crate::scenario::Scenario;
use fencesim_model::{Cents, RefundId, RefundState, Step, WorkerId, WriteKind};
use fencesim_sim::{run_wired, run_world, trace_hash, write_trace, CallOutcome, EventKind, RunRecord};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The default seed: any seed replays the worked example, this one is what docs show.
pub const DEFAULT_SEED: u64 = 1;

/// One finished run with its verdicts.
pub struct Outcome {
    pub scenario: Scenario,
    pub record: RunRecord,
    pub checks: Vec<Check>,
    pub trace_hash: u64,
    /// The bug of the mutant catalogue planted in the workers, if any.
    pub mutant: Option<Mutant>,
}

/// What a mechanism cost a run beyond the work itself: leases granted beyond the first
/// for each lock key (a job handed over), writes a fence turned away, and writes that found
/// their row already sent by another holder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Costs {
    pub jobs: u64,
    pub handoffs: u64,
    pub fence_rejections: u64,
    #[serde(default)]
    pub found_sent: u64,
}

impl std::ops::AddAssign for Costs {
    fn add_assign(&mut self, more: Costs) {
        self.jobs += more.jobs;
        self.handoffs += more.handoffs;
        self.fence_rejections += more.fence_rejections;
        self.found_sent += more.found_sent;
    }
}

/// What a run did, in counts a reader can compare across mechanisms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub refunds_total: usize,
    pub refunds_sent: usize,
    /// Ledger entries: money movements.
    pub gateway_refunds: usize,
    pub refunded_cents: i64,
    /// Writes a newer fence turned away (each abandons a batch).
    pub fence_rejections: usize,
    /// Fenced writes that found their row already `sent` by another holder: no fence
    /// turned them away (under the article's rule each abandons a batch too).
    pub found_sent: usize,
    /// Money movements beyond the first for a refund.
    pub double_refunds: usize,
    /// Confirms by an epoch other than the row's last accepted claim.
    pub stale_confirms: usize,
    /// Rows with accepted claims from more than one epoch.
    pub rows_claimed_by_two: usize,
    /// Refunds the gateway was asked to pay more than once (idempotent or not).
    pub repeated_gateway_calls: usize,
}

pub fn run(scenario: &Scenario, seed: u64) -> Result<Outcome, String> {
    judge(scenario, run_world(&scenario.world, seed)?, None)
}

/// The same run with `mutant` planted in the workers' ports.
pub fn run_planted(scenario: &Scenario, seed: u64, mutant: Mutant) -> Result<Outcome, String> {
    judge(scenario, run_wired(&scenario.world, seed, Planted(mutant))?, Some(mutant))
}

/// `run`, or `run_planted` when a mutant is given.
pub fn run_with(scenario: &Scenario, seed: u64, mutant: Option<Mutant>) -> Result<Outcome, String> {
    match mutant {
        Some(mutant) => run_planted(scenario, seed, mutant),
        None => run(scenario, seed),
    }
}

/// Checks every invariant over what a run recorded, simulated or live.
pub fn judge(scenario: &Scenario, record: RunRecord, mutant: Option<Mutant>) -> Result<Outcome, String> {
    let checks = check_all(&Facts { record: &record, world: &scenario.world, base: scenario.base });
    let trace_hash = trace_hash(&record.events);
    Ok(Outcome { scenario: scenario.clone(), record, checks, trace_hash, mutant })
}

impl Outcome {
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(Check::is_violation)
    }

    /// The invariants the run broke, in the checkers' order.
    pub fn broken(&self) -> Vec<&'static str> {
        self.checks.iter().filter(|check| check.is_violation()).map(|check| check.invariant).collect()
    }

    pub fn check(&self, invariant: &str) -> &Check {
        self.checks.iter().find(|check| check.invariant == invariant).expect("every invariant is checked")
    }

    pub fn tally(&self) -> Tally {
        let record = &self.record;
        let mut calls: BTreeMap<RefundId, u32> = BTreeMap::new();
        let mut created: BTreeMap<RefundId, u32> = BTreeMap::new();
        let mut claimers: BTreeMap<RefundId, BTreeSet<Option<u32>>> = BTreeMap::new();
        let (mut fence_rejections, mut found_sent) = (0, 0);
        for event in &record.events {
            match &event.kind {
                EventKind::RefundCalled { refund, outcome, .. } => {
                    *calls.entry(*refund).or_default() += 1;
                    if *outcome == CallOutcome::Created {
                        *created.entry(*refund).or_default() += 1;
                    }
                }
                EventKind::Write { write: WriteKind::Claim, refund, rows, epoch, .. } if *rows > 0 => {
                    claimers.entry(*refund).or_default().insert(*epoch);
                }
                EventKind::Step {
                    step: Step::FenceViolation { .. } | Step::SettlementFenceViolation { .. },
                    ..
                } => fence_rejections += 1,
                EventKind::Step { step: Step::RowAlreadySent { .. }, .. } => found_sent += 1,
                _ => {}
            }
        }
        Tally {
            refunds_total: record.final_rows.len(),
            refunds_sent: record.final_rows.iter().filter(|row| row.state == RefundState::Sent).count(),
            gateway_refunds: record.ledger.len(),
            refunded_cents: record.ledger.iter().map(|entry| entry.amount).sum::<Cents>().0,
            fence_rejections,
            found_sent,
            double_refunds: created.values().map(|&times| times as usize - 1).sum(),
            stale_confirms: self.check("no-stale-confirm").breaches.len(),
            rows_claimed_by_two: claimers.values().filter(|epochs| epochs.len() > 1).count(),
            repeated_gateway_calls: calls.values().filter(|&&times| times > 1).count(),
        }
    }

    /// "1200 of 1200 refunds sent, 1200 gateway refunds, 8430000 cents, 1 fence rejection(s)",
    /// and how many writes found their row already sent, when any did.
    pub fn counts_line(&self) -> String {
        let tally = self.tally();
        let found_sent = match tally.found_sent {
            0 => String::new(),
            n => format!(", {n} write(s) found the row already sent"),
        };
        format!(
            "{} of {} refunds sent, {} gateway refunds, {} cents, {} fence rejection(s){found_sent}",
            tally.refunds_sent,
            tally.refunds_total,
            tally.gateway_refunds,
            tally.refunded_cents,
            tally.fence_rejections
        )
    }

    /// The run as one JSON object (`fencesim run --json`).
    pub fn to_json(&self) -> serde_json::Value {
        let tally = self.tally();
        let violations: Vec<_> = violations(&self.checks)
            .map(|(check, breach)| {
                serde_json::json!({
                    "invariant": check.invariant,
                    "at": self.scenario.base.plus(breach.at_ms).to_string(),
                    "detail": breach.detail,
                    "count": check.breaches.len(),
                })
            })
            .collect();
        let mut json = serde_json::json!({
            "scenario": self.scenario.name,
            "mechanism": self.scenario.world.mechanism.name(),
            "gateway": self.scenario.world.gateway_mode.name(),
            "seed": self.record.seed,
            "trace_hash": format!("{:016x}", self.trace_hash),
            "refunds_total": tally.refunds_total,
            "refunds_sent": tally.refunds_sent,
            "gateway_refunds": tally.gateway_refunds,
            "refunded_cents": tally.refunded_cents,
            "fence_rejections": tally.fence_rejections,
            "found_sent": tally.found_sent,
            "double_refunds": tally.double_refunds,
            "stale_confirms": tally.stale_confirms,
            "violations": violations,
        });
        if let Some(settlement) = self.settlement_json() {
            json["settlement"] = settlement;
        }
        json
    }

    /// What the second store saw, in a world that has one: postings taken and turned away,
    /// the refunds posted more than once, the journal's length and each merchant's balance.
    fn settlement_json(&self) -> Option<serde_json::Value> {
        self.scenario.world.settlement?;
        let (mut taken, mut turned_away) = (BTreeMap::<RefundId, u32>::new(), 0u64);
        for event in &self.record.events {
            if let EventKind::SettlementPosted { refund, rows, .. } = &event.kind {
                match rows {
                    0 => turned_away += 1,
                    _ => *taken.entry(*refund).or_default() += 1,
                }
            }
        }
        let balances: Vec<_> = self
            .record
            .settlement_balances
            .iter()
            .map(|(merchant, cents)| serde_json::json!({ "merchant": merchant.to_string(), "balance_cents": cents.0 }))
            .collect();
        Some(serde_json::json!({
            "postings": taken.values().map(|&n| u64::from(n)).sum::<u64>(),
            "postings_turned_away": turned_away,
            "refunds_posted_twice": taken.values().filter(|&&n| n > 1).count(),
            "entries": self.record.settlement_entries.len(),
            "balances": balances,
        }))
    }

    /// The history as JSON Lines.
    pub fn trace_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.record.events.len() * 160);
        write_trace(&self.record.events, self.scenario.base, &mut out)
            .expect("writing to memory cannot fail");
        out
    }

    /// One line per broken invariant (and, with `diagnostics`, per broken diagnostic):
    /// how often, the first time, and what happened then.
    pub fn breach_lines(&self, prefix: &str, diagnostics: bool) -> String {
        let mut out = String::new();
        for check in
            self.checks.iter().filter(|check| check.is_violation() || (diagnostics && !check.holds()))
        {
            let breach = &check.breaches[0];
            out.push_str(&format!(
                "{prefix}{} ({}), first at {}: {}\n",
                check.invariant,
                match check.breaches.len() {
                    1 => "once".to_owned(),
                    count => format!("{count} times"),
                },
                self.scenario.base.plus(breach.at_ms),
                breach.detail
            ));
        }
        out
    }

    /// The command that reproduces this run.
    pub fn replay_command(&self) -> String {
        let planted = self.mutant.map(|mutant| format!(" --mutant {mutant}")).unwrap_or_default();
        format!(
            "fencesim run --scenario {} {} --gateway {} --seed {}{planted}",
            self.scenario.name,
            crate::mechanism_file::option_for(self.scenario.world.mechanism),
            self.scenario.world.gateway_mode.name(),
            self.record.seed
        )
    }

    /// The chain of `check`'s first breach, found as its invariant says, and the planted
    /// bug's acts in this run (none without a mutant).
    fn chain_and_acts(&self, check: &Check) -> Option<(Chain, Vec<usize>)> {
        let breach = check.breaches.first()?;
        let invariant = crate::check::invariant(check.invariant)?;
        let facts = Facts { record: &self.record, world: &self.scenario.world, base: self.scenario.base };
        let acts = self.mutant.map_or_else(Vec::new, |mutant| crate::mutant::acts(mutant, &facts));
        Some(((invariant.chain)(&facts, breach), acts))
    }

    /// The chain of `check`'s first breach; with a mutant planted, its summary first says
    /// where the chain passes through the bug's act, or that it does not.
    pub fn chain(&self, check: &Check) -> Option<Chain> {
        let (mut chain, acts) = self.chain_and_acts(check)?;
        let Some(mutant) = self.mutant else { return Some(chain) };
        chain.summary = match chain.steps.iter().find(|step| acts.contains(&step.event)) {
            Some(step) => format!(
                "the planted bug ({mutant}) acts at {}: {}. {}",
                self.scenario.base.plus(step.at_ms),
                step.text,
                chain.summary
            ),
            None => format!("this chain does not pass through the planted bug ({mutant}): {}", chain.summary),
        };
        Some(chain)
    }

    /// Whether the chain of `check`'s first breach passes through an act of the planted bug
    /// (false without one).
    pub fn through_the_bug(&self, check: &Check) -> bool {
        self.chain_and_acts(check).is_some_and(|(chain, acts)| chain.passes_through(&acts))
    }

    /// Each violation's chain, in the table's order.
    pub fn chains(&self) -> Vec<(&'static str, Chain)> {
        let failing = self.checks.iter().filter(|check| check.is_violation());
        failing.filter_map(|check| Some((check.invariant, self.chain(check)?))).collect()
    }

    /// Which worker was the first to hold an epoch, for stories told about it.
    pub fn epoch_holder(&self, epoch: u32) -> Option<WorkerId> {
        self.record.epochs.get(epoch as usize - 1).map(|held| held.worker)
    }
}
