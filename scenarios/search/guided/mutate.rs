//! New plans from kept ones. Each change keeps the world and the seed, so a run of the
//! new plan follows its parent's path up to the first fault the change touched: a fault
//! added after the moment the parent first reached something new branches from there.
//! A branch (`branch`) does only that: the parent's path replayed to its moment, and one
//! fresh fault after it.

use crate::scenario::deployment::replan;
use crate::scenario::production::{Rates, RATES};
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

/// A branch of `parent` from its moment: the same world and seed, the faults that had fired
/// by the moment kept as they were and every later one left out (so that the run follows
/// the parent's path up to the moment, event for event, as a continuation of
/// `search::closeness` does), and one fresh fault at a time after it, its kind drawn as
/// `rates` makes kinds common or rare. None when the world refuses the plan.
pub fn branch(parent: &Entry, rng: &mut ChaCha8Rng, allowed: FaultMask, rates: Rates) -> Option<Scenario> {
    let mut scenario: Scenario = parent.scenario.clone();
    let moment = parent.moment_ms;
    let fired = &parent.features.fired;
    let mut faults: Vec<Fault> = (parent.plan().faults.iter().zip(fired))
        .filter(|(_, at)| at.is_some_and(|ms| ms <= moment))
        .map(|(fault, _)| fault.clone())
        .collect();
    let world = &scenario.world;
    let mut fault = fresh_fault(rng, world, allowed, rates)?;
    let window = world.ttl_ms.max(horizon_ms(world) / 4).max(1);
    fault.trigger = Trigger::At { at_ms: moment + rng.gen_range(1..=window) };
    faults.push(fault);
    replan(&mut scenario.world, FaultPlan { faults });
    scenario.world.validate().is_ok().then_some(scenario)
}

/// A fault the world can have, drawn as the swarm draws one; under production rates its
/// kind is first drawn in proportion to the kind's chance in a run (a request's delay ten
/// times as often as a failover), from the kinds this world can have.
fn fresh_fault(rng: &mut ChaCha8Rng, world: &WorldConfig, allowed: FaultMask, rates: Rates) -> Option<Fault> {
    if rates != Rates::Production {
        return any_fault(rng, world, allowed);
    }
    let mut left: Vec<(usize, u64)> = (RATES.iter().enumerate())
        .filter(|(kind, _)| allowed.allows(*kind))
        .map(|(kind, rate)| (kind, 1_000 / u64::from(rate.one_in)))
        .collect();
    while !left.is_empty() {
        let total: u64 = left.iter().map(|(_, weight)| weight).sum();
        let mut point = rng.gen_range(0..total.max(1));
        let mut at = 0;
        while at + 1 < left.len() && point >= left[at].1 {
            point -= left[at].1;
            at += 1;
        }
        let (kind, _) = left.swap_remove(at);
        if let Some(fault) = any_fault(rng, world, FaultMask(1 << kind as u32)) {
            return Some(fault);
        }
    }
    None
}
