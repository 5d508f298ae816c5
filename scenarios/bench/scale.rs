//! `fencesim bench --scale`: the worked example's shape at ten and a hundred times its
//! size, to see whether the cost per refund stays flat as the batch grows, against the
//! SQL floor of each size's own statements. One merchant, two workers, A frozen after
//! claiming the row 68% of the way down the batch, B taking over: the lease, the
//! visibility timeout, the pause and the settle bound grow with the batch, the gateway's
//! latency does not, so every size tells the same story.

use crate::bench::{peak_rss_mb, sql_floor, statements};
use crate::check::{check_all, Facts, INVARIANTS};
use crate::runner::{run, DEFAULT_SEED};
use crate::scenario::{Scenario, A, M_4471};
use fencesim_model::{Cents, Mechanism, StepKind};
use fencesim_sim::{run_world, trace_hash, GatewayMode, Latency, WallMs};
use serde::Serialize;
use std::time::Instant;

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

/// One size's figures, medians over the runs.
#[derive(Clone, Debug, Serialize)]
pub struct ScalePoint {
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
    /// The process's peak resident memory while this size ran, per refund.
    pub peak_rss_kb_per_refund: f64,
    /// The trace hash alone, of `checks_ms`.
    pub hash_ms: f64,
    /// The invariant that took longest to check, and how long.
    pub slowest_invariant: (&'static str, f64),
}

/// The trace hash's time, and the slowest invariant's, over one record.
fn where_checks_go(facts: &Facts<'_>) -> Result<(f64, (&'static str, f64)), String> {
    let (_, hash_ms) = timed(|| Ok(std::hint::black_box(trace_hash(&facts.record.events))))?;
    let mut slowest = ("", 0.0);
    for invariant in &INVARIANTS {
        let (_, ms) = timed(|| Ok(std::hint::black_box((invariant.check)(facts))))?;
        if ms > slowest.1 {
            slowest = (invariant.name, ms);
        }
    }
    Ok((hash_ms, slowest))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Forgets the process's peak resident memory so far (Linux), so that the next size's
/// peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn timed<T>(f: impl FnOnce() -> Result<T, String>) -> Result<(T, f64), String> {
    let clock = Instant::now();
    let value = f()?;
    Ok((value, clock.elapsed().as_secs_f64() * 1e3))
}

/// Measures one size over `runs` runs.
pub fn scale_point(refunds: usize, runs: usize) -> Result<ScalePoint, String> {
    let scenario = scaled_worked_example(refunds);
    reset_peak_rss();
    let reference = run(&scenario, DEFAULT_SEED)?;
    if !reference.passed() || reference.tally().fence_rejections != 1 {
        return Err(format!(
            "the scaled worked example at {refunds} refunds did not tell the worked example's story"
        ));
    }
    let peak_mb = peak_rss_mb();
    let ops = statements(&reference.record);
    let (mut run_ms, mut world_ms, mut checks_ms, mut floor_ms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        run_ms.push(timed(|| run(&scenario, DEFAULT_SEED))?.1);
        let (record, ms) = timed(|| run_world(&scenario.world, DEFAULT_SEED))?;
        world_ms.push(ms);
        let facts = Facts { record: &record, world: &scenario.world, base: scenario.base };
        checks_ms
            .push(timed(|| Ok(std::hint::black_box((check_all(&facts), trace_hash(&record.events)))))?.1);
        floor_ms.push(timed(|| sql_floor(&scenario, &ops))?.1);
    }
    // Each run against the floor taken right after it: a paired ratio moves less with the
    // machine's load than a ratio of two medians.
    let ratios: Vec<f64> = run_ms.iter().zip(&floor_ms).map(|(run, floor)| run / floor).collect();
    let (run_ms, floor_ms, floor_ratio) = (median(run_ms), median(floor_ms), median(ratios));
    let facts = Facts { record: &reference.record, world: &scenario.world, base: scenario.base };
    let (hash_ms, slowest_invariant) = where_checks_go(&facts)?;
    Ok(ScalePoint {
        refunds,
        events: reference.record.events.len(),
        statements: ops.len(),
        run_ms,
        run_us_per_refund: run_ms * 1e3 / refunds as f64,
        world_ms: median(world_ms),
        checks_ms: median(checks_ms),
        sql_floor_ms: floor_ms,
        floor_ratio,
        peak_rss_kb_per_refund: peak_mb * 1024.0 / refunds as f64,
        hash_ms,
        slowest_invariant,
    })
}
