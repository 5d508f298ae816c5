//! `fencesim bench`: the simulated worked example against its SQL floor, in one process.
//!
//! The floor runs the very statements the simulated run executed (the setup, every select
//! of open rows, every claim and confirm with its guard) straight on a fresh in-memory
//! SQLite with no simulation around them. The ratio is what the simulation costs on top
//! of the database work it cannot avoid. Timings use the real clock, outside any run.

use crate::runner::{run, DEFAULT_SEED};
use crate::scenario::{worked_example, Scenario};
use fencesim_model::{Mechanism, MerchantId, RefundId, SqliteRefunds, Step, WriteGuard, WriteKind};
use fencesim_sim::{EventKind, GatewayMode, RunRecord};
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
            EventKind::Step {
                worker,
                step: Step::JobReceived { job, .. },
            } => {
                job_of.insert(*worker, job.merchant);
            }
            EventKind::Step {
                worker,
                step: Step::RowsSelected { .. },
            } => {
                if let Some(m) = job_of.get(worker) {
                    ops.push(FloorOp::SelectOpen(*m));
                }
            }
            EventKind::Write {
                write,
                refund,
                token,
                ..
            } => {
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
    store
        .insert(&scenario.world.rows)
        .map_err(|e| e.to_string())?;
    let mut updated = 0;
    for op in ops {
        match *op {
            FloorOp::SelectOpen(m) => {
                std::hint::black_box(store.open_refunds(m).map_err(|e| e.to_string())?);
            }
            FloorOp::Write(kind, refund, guard) => {
                updated += store
                    .write(kind, refund, guard)
                    .map_err(|e| e.to_string())?
                    .rows_updated;
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
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let outcome = run(&scenario, DEFAULT_SEED)?;
        sim_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if outcome.trace_hash != reference.trace_hash {
            return Err("the worked example gave two different traces in one process".to_owned());
        }
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
    })
}
