//! How close a failing run came, and when: its prefix replayed up to a moment, fresh
//! faults after it, many times; the share of those continuations that still break what
//! the run broke, drawn against the moment, shows where the failure became likely.
//!
//! A continuation is the same world and the same seed with the plan cut at the moment:
//! the faults that had fired by then kept as they are, the rest replaced by as many fresh
//! ones, each at a time after the moment. Nothing before the moment can tell the two plans
//! apart (a fault acts only when it fires), so the continuation's history up to the
//! moment is the failing run's, event for event; a test holds it to that.

use crate::mutant::Mutant;
use crate::runner::{run_with, Outcome};
use crate::scenario::random::any_fault;
use crate::scenario::{FaultMask, Scenario};
use crate::search::Pool;
use fencesim_sim::{EventKind, Fault, FaultPlan, RunRecord, Trigger};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Continuations tried at each moment unless told otherwise.
pub const TRIES: u32 = 40;

/// One point of the curve.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Moment {
    /// Milliseconds from the start of the run.
    pub at_ms: u64,
    /// The plan's faults that had fired by then, kept in every continuation.
    pub kept: usize,
    pub tried: u32,
    /// Continuations that broke at least one invariant the run broke.
    pub failed: u32,
}

/// The curve of one failing run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Closeness {
    /// What the run broke: a continuation fails when it breaks one of these.
    pub invariants: Vec<&'static str>,
    /// When the run broke its first invariant.
    pub first_breach_ms: u64,
    pub moments: Vec<Moment>,
}

impl Moment {
    /// The share of continuations that failed, from 0 to 1.
    pub fn share(&self) -> f64 {
        if self.tried == 0 {
            0.0
        } else {
            f64::from(self.failed) / f64::from(self.tried)
        }
    }
}

/// Each of the plan's faults with the time it fired in the run, if it did (a plan may hold
/// two equal faults: each firing is matched to the first of them not matched yet).
fn fired_at(outcome: &Outcome) -> Vec<Option<u64>> {
    fired_times(&outcome.record, &outcome.scenario.world.faults.faults)
}

/// `fired_at`, from a run's record and its plan's faults.
pub fn fired_times(record: &RunRecord, faults: &[Fault]) -> Vec<Option<u64>> {
    let mut at = vec![None; faults.len()];
    for event in &record.events {
        let EventKind::FaultFired { fault, trigger } = &event.kind else { continue };
        let unmatched = faults
            .iter()
            .enumerate()
            .find(|(i, planned)| at[*i].is_none() && planned.kind == *fault && planned.trigger == *trigger);
        if let Some((i, _)) = unmatched {
            at[i] = Some(event.at_ms);
        }
    }
    at
}

/// The moments the curve is drawn at: the start, each time a fault fired before the first
/// breach, and as many evenly spaced times as make `count` in all, up to the breach.
fn moments(fired: &[Option<u64>], first_breach_ms: u64, count: usize) -> Vec<u64> {
    let mut at: Vec<u64> = vec![0, first_breach_ms];
    at.extend(fired.iter().flatten().filter(|&&ms| ms <= first_breach_ms));
    at.sort_unstable();
    at.dedup();
    let even = count.saturating_sub(at.len()) as u64;
    at.extend((1..=even).map(|i| first_breach_ms * i / (even + 1)));
    at.sort_unstable();
    at.dedup();
    at
}

/// The run's plan cut at `at_ms`: the faults that had fired by then, and how many did not.
pub fn cut(outcome: &Outcome, at_ms: u64) -> (FaultPlan, usize) {
    cut_fired(outcome, &fired_at(outcome), at_ms)
}

/// `cut`, with each fault's firing time (`fired_at`) already found.
fn cut_fired(outcome: &Outcome, fired: &[Option<u64>], at_ms: u64) -> (FaultPlan, usize) {
    let faults = &outcome.scenario.world.faults.faults;
    let kept: Vec<Fault> = faults
        .iter()
        .zip(fired)
        .filter(|(_, at)| at.is_some_and(|ms| ms <= at_ms))
        .map(|(f, _)| f.clone())
        .collect();
    let dropped = faults.len() - kept.len();
    (FaultPlan { faults: kept }, dropped)
}

