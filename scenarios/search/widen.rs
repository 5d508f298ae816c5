//! The shrinker's last two passes, for whoever plays the failure again on real components,
//! where every request costs a fraction of a millisecond the simulation does not charge.
//!
//! - The settle window comes down to the one a world of the shrunk shape is given: a stuck
//!   job is judged as soon after its last fault as the world's own rule allows, instead of
//!   after the minute the first, larger world needed (a live replay waits all of it out).
//! - The races widen. A shrunk failure often rests on two parties doing something in the
//!   same millisecond (an early expiry in the millisecond of a grant, a stale confirm in the
//!   millisecond of a successor's claim): the simulation orders them one way under the
//!   file's seed, a real machine either way. The other schedules show it: the same world
//!   under the scheduler's next seeds fails in some and not in others. Each time the world
//!   gives (a fault's time or size, a refund's latency, the TTL, the visibility timeout) is
//!   nudged by a few milliseconds, and a nudge is kept while the run breaks exactly the
//!   invariants it broke and fails so under more of the other schedules, or as many with a
//!   wider gap between two parties' steps of its chains.

use crate::runner::Outcome;
use crate::scenario::Scenario;
use crate::search::shrink::StillFails;
use fencesim_model::{MerchantId, RefundId, Step, WorkerId};
use fencesim_sim::{EventKind, Size, Trigger, WorldConfig};
use std::collections::BTreeMap;

/// The settle window a random world of this shape is drawn with (four turns of lease and
/// visibility timeout, three times the busiest merchant's batch, five seconds), plus a turn
/// for each of that merchant's jobs and the Redis restart's down time: the shortest window
/// in which a job that is not done is stuck rather than slow.
pub fn settle_floor(world: &WorldConfig) -> u64 {
    let mut rows: BTreeMap<MerchantId, (u64, u64)> = BTreeMap::new();
    for row in &world.rows {
        let entry = rows.entry(row.merchant).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(world.refund_latency.of(row.id));
    }
    let per_row = |slowest: u64| {
        2 * slowest + 2 * world.db_latency_ms + world.lookup_latency_ms + 6 * world.redis_latency_ms
    };
    let work_ms = rows.values().map(|&(count, slowest)| count * per_row(slowest)).max().unwrap_or(0);
    let mut jobs: BTreeMap<MerchantId, u64> = BTreeMap::new();
    for job in world.jobs.iter().chain(world.arrivals.iter().map(|arrival| &arrival.job)) {
        *jobs.entry(job.merchant).or_default() += 1;
    }
    let turn = world.ttl_ms + world.visibility_timeout_ms;
    let turns = 4 + jobs.values().copied().max().unwrap_or(0);
    turns * turn + 3 * work_ms + world.redis_restart_ms + 5_000
}

/// The settle window at its floor, and halfway there.
pub fn shorter_settle(scenario: &Scenario) -> Vec<Scenario> {
    let floor = settle_floor(&scenario.world);
    let settle = scenario.world.settle_ms;
    let mut candidates = Vec::new();
    for ms in [floor, floor + (settle.saturating_sub(floor)) / 2] {
        if ms < settle {
            let mut trial = scenario.clone();
            trial.world.settle_ms = ms;
            candidates.push(trial);
        }
    }
    candidates
}

/// Who an event is the doing of: the worker it names, or the clock of the component whose
/// timer made it (a lease running out, a delivery timing out), or the component.
fn party(kind: &EventKind) -> String {
    match kind {
        EventKind::LeaseExpired { .. } => "redis's clock".to_owned(),
        EventKind::VisibilityExpired { .. } => "the queue's clock".to_owned(),
        _ => match serde_json::to_value(kind).ok().and_then(|value| value.get("worker").cloned()) {
            Some(worker) => worker.to_string(),
            None => kind.actor().to_string(),
        },
    }
}

