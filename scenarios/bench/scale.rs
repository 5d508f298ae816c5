//! `fencesim bench --scale`: whether the cost per refund stays flat as the world grows,
//! against the SQL floor of each size's own statements, in two shapes.
//!
//! - The batch: the worked example's shape at ten and a hundred times its size. One
//!   merchant, two workers, A frozen after claiming the row 68% of the way down the batch,
//!   B taking over: the lease, the visibility timeout, the pause and the settle bound grow
//!   with the batch, the gateway's latency does not, so every size tells the same story.
//! - The fleet: 2 to 128 workers over as many merchants, each with the same batch. The
//!   first half of the workers freeze 68% of the way down their batches; the second half
//!   finish their own, take the frozen workers' jobs when they come back and settle the
//!   rest, and every frozen worker's next write is turned away by its row's fence.

use crate::bench::inside::watched;
use crate::bench::{median, peak_rss_mb, resident_mb, statements, timed_ms, Floor};
use crate::check::{check_all, Facts, INVARIANTS};
use crate::runner::{run, DEFAULT_SEED};
use crate::scenario::{Scenario, A, M_4471};
use fencesim_model::{Cents, Mechanism, MerchantId, StepKind, WorkerId};
use fencesim_sim::{run_world, trace_hash, Event, GatewayMode, Latency, WallMs};
use serde::{Deserialize, Serialize};

/// The sizes measured, in refunds: the worked example's and ten and a hundred times it.
pub const SCALE_SIZES: [usize; 3] = [1_200, 12_000, 120_000];

/// The worked example's shape with `refunds` refunds (1,200 is the worked example's own
/// size, not its amounts or latencies).
pub fn scaled_worked_example(refunds: usize) -> Scenario {
    let grow = |ms: u64| ms * refunds as u64 / 1_200;
    let amounts: Vec<Cents> = (0..refunds as i64).map(|i| Cents(1_000 + (i * 7_919) % 9_000)).collect();
    let stall = (refunds * 815 / 1_200) as u32;
    Scenario::named("scaled-worked-example")
        .starts_at(WallMs::hms(10, 0, 0))
        .merchant_with_refunds(M_4471, &amounts)
        .fence_counter_stands_at(M_4471, 32)
        .lease_ttl_ms(grow(30_000))
        .visibility_timeout_ms(grow(31_000))
        .workers(2)
        .gateway_latency(Latency::flat(30))
        .lookup_latency_ms(5)
        .pause_at_step(A, StepKind::AfterClaim, stall, grow(8_000))
        .settles_within_ms(grow(120_000))
        .build()
        .with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent)
}

/// The fleet's sizes, in workers (as many merchants).
pub const FLEET_SIZES: [u32; 4] = [2, 8, 32, 128];

/// Each fleet merchant's refunds.
pub const FLEET_BATCH: usize = 300;

/// `workers` workers over as many merchants of `FLEET_BATCH` refunds each; the first half
/// of the workers freeze after claiming the row 68% of the way down their batch. A batch
/// takes about 32 ms a refund, within its lease (40 ms a refund) and visibility timeout (42);
/// the freeze (60 ms a refund) outlasts both, so each frozen worker's job comes back to a
/// worker of the second half, idle by then, and the frozen worker's next write meets a
/// larger fence.
pub fn fleet_scenario(workers: u32) -> Scenario {
    let batch = FLEET_BATCH as u64;
    let stall = (FLEET_BATCH * 815 / 1_200) as u32;
    let mut builder = Scenario::named("fleet").starts_at(WallMs::hms(10, 0, 0));
    for number in 0..workers {
        let merchant = MerchantId(5_000 + number);
        let amounts: Vec<Cents> =
            (0..batch as i64).map(|i| Cents(1_000 + ((i + i64::from(number)) * 7_919) % 9_000)).collect();
        builder = builder.merchant_with_refunds(merchant, &amounts).fence_counter_stands_at(merchant, 32);
    }
    for number in 0..workers / 2 {
        builder = builder.pause_at_step(WorkerId(number), StepKind::AfterClaim, stall, batch * 60);
    }
    builder
        .lease_ttl_ms(batch * 40)
        .visibility_timeout_ms(batch * 42)
        .workers(workers)
        .gateway_latency(Latency::flat(30))
        .lookup_latency_ms(5)
        .settles_within_ms(batch * 400)
        .build()
        .with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent)
}

/// One size of one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleSize {
    /// The worked example's shape with this many refunds.
    Batch(usize),
    /// The fleet with this many workers.
    Fleet(u32),
}

