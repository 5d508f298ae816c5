//! New plans from kept ones. Each change keeps the world and the seed, so a run of the
//! new plan follows its parent's path up to the first fault the change touched: a fault
//! added after the moment the parent first reached something new branches from there.
//! A branch (`branch`) does only that: the parent's path replayed to a kept moment, and
//! fresh faults after it.

use crate::scenario::deployment::replan;
use crate::scenario::production::Rates;
use crate::scenario::random::{any_fault, any_size, counter_start, horizon_ms};
use crate::scenario::{FaultMask, Scenario};
use crate::search::guided::corpus::Entry;
use fencesim_model::WorkerId;
use fencesim_sim::{Aim, Fault, FaultPlan, Trigger, WorldConfig};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One change to a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A fault at a time after the moment the parent first reached something new.
    AddAfter,
    /// A fault drawn as the swarm draws one, anywhere.
    Add,
    /// A fault's trigger a little earlier or later.
    Nudge,
    /// A fault's size drawn again.
    Resize,
    /// A fault aimed at another worker, merchant or instance.
    Retarget,
    /// A fault left out.
    Remove,
    /// A fault of another kept plan, aimed into this world.
    Splice,
    /// A merchant's token counter starts elsewhere (as often as the seeds draw it, just
    /// below a digit or a width): the one change to the world, as the bugs of a fence
    /// compared as text or kept narrow need a counter there and no fault to get it.
    Counter,
}

/// The changes to draw from: a removal as likely as the three that add a fault together,
/// so that plans do not grow run after run (a longer plan is a longer, dearer run).
const CHANGES: [Change; 10] = [
    Change::AddAfter,
    Change::Add,
    Change::Splice,
    Change::Nudge,
    Change::Resize,
    Change::Retarget,
    Change::Remove,
    Change::Remove,
    Change::Remove,
    Change::Counter,
];

/// At most this many changes are made at once.
const MOST_CHANGES: u32 = 3;
/// A plan grows to at most this many faults.
const MOST_FAULTS: usize = 12;

/// Targets drawn anew within the world.
fn any_aim(rng: &mut ChaCha8Rng, world: &WorldConfig) -> Aim {
    let worker = WorkerId(rng.gen_range(0..world.workers));
    let merchant = world.jobs[rng.gen_range(0..world.jobs.len())].merchant;
    let instance = rng.gen_range(0..world.redis_instances()) as u8;
    Aim { worker, merchant, instance }
}

fn nudged(trigger: Trigger, rng: &mut ChaCha8Rng, ttl_ms: u64) -> Trigger {
    let step = |nth: u32, rng: &mut ChaCha8Rng| {
        let by = rng.gen_range(1..=2);
        if rng.gen_bool(0.5) {
            nth.saturating_add(by)
        } else {
            nth.saturating_sub(by).max(1)
        }
    };
    match trigger {
        Trigger::At { at_ms } => {
            let by = rng.gen_range(1..=ttl_ms.max(2) / 2);
            let at_ms = if rng.gen_bool(0.5) { at_ms.saturating_add(by) } else { at_ms.saturating_sub(by) };
            Trigger::At { at_ms }
        }
        Trigger::Step { worker, step: kind, nth } => {
            Trigger::Step { worker, step: kind, nth: step(nth, rng) }
        }
        Trigger::Call { worker, hop, nth } => Trigger::Call { worker, hop, nth: step(nth, rng) },
        Trigger::Within { worker, hop, nth } => Trigger::Within { worker, hop, nth: step(nth, rng) },
    }
}

/// A fault of another world aimed into this one: its worker, merchant and instance drawn
/// within this world when they are out of it.
fn fitted(fault: &Fault, world: &WorldConfig, rng: &mut ChaCha8Rng) -> Fault {
    let aim = fault.kind.aim();
    let fresh = any_aim(rng, world);
    let worker = if aim.worker.0 < world.workers { aim.worker } else { fresh.worker };
    let merchant =
        if world.jobs.iter().any(|job| job.merchant == aim.merchant) { aim.merchant } else { fresh.merchant };
    let instance =
        if usize::from(aim.instance) < world.redis_instances() { aim.instance } else { fresh.instance };
    let kind = fault.kind.kind().make(Aim { worker, merchant, instance }, fault.kind.size());
    // the trigger's worker is its own (a fault that names nobody may fire at a worker's step)
    let trigger = match fault.trigger.worker() {
        Some(by) if by.0 >= world.workers => fault.trigger.for_worker(fresh.worker),
        _ => fault.trigger,
    };
    Fault { kind, trigger }
}