/// How wide the narrowest race of the run's chains is: the shortest gap between two
/// consecutive steps done by different parties, or between two workers' store operations
/// that touch the same rows while the chains go on (`store_ties`), and how many pairs are
/// that close. None: no chain has two parties and no store operations tie (or nothing
/// broke).
pub fn race_margin(outcome: &Outcome) -> Option<(u64, usize)> {
    let events = &outcome.record.events;
    let mut gaps: Vec<u64> = Vec::new();
    let (mut from, mut to) = (u64::MAX, 0);
    for (_, chain) in outcome.chains() {
        for pair in chain.steps.windows(2) {
            if party(&events[pair[0].event].kind) != party(&events[pair[1].event].kind) {
                gaps.push(pair[1].at_ms - pair[0].at_ms);
            }
        }
        for step in &chain.steps {
            (from, to) = (from.min(step.at_ms), to.max(step.at_ms));
        }
    }
    gaps.extend(store_ties(events, from, to));
    let narrowest = gaps.iter().copied().min()?;
    Some((narrowest, gaps.iter().filter(|gap| **gap == narrowest).count()))
}

/// The worker a store operation is the doing of, and the row it touches: a select reads
/// every open row, a claim or a confirm writes one.
fn store_operation(kind: &EventKind) -> Option<(WorkerId, Option<RefundId>)> {
    match kind {
        EventKind::Step { worker, step: Step::RowsSelected { .. } } => Some((*worker, None)),
        EventKind::Write { worker, refund, .. } => Some((*worker, Some(*refund))),
        _ => None,
    }
}

/// The gaps under `WIDE_ENOUGH_MS` between two workers' store operations that touch the same
/// rows (a select and a write, or two writes of one row), from `from` to `to`. A chain names
/// the steps that led to a breach, not the ones that decided which rows a worker saw: a
/// select in the millisecond of another worker's confirm finds the row open or sent by the
/// simulation's order of that millisecond, and a real machine takes either.
fn store_ties(events: &[fencesim_sim::Event], from: u64, to: u64) -> Vec<u64> {
    let within: Vec<(u64, WorkerId, Option<RefundId>)> = events
        .iter()
        .filter(|event| (from..=to).contains(&event.at_ms))
        .filter_map(|event| store_operation(&event.kind).map(|(worker, row)| (event.at_ms, worker, row)))
        .collect();
    let mut gaps = Vec::new();
    for (index, (at, worker, row)) in within.iter().enumerate() {
        for (later, other, other_row) in
            within[index + 1..].iter().take_while(|(later, ..)| later - at < WIDE_ENOUGH_MS)
        {
            let same_rows = match (row, other_row) {
                (Some(row), Some(other_row)) => row == other_row,
                (None, None) => false, // two selects only read
                _ => true,
            };
            if other != worker && same_rows {
                gaps.push(later - at);
            }
        }
    }
    gaps
}

/// A race this wide is not widened further; a live replay plays a story whose race is no
/// wider at its largest time scale (`live::scale::choose`, where it was measured).
pub const WIDE_ENOUGH_MS: u64 = 5;

/// How many candidate worlds widening may try.
pub const WIDEN_TRIES: u32 = 150;

/// How many other schedules a failure is played under to see whether it rests on the
/// simulation's order of one millisecond: the same world and faults, the scheduler's
/// seeds after the file's.
pub const OTHER_SCHEDULES: u64 = 8;

/// Is `margin` a wider race than `than`? (None, no race at all, is the widest.)
fn wider(margin: Option<(u64, usize)>, than: Option<(u64, usize)>) -> bool {
    match (margin, than) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some((gap, count)), Some((old_gap, old_count))) => {
            gap.min(WIDE_ENOUGH_MS) > old_gap || (gap == old_gap && count < old_count)
        }
    }
}

/// Under how many of `OTHER_SCHEDULES` other schedules (the scheduler's seeds after `seed`)
/// the world breaks every invariant in `kept` too: the same count means the failure does not
/// rest on how the simulation orders what falls in one millisecond.
pub fn steady_under(
    scenario: &Scenario,
    seed: u64,
    kept: &[&str],
    run: &mut impl FnMut(&Scenario, u64) -> Result<Outcome, String>,
) -> Result<u64, String> {
    let mut steady = 0;
    for other in 1..=OTHER_SCHEDULES {
        let outcome = run(scenario, seed.wrapping_add(other))?;
        steady += u64::from(kept.iter().all(|name| outcome.check(name).is_violation()));
    }
    Ok(steady)
}

/// How robust a candidate is: under how many other schedules it fails the same way, then
/// how wide its narrowest race is.
#[derive(Clone, Copy)]
struct Robustness {
    steady: u64,
    margin: Option<(u64, usize)>,
}

