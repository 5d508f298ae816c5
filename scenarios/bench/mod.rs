//! `fencesim bench`: the simulated worked example against its SQL floor, in one process.
//!
//! The floor runs the very statements the simulated run executed (the setup, every select
//! of open rows, every claim and confirm with its guard) straight on a fresh in-memory
//! SQLite with no simulation around them. The ratio is what the simulation costs on top
//! of the database work it cannot avoid. Timings use the real clock, outside any run.

use crate::check::{check_all, Facts};
use crate::runner::{run, DEFAULT_SEED};
use crate::scenario::{self, worked_example, FaultMask, Scenario};
use crate::search::explore::{run_seed, run_seeds};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use fencesim_model::{Mechanism, MerchantId, RefundId, SqliteRefunds, Step, WriteGuard, WriteKind};
use fencesim_sim::{run_world, trace_hash, EventKind, GatewayMode, RunRecord};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

pub mod scale;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorOp {
    SelectOpen(MerchantId),
    Write(WriteKind, RefundId, WriteGuard),
}

/// The store statements a run executed, in order.
pub fn statements(record: &RunRecord) -> Vec<FloorOp> {
    let mut job_of: BTreeMap<fencesim_model::WorkerId, MerchantId> = BTreeMap::new();
    let mut ops = Vec::with_capacity(record.events.len() / 2);
    for event in &record.events {
        match &event.kind {
            EventKind::Step { worker, step: Step::JobReceived { job, .. } } => {
                job_of.insert(*worker, job.merchant);
            }
            EventKind::Step { worker, step: Step::RowsSelected { .. } } => {
                if let Some(merchant) = job_of.get(worker) {
                    ops.push(FloorOp::SelectOpen(*merchant));
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
    sql_floor_holding(scenario, ops, 0)
}

/// The floor, holding `held_bytes` more as it goes, spread evenly over the statements, as
/// a run's history grows by each statement's events: what the same SQL costs when the
/// cache must also hold what a run remembers. Against the bare floor (`held_bytes` 0) it
/// tells how much of a run's cost over the floor is the room its history takes.
pub fn sql_floor_holding(scenario: &Scenario, ops: &[FloorOp], held_bytes: usize) -> Result<u64, String> {
    let store = SqliteRefunds::open_in_memory().map_err(|error| error.to_string())?;
    store.insert(&scenario.world.rows).map_err(|error| error.to_string())?;
    let per_statement = held_bytes / ops.len().max(1);
    let mut held: Vec<u8> = Vec::new();
    let mut updated = 0;
    for (number, op) in ops.iter().enumerate() {
        match *op {
            FloorOp::SelectOpen(merchant) => {
                std::hint::black_box(store.open_refunds(merchant).map_err(|error| error.to_string())?);
            }
            FloorOp::Write(kind, refund, guard) => {
                updated += store.write(kind, refund, guard).map_err(|error| error.to_string())?.rows_updated;
            }
        }
        if per_statement > 0 {
            held.extend(std::iter::repeat_n(number as u8, per_statement));
        }
    }
    std::hint::black_box(&held);
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn bench(runs: usize) -> Result<BenchResult, String> {
    let scenario = worked_example().with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent);
    let reference = run(&scenario, DEFAULT_SEED)?;
    let ops = statements(&reference.record);
    let expected_rows = sql_floor(&scenario, &ops)?;
    let mut sim_ms = Vec::with_capacity(runs);
    let mut floor_ms = Vec::with_capacity(runs);
    let mut world_ms = Vec::with_capacity(runs);
    let mut checks_ms = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let clock = Instant::now();
        let outcome = run(&scenario, DEFAULT_SEED)?;
        sim_ms.push(clock.elapsed().as_secs_f64() * 1e3);
        if outcome.trace_hash != reference.trace_hash {
            return Err("the worked example gave two different traces in one process".to_owned());
        }
        let clock = Instant::now();
        let record = run_world(&scenario.world, DEFAULT_SEED)?;
        world_ms.push(clock.elapsed().as_secs_f64() * 1e3);
        let clock = Instant::now();
        let checks = check_all(&Facts { record: &record, world: &scenario.world, base: scenario.base });
        std::hint::black_box((checks, trace_hash(&record.events)));
        checks_ms.push(clock.elapsed().as_secs_f64() * 1e3);
        let clock = Instant::now();
        let rows = sql_floor(&scenario, &ops)?;
        floor_ms.push(clock.elapsed().as_secs_f64() * 1e3);
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
    pub mechanism: String,
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
    process_status_mb("VmHWM:")
}

/// The process's resident memory now, in MiB (Linux; 0 elsewhere).
pub fn resident_mb() -> f64 {
    process_status_mb("VmRSS:")
}

/// A memory figure of `/proc/self/status`, in MiB.
fn process_status_mb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .and_then(|line| line.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The statements of seeds 1 to `seeds`, run on bare databases against the simulated runs
/// that executed them: (simulated seconds, floor seconds).
fn explore_floor(seeds: u64, mechanism: Mechanism, gateway: GatewayMode) -> Result<(f64, f64), String> {
    let mut floor = 0.0;
    let mut simulated = 0.0;
    for seed in 1..=seeds {
        let scenario = scenario::build("random", seed, mechanism, gateway, FaultMask::ALL)?;
        let clock = Instant::now();
        let outcome = run(&scenario, seed)?;
        simulated += clock.elapsed().as_secs_f64();
        let ops = statements(&outcome.record);
        let clock = Instant::now();
        sql_floor(&scenario, &ops)?;
        floor += clock.elapsed().as_secs_f64();
    }
    Ok((simulated, floor))
}

pub fn bench_explore(seeds: u64, memory_seeds: u64) -> Result<ExploreBench, String> {
    let mechanism = Mechanism::Fenced;
    let gateway = GatewayMode::Idempotent;
    let never = std::sync::atomic::AtomicBool::new(false);
    let work = |seed| run_seed("random", seed, mechanism, gateway, FaultMask::ALL, None);
    let on = |jobs| Pool { jobs, interrupted: &never };
    let timed = |jobs: usize| -> Result<f64, String> {
        let clock = Instant::now();
        run_seeds(&on(jobs), SeedRange::first(seeds)?, false, work, |_| {}, |_| {})?;
        Ok(clock.elapsed().as_secs_f64())
    };
    // Best of three, alternating, so that a noisy neighbour does not decide the speed-up.
    let (mut one, mut two) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        one = one.min(timed(1)?);
        two = two.min(timed(2)?);
    }
    let after_1000 = {
        if seeds < 1_000 {
            run_seeds(&on(2), SeedRange::new(seeds + 1, 1_000 - seeds)?, false, work, |_| {}, |_| {})?;
        }
        peak_rss_mb()
    };
    // the floor: every statement those seeds executed, on bare databases
    let (simulated, floor) = explore_floor(seeds, mechanism, gateway)?;
    let after_many = if memory_seeds > 1_000 {
        run_seeds(&on(2), SeedRange::new(1_001, memory_seeds - 1_000)?, false, work, |_| {}, |_| {})?;
        peak_rss_mb()
    } else {
        0.0
    };
    Ok(ExploreBench {
        mechanism: mechanism.name().to_owned(),
        seeds,
        seeds_per_second_per_core: seeds as f64 / one,
        sql_floor_seconds: floor,
        explore_seconds: simulated,
        floor_ratio: simulated / floor,
        jobs2_speedup: one / two,
        peak_rss_mb_after_1000: after_1000,
        memory_seeds,
        peak_rss_mb_after_memory_seeds: after_many,
    })
}