impl ScaleSize {
    /// Every size measured: the batch's, then the fleet's.
    pub fn all() -> impl Iterator<Item = ScaleSize> {
        SCALE_SIZES.into_iter().map(ScaleSize::Batch).chain(FLEET_SIZES.into_iter().map(ScaleSize::Fleet))
    }

    /// `batch:1200` or `fleet:32`, as the command line names a size.
    pub fn name(self) -> String {
        match self {
            ScaleSize::Batch(refunds) => format!("batch:{refunds}"),
            ScaleSize::Fleet(workers) => format!("fleet:{workers}"),
        }
    }

    pub fn parse(text: &str) -> Result<ScaleSize, String> {
        let bad = || format!("bad scale size '{text}': expected batch:REFUNDS or fleet:WORKERS");
        let (shape, number) = text.split_once(':').ok_or_else(bad)?;
        match shape {
            "batch" => number.parse().ok().filter(|&n: &usize| n > 0).map(ScaleSize::Batch).ok_or_else(bad),
            "fleet" => number.parse().ok().filter(|&n: &u32| n >= 2).map(ScaleSize::Fleet).ok_or_else(bad),
            _ => Err(bad()),
        }
    }

    /// Measures this size over `runs` runs.
    pub fn measure(self, runs: usize) -> Result<ScalePoint, String> {
        match self {
            ScaleSize::Batch(refunds) => scale_point(refunds, runs),
            ScaleSize::Fleet(workers) => fleet_point(workers, runs),
        }
    }
}

/// One size's figures, medians over the runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalePoint {
    pub workers: u32,
    /// How often the size ran: `--runs`, times as many as make about
    /// `EQUAL_WORK_REFUNDS` refunds at the small sizes.
    pub runs: usize,
    pub refunds: usize,
    pub events: usize,
    pub statements: usize,
    /// The whole run: the world, the checkers and the trace hash. `floor_ratio` is the
    /// median of each run's time over the floor's time taken right after it.
    pub run_ms: f64,
    pub run_us_per_refund: f64,
    pub world_ms: f64,
    pub checks_ms: f64,
    pub sql_floor_ms: f64,
    pub floor_ratio: f64,
    /// The real time the world run's statements took inside it (`world_ms`'s run, a clock
    /// read around each statement) over the floor taken right after it: `floor_ratio` less
    /// this is the simulation's own path around its requests, and the checkers.
    pub sql_in_run_ratio: f64,
    /// The median of each run over the floor that also holds as many bytes as the run's
    /// history, taken right after it (`Floor::run_holding`).
    pub held_floor_ratio: f64,
    /// The process's peak resident memory while this size ran, per refund: measured in a
    /// process of its own, it includes the process's fixed few MiB.
    pub peak_rss_kb_per_refund: f64,
    /// The peak over what the process held before the size's first run, per refund: the
    /// memory the size itself took.
    pub added_kb_per_refund: f64,
    /// The trace hash alone, of `checks_ms`.
    pub hash_ms: f64,
    /// The invariant that took longest to check, and how long.
    pub slowest_invariant: (String, f64),
}

/// The trace hash's time, and the slowest invariant's, over one record.
fn where_checks_go(facts: &Facts<'_>) -> Result<(f64, (String, f64)), String> {
    let (_, hash_ms) = timed_ms(|| Ok(std::hint::black_box(trace_hash(&facts.record.events))))?;
    let mut slowest = (String::new(), 0.0);
    for invariant in &INVARIANTS {
        let (_, ms) = timed_ms(|| Ok(std::hint::black_box((invariant.check)(facts))))?;
        if ms > slowest.1 {
            slowest = (invariant.name.to_owned(), ms);
        }
    }
    Ok((hash_ms, slowest))
}

/// Forgets the process's peak resident memory so far (Linux), so that the next size's
/// peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Measures the batch shape at `refunds` refunds over `runs` runs.
pub fn scale_point(refunds: usize, runs: usize) -> Result<ScalePoint, String> {
    measure(&scaled_worked_example(refunds), 1, runs)
}

/// Measures the fleet shape with `workers` workers over `runs` runs.
pub fn fleet_point(workers: u32, runs: usize) -> Result<ScalePoint, String> {
    measure(&fleet_scenario(workers), workers as usize / 2, runs)
}

/// A small size runs more often, so that every size's medians are taken over about as
/// much work: `--runs` times at least this many refunds (a size of 600 refunds runs 20
/// times `--runs`), where one run of a few milliseconds moves with every hiccup of the
/// machine.
pub const EQUAL_WORK_REFUNDS: usize = 12_000;