impl Robustness {
    fn better_than(self, other: Robustness) -> bool {
        self.steady > other.steady || (self.steady == other.steady && wider(self.margin, other.margin))
    }

    fn enough(self) -> bool {
        self.steady == OTHER_SCHEDULES && self.margin.is_none_or(|(gap, _)| gap >= WIDE_ENOUGH_MS)
    }
}

/// The world's times nudged by a few milliseconds each way, one at a time (the settle
/// window kept at least at the floor of the nudged world).
fn nudged(scenario: &Scenario) -> Vec<Scenario> {
    let mut candidates = Vec::new();
    let mut push = |change: &dyn Fn(&mut WorldConfig)| {
        let mut trial = scenario.clone();
        change(&mut trial.world);
        trial.world.settle_ms = trial.world.settle_ms.max(settle_floor(&trial.world));
        if trial.world != scenario.world && trial.world.validate().is_ok() {
            candidates.push(trial);
        }
    };
    let by = |value: u64, delta: i64| value.saturating_add_signed(delta).max(1);
    for delta in [1i64, -1, 2, -2, 4, -4] {
        for index in 0..scenario.world.faults.faults.len() {
            push(&|world| {
                let fault = &mut world.faults.faults[index];
                if let Trigger::At { at_ms } = fault.trigger {
                    fault.trigger = Trigger::At { at_ms: at_ms.saturating_add_signed(delta) };
                }
            });
            push(&|world| {
                let fault = &mut world.faults.faults[index];
                // a duration is nudged; a choice (a restart's persistence) has no neighbours
                let in_ms = matches!(fault.kind.kind().sizes(world.ttl_ms), Size::Ms(_));
                if in_ms && fault.kind.size() > 0 {
                    fault.kind = fault.kind.resized(by(fault.kind.size(), delta));
                }
            });
        }
        for row in scenario.world.rows.iter().map(|row| row.id.0 as usize) {
            push(&|world| {
                let latency = &mut world.refund_latency;
                if let Some(ms) = latency.per_refund_ms.get_mut(row).filter(|ms| **ms > 0) {
                    *ms = by(*ms, delta);
                }
            });
        }
        push(&|world| world.refund_latency.default_ms = by(world.refund_latency.default_ms, delta));
        push(&|world| world.lookup_latency_ms = by(world.lookup_latency_ms, delta));
        push(&|world| world.db_latency_ms = by(world.db_latency_ms, delta));
        push(&|world| world.ttl_ms = by(world.ttl_ms, delta));
        push(&|world| world.visibility_timeout_ms = by(world.visibility_timeout_ms, delta));
    }
    candidates
}