/// One change to the plan's `faults` in `world`; `other` is another kept plan to splice
/// from.
fn change_plan(
    faults: &mut Vec<Fault>,
    how: Change,
    world: &WorldConfig,
    (parent, other): (&Entry, &Entry),
    rng: &mut ChaCha8Rng,
    allowed: FaultMask,
) {
    let ttl = world.ttl_ms;
    let pick = |rng: &mut ChaCha8Rng, faults: &Vec<Fault>| rng.gen_range(0..faults.len());
    match how {
        Change::AddAfter | Change::Add if faults.len() < MOST_FAULTS => {
            let Some(mut fault) = any_fault(rng, world, allowed) else { return };
            if how == Change::AddAfter {
                let at_ms = parent.moment_ms + rng.gen_range(0..=ttl.max(horizon_ms(world) / 4));
                fault.trigger = Trigger::At { at_ms };
            }
            faults.push(fault);
        }
        Change::Splice if faults.len() < MOST_FAULTS && !other.plan().faults.is_empty() => {
            let faults_there = &other.plan().faults;
            let fault = faults_there[rng.gen_range(0..faults_there.len())].clone();
            faults.push(fitted(&fault, world, rng));
        }
        Change::Nudge if !faults.is_empty() => {
            let at = pick(rng, faults);
            faults[at].trigger = nudged(faults[at].trigger, rng, ttl);
        }
        Change::Resize if !faults.is_empty() => {
            let at = pick(rng, faults);
            let size = any_size(faults[at].kind.kind(), ttl, rng);
            faults[at].kind = faults[at].kind.resized(size);
        }
        Change::Retarget if !faults.is_empty() => {
            let at = pick(rng, faults);
            let aim = any_aim(rng, world);
            let moved = Fault {
                kind: faults[at].kind.kind().make(aim, faults[at].kind.size()),
                trigger: faults[at].trigger,
            };
            faults[at] = fitted(&moved, world, rng);
            if faults[at].trigger.worker().is_some() && rng.gen_bool(0.5) {
                faults[at].trigger = faults[at].trigger.for_worker(aim.worker);
            }
        }
        Change::Remove if faults.len() > 1 => {
            let at = pick(rng, faults);
            faults.remove(at);
        }
        _ => {}
    }
}

/// A new scenario from `parent`: one to three changes to its plan (or to where a counter
/// of its world starts). None when the changes left a plan the world refuses (the caller
/// draws a fresh world instead).
pub fn mutate(parent: &Entry, other: &Entry, rng: &mut ChaCha8Rng, allowed: FaultMask) -> Option<Scenario> {
    let mut scenario: Scenario = parent.scenario.clone();
    let mut faults = parent.plan().faults.clone();
    for _ in 0..rng.gen_range(1..=MOST_CHANGES) {
        let how = CHANGES[rng.gen_range(0..CHANGES.len())];
        let world = &mut scenario.world;
        if how == Change::Counter && !world.counters.is_empty() {
            let at = rng.gen_range(0..world.counters.len());
            world.counters[at].1 = counter_start(rng);
        } else {
            change_plan(&mut faults, how, world, (parent, other), rng, allowed);
        }
    }
    replan(&mut scenario.world, FaultPlan { faults });
    scenario.world.validate().is_ok().then_some(scenario)
}

/// How a branch is made, under the rates the search draws its fresh worlds under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branching {
    /// One run in this many, after the search's first generation, is a fresh seed's world
    /// and plan, as the uniform search would draw it next; the others are made from the
    /// corpus.
    pub fresh_one_in: u32,
    /// One run in this many of those made from the corpus is a branch; the others change
    /// a kept plan (`mutate`).
    pub branch_one_in: u32,
    /// A branch's moment is drawn from its parent's kept moments (`Entry::points`: its
    /// moment, each time one of its faults fired, each time its run first reached a
    /// situation), not the parent's moment alone.
    pub at_points: bool,
    /// A branch adds from 1 to this many fresh faults after its moment.
    pub most_fresh: u32,
    /// Each fresh fault is aimed, one time in two, at what the last fault kept before the
    /// moment was aimed at (its worker, merchant and instance).
    pub aimed: bool,
    /// Each fresh fault's distance from the moment is drawn as likely within each doubling
    /// (1 ms, 2 to 3, 4 to 7, ...), not evenly over the window.
    pub near: bool,
}

/// The swarm's branch, as `reports/detection.md` measured it: one fresh fault, anywhere in
/// the window after the parent's moment, one run in two of those made from the corpus, and
/// one run in two fresh (one in four measured worse on every planted bug tried: under the
/// swarm's rates the changed plans reach them no more often than fresh draws do).
pub const SWARM_BRANCHING: Branching = Branching {
    fresh_one_in: 2,
    branch_one_in: 2,
    at_points: false,
    most_fresh: 1,
    aimed: false,
    near: false,
};

