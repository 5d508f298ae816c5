//! `fencesim bench`: the simulated worked example against its SQL floor, in one process.
//!
//! The floor runs the very statements the simulated run executed (the setup, every select
//! of open rows, every claim and confirm with its guard) straight on a fresh in-memory
//! SQLite with no simulation around them. The ratio is what the simulation costs on top
//! of the database work it cannot avoid. Timings use the real clock, outside any run.

use crate::checkers::{check_all, Facts};
use crate::runner::{run, DEFAULT_SEED};
use crate::scenario::{worked_example, Scenario};
use fencesim_model::{Mechanism, MerchantId, RefundId, SqliteRefunds, Step, WriteGuard, WriteKind};
use fencesim_sim::{run_world, trace_hash, EventKind, GatewayMode, RunRecord};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorOp {
    SelectOpen(MerchantId),
    Write(WriteKind, RefundId, WriteGuard),
}

/// The store statements a run executed, in order.
pub fn statements(record: &RunRecord) -> Vec<FloorOp> {
    let mut job_of: BTreeMap<fencesim_model::WorkerId, MerchantId> = BTreeMap::new();
    let mut ops = Vec::with_capacity(record.events.len() / 2);
    for e in &record.events {
        match &e.kind {
            EventKind::Step { worker, step: Step::JobReceived { job, .. } } => {
                job_of.insert(*worker, job.merchant);
            }
            EventKind::Step { worker, step: Step::RowsSelected { .. } } => {
                if let Some(m) = job_of.get(worker) {
                    ops.push(FloorOp::SelectOpen(*m));
                }
            }
            EventKind::Write { write, refund, token, .. } => {
                let guard = token.map_or(WriteGuard::Unfenced, WriteGuard::Fence);
                ops.push(FloorOp::Write(*write, *refund, guard));
            }
            _ => {}
        }
    }
    ops
}

/// Runs the setup and the statements on a fresh database; returns the rows they updated.
pub fn sql_floor(scenario: &Scenario, ops: &[FloorOp]) -> Result<u64, String> {
    let store = SqliteRefunds::open_in_memory().map_err(|e| e.to_string())?;
    store.insert(&scenario.world.rows).map_err(|e| e.to_string())?;
    let mut updated = 0;
    for op in ops {
        match *op {
            FloorOp::SelectOpen(m) => {
                std::hint::black_box(store.open_refunds(m).map_err(|e| e.to_string())?);
            }
            FloorOp::Write(kind, refund, guard) => {
                updated += store.write(kind, refund, guard).map_err(|e| e.to_string())?.rows_updated;
            }
        }
    }
    Ok(updated)
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub runs: usize,
    pub statements: usize,
    pub worked_example_ms_median: f64,
    pub sql_floor_ms_median: f64,
    pub ratio: f64,
    /// Of the worked example: the simulated world alone, and the checkers with the hash.
    pub world_ms_median: f64,
    pub checks_ms_median: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

pub fn bench(runs: usize) -> Result<BenchResult, String> {
    let scenario = worked_example().with_strategy(Mechanism::Fenced, GatewayMode::Idempotent);
    let reference = run(&scenario, DEFAULT_SEED)?;
    let ops = statements(&reference.record);
    let expected_rows = sql_floor(&scenario, &ops)?;
    let mut sim_ms = Vec::with_capacity(runs);
    let mut floor_ms = Vec::with_capacity(runs);
    let mut world_ms = Vec::with_capacity(runs);
    let mut checks_ms = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let outcome = run(&scenario, DEFAULT_SEED)?;
        sim_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if outcome.trace_hash != reference.trace_hash {
            return Err("the worked example gave two different traces in one process".to_owned());
        }
        let t = Instant::now();
        let record = run_world(&scenario.world, DEFAULT_SEED)?;
        world_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let checks = check_all(&Facts { record: &record, world: &scenario.world, base: scenario.base });
        std::hint::black_box((checks, trace_hash(&record.events)));
        checks_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let rows = sql_floor(&scenario, &ops)?;
        floor_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if rows != expected_rows {
            return Err("the SQL floor updated a different number of rows".to_owned());
        }
    }
    let worked_example_ms_median = median(sim_ms);
    let sql_floor_ms_median = median(floor_ms);
    Ok(BenchResult {
        runs: runs.max(1),
        statements: ops.len(),
        worked_example_ms_median,
        sql_floor_ms_median,
        ratio: worked_example_ms_median / sql_floor_ms_median,
        world_ms_median: median(world_ms),
        checks_ms_median: median(checks_ms),
    })
}

/// Exploration's cost: throughput per core, against the SQL floor of the same seeds, the
/// speed-up of a second thread, and whether memory stays flat over many seeds.
#[derive(Clone, Debug, Serialize)]
pub struct ExploreBench {
    pub strategy: String,
    pub seeds: u64,
    pub seeds_per_second_per_core: f64,
    pub sql_floor_seconds: f64,
    pub explore_seconds: f64,
    /// Simulated seeds against the same seeds' statements on a bare database.
    pub floor_ratio: f64,
    pub jobs2_speedup: f64,
    pub peak_rss_mb_after_1000: f64,
    /// Peak resident memory after `memory_seeds` seeds (0 when not measured).
    pub memory_seeds: u64,
    pub peak_rss_mb_after_memory_seeds: f64,
}