/// Makes `scenario`'s failure (under `seed`) robust to the order of what falls in one
/// millisecond, within `WIDEN_TRIES` candidates: a nudge of the world's times is kept while
/// the run breaks exactly the invariants it broke, still fails the way the shrink asked, and
/// fails so under more of the other schedules (`steady_under`) or, as steadily, with a
/// wider narrowest race. `run` plays a candidate under a seed.
pub fn widen(
    scenario: &Scenario,
    seed: u64,
    mut still_fails: impl StillFails,
    mut run: impl FnMut(&Scenario, u64) -> Result<Outcome, String>,
) -> Result<Scenario, String> {
    let first = run(scenario, seed)?;
    let kept = first.broken();
    let mut best =
        Robustness { steady: steady_under(scenario, seed, &kept, &mut run)?, margin: race_margin(&first) };
    let mut widest = scenario.clone();
    let mut tries = 0;
    'again: while !best.enough() {
        for trial in nudged(&widest) {
            tries += 1;
            if tries > WIDEN_TRIES {
                break 'again;
            }
            let outcome = run(&trial, seed)?;
            if outcome.broken() != kept {
                continue;
            }
            let margin = race_margin(&outcome);
            let steady = steady_under(&trial, seed, &kept, &mut run)?;
            let candidate = Robustness { steady, margin };
            if candidate.better_than(best) && still_fails(&trial)? {
                widest = trial;
                best = candidate;
                continue 'again;
            }
        }
        break;
    }
    Ok(widest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_race_is_wider_when_its_narrowest_gap_grows_or_fewer_pairs_are_that_close() {
        assert!(wider(Some((1, 3)), Some((0, 1))));
        assert!(wider(Some((0, 1)), Some((0, 2))));
        assert!(!wider(Some((0, 2)), Some((0, 2))));
        assert!(!wider(Some((0, 1)), Some((1, 5))));
        assert!(wider(None, Some((0, 1))), "no race left is the widest");
        assert!(!wider(Some((9, 1)), None), "nothing to widen");
        assert!(!wider(Some((40, 1)), Some((WIDE_ENOUGH_MS, 1))), "wide enough is as wide as it gets");
    }

    /// Found by a fresh draw (`fencesim agreement`): a restart with the last persistence
    /// mode was "nudged" to a choice past the end, and the shrinker panicked.
    #[test]
    fn a_restart_s_persistence_is_a_choice_and_is_not_nudged() {
        use fencesim_sim::redis::Persistence;
        use fencesim_sim::{Fault, FaultKind};
        let mut scenario = crate::scenario::build(
            "random",
            1,
            fencesim_model::Mechanism::Fenced,
            fencesim_sim::GatewayMode::Idempotent,
            crate::scenario::FaultMask::ALL,
        )
        .unwrap();
        let last = *Persistence::ALL.last().unwrap();
        let restart = FaultKind::RedisRestart { instance: 0, persistence: last };
        scenario.world.faults.faults = vec![Fault { kind: restart, trigger: Trigger::At { at_ms: 50 } }];
        let kinds: Vec<FaultKind> = nudged(&scenario).iter().map(|s| s.world.faults.faults[0].kind).collect();
        assert!(!kinds.is_empty(), "the other nudges are made");
        assert!(kinds.iter().all(|kind| *kind == restart), "{kinds:?}");
    }

    fn at(at_ms: u64, kind: EventKind) -> fencesim_sim::Event {
        fencesim_sim::Event { at_ms, kind }
    }

    fn selected(worker: u32) -> EventKind {
        EventKind::Step { worker: WorkerId(worker), step: Step::RowsSelected { open: 1, sending: 0 } }
    }

    fn confirmed(worker: u32, refund: u32) -> EventKind {
        EventKind::Write {
            worker: WorkerId(worker),
            epoch: Some(1),
            write: fencesim_model::WriteKind::Confirm,
            refund: RefundId(refund),
            token: None,
            rows: 1,
            after: None,
        }
    }

    #[test]
    fn two_workers_store_operations_on_the_same_rows_within_a_few_milliseconds_are_a_race() {
        let events = [
            at(140, confirmed(0, 8)),
            at(140, selected(1)),
            at(141, confirmed(1, 9)),
            at(141, confirmed(0, 9)),
            at(142, confirmed(0, 7)),
            at(150, selected(0)),
        ];
        let mut ties = store_ties(&events, 0, 200);
        ties.sort_unstable();
        // A's confirm of r_008 and B's select (0); B's select and A's writes of r_009 and
        // r_007 (1, 2); the two writes of r_009 (0). Not: one worker's own operations, two
        // writes of different rows, anything 5 ms or more apart.
        assert_eq!(ties, [0, 0, 1, 2]);
        assert_eq!(store_ties(&events, 141, 200), [0], "only the operations within the chains' span");
        assert!(store_ties(&events, 0, 139).is_empty());
    }

    #[test]
    fn the_settle_floor_counts_turns_batches_and_the_restart() {
        let example = crate::scenario::worked_example::worked_example();
        let mut world = example.world;
        world.jobs.truncate(1);
        world.arrivals.clear();
        let turn = world.ttl_ms + world.visibility_timeout_ms;
        let base = settle_floor(&world);
        assert!(base >= 5 * turn + 5_000, "four turns and one for the job");
        world.redis_restart_ms += 7;
        assert_eq!(settle_floor(&world), base + 7);
        world.ttl_ms += 10;
        assert_eq!(settle_floor(&world), base + 7 + 5 * 10);
        world.db_latency_ms += 1;
        let rows = world.rows.iter().filter(|row| row.merchant == world.jobs[0].merchant).count() as u64;
        assert_eq!(
            settle_floor(&world),
            base + 7 + 5 * 10 + 3 * rows * 2,
            "three batches of the busiest merchant"
        );
    }
}