/// Production's: under rates where most runs have no fault, a fresh run rarely reaches
/// anything and a run that had a rare fault fire is worth many fresh draws, so one run in
/// eight is fresh and every run made from the corpus is a branch, from any moment a fault
/// fired or a situation was first reached, with a handful of fresh faults after it (as a
/// swarm plan has), near the moment and often at the same targets (docs/deep-bugs.md, how
/// each was measured).
pub const PRODUCTION_BRANCHING: Branching =
    Branching { fresh_one_in: 8, branch_one_in: 1, at_points: true, most_fresh: 8, aimed: true, near: true };

impl Branching {
    pub fn of(rates: Rates) -> Branching {
        match rates {
            Rates::Production => PRODUCTION_BRANCHING,
            Rates::Swarm | Rates::ProductionSwarm => SWARM_BRANCHING,
        }
    }
}

/// A branch of `parent` from one of its kept moments (`Entry::points`, or its moment
/// alone): the same world and seed, the faults that had fired by the moment kept as they
/// were and every later one left out (so that the run follows the parent's path up to the
/// moment, event for event, as a continuation of `search::closeness` does), and fresh faults
/// after it, drawn as the swarm draws one. Returns the branch and its moment; None when the
/// world refuses the plan.
pub fn branch(
    parent: &Entry,
    rng: &mut ChaCha8Rng,
    allowed: FaultMask,
    how: Branching,
) -> Option<(Scenario, u64)> {
    let mut scenario: Scenario = parent.scenario.clone();
    let moment = match how.at_points.then(|| parent.points()) {
        Some(points) if points.len() > 1 => points[rng.gen_range(0..points.len())],
        _ => parent.moment_ms,
    };
    let kept: Vec<(&Fault, u64)> = (parent.plan().faults.iter().zip(&parent.features.fired))
        .filter_map(|(fault, at)| at.filter(|ms| *ms <= moment).map(|ms| (fault, ms)))
        .collect();
    let last_aim = kept.iter().max_by_key(|(_, ms)| *ms).map(|(fault, _)| fault.kind.aim());
    let mut faults: Vec<Fault> = kept.iter().map(|(fault, _)| (*fault).clone()).collect();
    let world = &scenario.world;
    let window = world.ttl_ms.max(horizon_ms(world) / 4).max(1);
    let count = if how.most_fresh > 1 { rng.gen_range(1..=how.most_fresh) } else { 1 };
    for _ in 0..count {
        let mut fault = any_fault(rng, world, allowed)?;
        if let (Some(aim), true) = (last_aim, how.aimed && rng.gen_bool(0.5)) {
            let moved =
                Fault { kind: fault.kind.kind().make(aim, fault.kind.size()), trigger: fault.trigger };
            fault = fitted(&moved, world, rng);
        }
        let after = if how.near { near_the_moment(window, rng) } else { rng.gen_range(1..=window) };
        fault.trigger = Trigger::At { at_ms: moment + after };
        faults.push(fault);
    }
    replan(&mut scenario.world, FaultPlan { faults });
    scenario.world.validate().is_ok().then_some((scenario, moment))
}

/// How long after its moment a branch's fault comes, from 1 ms to `window`: a doubling
/// (1, 2 to 3, 4 to 7, ...) drawn first, each as likely, then a time within it, so that
/// the next request or two after the moment, where a race lives, is drawn as often as the
/// whole rest of a doubling further on.
pub fn near_the_moment(window: u64, rng: &mut ChaCha8Rng) -> u64 {
    let window = window.max(1);
    let doublings = u64::BITS - window.leading_zeros();
    let low = 1u64 << rng.gen_range(0..doublings);
    rng.gen_range(low..=(low * 2 - 1).min(window))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_fault_near_the_moment_is_drawn_as_often_in_each_doubling() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        assert!((0..100).all(|_| near_the_moment(1, &mut rng) == 1));
        assert!((0..100).all(|_| near_the_moment(0, &mut rng) == 1));
        // 4,096 ms holds 13 doublings (1, 2-3, ..., 4,096): the first five end at 31 ms
        let draws: Vec<u64> = (0..13_000).map(|_| near_the_moment(4_096, &mut rng)).collect();
        assert!(draws.iter().all(|ms| (1..=4_096).contains(ms)));
        let near = draws.iter().filter(|&&ms| ms <= 31).count();
        assert!((4_500..5_500).contains(&near), "{near} of 13,000 within 31 ms, about 5,000 expected");
        let last = draws.iter().filter(|&&ms| ms == 4_096).count();
        assert!((800..1_200).contains(&last), "the last doubling holds 4,096 alone: {last}");
    }
}