/// Peak resident set size of this process, in MiB (Linux).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn bench_explore(seeds: u64, memory_seeds: u64) -> Result<ExploreBench, String> {
    use crate::explore::{run_parallel, run_seed};
    use crate::random::FaultMask;
    let mechanism = Mechanism::Fenced;
    let gateway = GatewayMode::Idempotent;
    let never = std::sync::atomic::AtomicBool::new(false);
    let work = |seed| run_seed("random", seed, mechanism, gateway, FaultMask::ALL);
    let timed = |jobs: usize| -> Result<f64, String> {
        let t = Instant::now();
        run_parallel(1..seeds + 1, jobs, false, &never, work, |_| {}, |_| {})?;
        Ok(t.elapsed().as_secs_f64())
    };
    // Best of three, alternating, so that a noisy neighbour does not decide the speed-up.
    let (mut one, mut two) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        one = one.min(timed(1)?);
        two = two.min(timed(2)?);
    }
    let after_1000 = {
        if seeds < 1_000 {
            run_parallel(seeds + 1..1_001, 2, false, &never, work, |_| {}, |_| {})?;
        }
        peak_rss_mb()
    };
    // the floor: every statement those seeds executed, on bare databases
    let mut floor = 0.0;
    let mut sim = 0.0;
    for seed in 1..=seeds {
        let sc = crate::scenario::build("random", seed, mechanism, gateway, FaultMask::ALL)?;
        let t = Instant::now();
        let outcome = run(&sc, seed)?;
        sim += t.elapsed().as_secs_f64();
        let ops = statements(&outcome.record);
        let t = Instant::now();
        sql_floor(&sc, &ops)?;
        floor += t.elapsed().as_secs_f64();
    }
    let after_many = if memory_seeds > 1_000 {
        run_parallel(1_001..memory_seeds + 1, 2, false, &never, work, |_| {}, |_| {})?;
        peak_rss_mb()
    } else {
        0.0
    };
    Ok(ExploreBench {
        strategy: mechanism.name().to_owned(),
        seeds,
        seeds_per_second_per_core: seeds as f64 / one,
        sql_floor_seconds: floor,
        explore_seconds: sim,
        floor_ratio: sim / floor,
        jobs2_speedup: one / two,
        peak_rss_mb_after_1000: after_1000,
        memory_seeds,
        peak_rss_mb_after_memory_seeds: after_many,
    })
}

pub const BENCH_REPORT: &str = "reports/bench.md";

/// The metrics a bench report must show, by the names `--json` gives them.
pub const BENCH_METRICS: [&str; 5] =
    ["worked_example_ms_median", "sql_floor_ms_median", "ratio", "world_ms_median", "checks_ms_median"];

/// Today's date in UTC, `YYYY-MM-DD`, from the real clock (a bench runs outside any simulation).
fn today_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // days since 1970-01-01 to a civil date (proleptic Gregorian calendar)
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// What machine the figures were taken on.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cores} cores, {cpu}, {} {}", std::env::consts::OS, std::env::consts::ARCH)
}

/// The bench report, as Markdown.
pub fn bench_report(r: &BenchResult, e: &ExploreBench) -> String {
    format!(
        "# Benchmarks\n\n\
         Written by `fencesim bench --record` (release build). Figures are ratios taken in one process on one \
         machine; the absolute times only say how loaded that machine was.\n\n\
         Measured {date} on {machine}.\n\n\
         ## The worked example against its SQL floor\n\n\
         The floor runs the same {statements} statements the simulated run executed (setup, selects, every claim \
         and confirm with its guard) on a fresh in-memory SQLite with no simulation around them. {runs} runs each, \
         interleaved.\n\n\
         | metric | value |\n|---|---:|\n\
         | ratio | {ratio:.2} (target at most 1.25) |\n\
         | worked_example_ms_median | {we:.2} |\n\
         | sql_floor_ms_median | {floor:.2} |\n\
         | world_ms_median | {world:.2} |\n\
         | checks_ms_median | {checks:.2} |\n\n\
         `world` is the simulated run alone; `checks` is every invariant plus the trace hash.\n\n\
         ## Exploration\n\n\
         Seeds 1 to {seeds} of the random scenario under `{strategy}` (every fault kind on), each run and checked. \
         The floor replays the statements those seeds executed on bare databases.\n\n\
         | metric | value |\n|---|---:|\n\
         | seeds_per_second_per_core | {sps:.0} |\n\
         | floor_ratio | {fr:.2} (target at most 1.5) |\n\
         | jobs2_speedup | {sp:.2} (target at least 1.8) |\n\
         | peak_rss_mb_after_1000 | {m1:.1} |\n\
         | peak_rss_mb_after_memory_seeds | {m2:.1} (after {ms} seeds) |\n\n\
         Reproduce with `cargo run --release -- bench --memory-seeds {ms}`.\n",
        date = today_utc(),
        machine = machine(),
        runs = r.runs,
        statements = r.statements,
        ratio = r.ratio,
        we = r.worked_example_ms_median,
        floor = r.sql_floor_ms_median,
        world = r.world_ms_median,
        checks = r.checks_ms_median,
        seeds = e.seeds,
        strategy = e.strategy,
        sps = e.seeds_per_second_per_core,
        fr = e.floor_ratio,
        sp = e.jobs2_speedup,
        m1 = e.peak_rss_mb_after_1000,
        m2 = e.peak_rss_mb_after_memory_seeds,
        ms = e.memory_seeds,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn today_is_a_plausible_date() {
        let d = super::today_utc();
        assert_eq!(d.len(), 10);
        assert!(d.as_str() >= "2024-01-01", "{d}");
    }
}