/// How often a size of `refunds` runs when `--runs` asks for `runs`.
pub fn runs_at(refunds: usize, runs: usize) -> usize {
    runs.max(1) * EQUAL_WORK_REFUNDS.div_ceil(refunds.max(1))
}

/// Measures one world over `runs` runs (more at a small size: `runs_at`), once it has told its story: every invariant
/// holds and `rejections` writes were turned away by a fence.
fn measure(scenario: &Scenario, rejections: usize, runs: usize) -> Result<ScalePoint, String> {
    let (refunds, workers) = (scenario.world.rows.len(), scenario.world.workers);
    reset_peak_rss();
    let before_mb = resident_mb();
    let reference = run(scenario, DEFAULT_SEED)?;
    let rejected = reference.tally().fence_rejections;
    if !reference.passed() || rejected != rejections {
        return Err(format!(
            "the {} shape at {workers} workers and {refunds} refunds did not tell its story: {} \
             ({rejected} fence rejections, {rejections} expected)",
            scenario.name,
            reference.counts_line()
        ));
    }
    let peak_mb = peak_rss_mb();
    let ops = statements(&reference.record);
    let history_bytes = reference.record.events.len() * std::mem::size_of::<Event>();
    let (mut run_ms, mut world_ms, mut checks_ms, mut floor_ms, mut held_ms, mut sql_ms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let runs = runs_at(refunds, runs);
    let floor = Floor::new()?;
    for _ in 0..runs {
        run_ms.push(timed_ms(|| run(scenario, DEFAULT_SEED))?.1);
        let ((record, sql), ms) = timed_ms(|| Ok(watched(|| run_world(&scenario.world, DEFAULT_SEED))))?;
        let record = record?;
        world_ms.push(ms);
        sql_ms.push(sql);
        let facts = Facts { record: &record, world: &scenario.world, base: scenario.base };
        checks_ms
            .push(timed_ms(|| Ok(std::hint::black_box((check_all(&facts), trace_hash(&record.events)))))?.1);
        floor_ms.push(timed_ms(|| floor.run(scenario, &ops))?.1);
        held_ms.push(timed_ms(|| floor.run_holding(scenario, &ops, history_bytes))?.1);
    }
    // Each run against the floor taken right after it: a paired ratio moves less with the
    // machine's load than a ratio of two medians.
    let paired = |floors: &[f64]| median(run_ms.iter().zip(floors).map(|(run, floor)| run / floor).collect());
    let (floor_ratio, held_floor_ratio) = (paired(&floor_ms), paired(&held_ms));
    let sql_in_run_ratio = median(sql_ms.iter().zip(&floor_ms).map(|(sql, floor)| sql / floor).collect());
    let (run_ms, floor_ms) = (median(run_ms), median(floor_ms));
    let facts = Facts { record: &reference.record, world: &scenario.world, base: scenario.base };
    let (hash_ms, slowest_invariant) = where_checks_go(&facts)?;
    Ok(ScalePoint {
        workers,
        runs,
        refunds,
        events: reference.record.events.len(),
        statements: ops.len(),
        run_ms,
        run_us_per_refund: run_ms * 1e3 / refunds as f64,
        world_ms: median(world_ms),
        checks_ms: median(checks_ms),
        sql_floor_ms: floor_ms,
        floor_ratio,
        sql_in_run_ratio,
        held_floor_ratio,
        peak_rss_kb_per_refund: peak_mb * 1024.0 / refunds as f64,
        added_kb_per_refund: (peak_mb - before_mb).max(0.0) * 1024.0 / refunds as f64,
        hash_ms,
        slowest_invariant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fleet size tells its story: every refund paid once, every frozen worker's
    /// next write turned away, each frozen worker's lease followed by another's.
    #[test]
    fn every_fleet_size_hands_the_frozen_workers_jobs_over() {
        for workers in [2, 8, 32] {
            let outcome = run(&fleet_scenario(workers), DEFAULT_SEED).unwrap();
            assert!(outcome.passed(), "{workers} workers: {}", outcome.breach_lines("", true));
            let tally = outcome.tally();
            assert_eq!(tally.fence_rejections, workers as usize / 2, "{workers} workers");
            assert_eq!(outcome.scenario.world.rows.len(), workers as usize * FLEET_BATCH);
            let grants = outcome
                .record
                .events
                .iter()
                .filter(|event| matches!(event.kind, fencesim_sim::EventKind::LeaseGranted { .. }))
                .count();
            assert_eq!(
                grants,
                workers as usize * 3 / 2,
                "{workers} workers: one lease each, one more per frozen worker"
            );
        }
        assert!(ScaleSize::parse("fleet:1").is_err() && ScaleSize::parse("batch:1200").is_ok());
    }
}