/// One continuation's world: the kept plan and `fresh` faults drawn from `rng`, each at a
/// time after `at_ms` within the world's horizon (or just after the moment, past it).
pub fn continuation(
    scenario: &Scenario,
    kept: &FaultPlan,
    at_ms: u64,
    fresh: usize,
    rng: &mut ChaCha8Rng,
) -> Scenario {
    let mut next = scenario.clone();
    let horizon = crate::scenario::random::horizon_ms(&scenario.world).max(at_ms + 1);
    let mut faults = kept.faults.clone();
    for _ in 0..fresh {
        let Some(mut fault) = any_fault(rng, &scenario.world, FaultMask::ALL) else { break };
        fault.trigger = Trigger::At { at_ms: rng.gen_range(at_ms + 1..=horizon) };
        faults.push(fault);
    }
    next.world.faults = FaultPlan { faults };
    next
}

/// The curve of a failing run (`None` for a run that broke nothing): `tries`
/// continuations at each of about `count` moments, on `pool`. The same run gives the same
/// curve: each continuation's faults are drawn from a stream of the moment and its number.
pub fn closeness(
    outcome: &Outcome,
    tries: u32,
    count: usize,
    pool: &Pool,
) -> Result<Option<Closeness>, String> {
    let invariants = outcome.broken();
    let first = crate::check::violations(&outcome.checks).map(|(_, breach)| breach.at_ms).min();
    let (Some(first_breach_ms), false) = (first, invariants.is_empty()) else { return Ok(None) };
    let (seed, mutant) = (outcome.record.seed, outcome.mutant);
    let fired = fired_at(outcome);
    let cuts: Vec<(u64, FaultPlan, usize)> = moments(&fired, first_breach_ms, count)
        .into_iter()
        .map(|at_ms| {
            let (kept, dropped) = cut_fired(outcome, &fired, at_ms);
            (at_ms, kept, dropped)
        })
        .collect();
    let mut result: Vec<Moment> = cuts
        .iter()
        .map(|(at_ms, kept, _)| Moment { at_ms: *at_ms, kept: kept.faults.len(), tried: 0, failed: 0 })
        .collect();
    let tries_each = u64::from(tries.max(1));
    pool.run(
        0..cuts.len() as u64 * tries_each,
        |_| false,
        |item| {
            let (at_ms, kept, dropped) = &cuts[(item / tries_each) as usize];
            let stream = seed ^ at_ms.rotate_left(20) ^ (item % tries_each).rotate_left(40);
            let next = continuation(
                &outcome.scenario,
                kept,
                *at_ms,
                *dropped,
                &mut ChaCha8Rng::seed_from_u64(stream),
            );
            fails(&next, seed, mutant, &invariants)
        },
        |_, _| {},
        |item, failed| {
            let moment = &mut result[(item / tries_each) as usize];
            moment.tried += 1;
            moment.failed += u32::from(failed);
        },
    )?;
    Ok(Some(Closeness { invariants, first_breach_ms, moments: result }))
}

/// Whether a continuation breaks one of `invariants`.
fn fails(
    scenario: &Scenario,
    seed: u64,
    mutant: Option<Mutant>,
    invariants: &[&'static str],
) -> Result<bool, String> {
    let next = run_with(scenario, seed, mutant)?;
    Ok(next.broken().iter().any(|broken| invariants.contains(broken)))
}

/// Where the failure became likely: the moment whose share of failing continuations rose
/// most over the moment before it (the first of equal rises), with that share before it.
/// `None` when the share never rose.
pub fn turning_point(curve: &Closeness) -> Option<(&Moment, f64)> {
    let rises =
        curve.moments.windows(2).map(|pair| (&pair[1], pair[0].share(), pair[1].share() - pair[0].share()));
    let best = rises.fold(None, |best: Option<(&Moment, f64, f64)>, (moment, before, rise)| match best {
        Some((_, _, most)) if most >= rise => best,
        _ => Some((moment, before, rise)),
    });
    best.filter(|(_, _, rise)| *rise > 0.0).map(|(moment, before, _)| (moment, before))
}
