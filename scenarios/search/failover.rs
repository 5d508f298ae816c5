//! The failover rows of the guarantees report: the fenced mechanisms on a Redis with a
//! replica, over the replicated scenario's seeds (every world has a replica, no restart
//! loses a counter), with and without a wait for the replica after `SET` and `INCR`; each
//! one's first failure shrunk.

use crate::check::coverage::Touched;
use crate::runner::{run, Outcome};
use crate::scenario::{self, FaultMask, Scenario};
use crate::search::explore::{run_seed, run_seeds};
use crate::search::matrix::{within_target, ShrunkFailure, NEXT_SEEDS, SHRUNK_DIR};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use crate::search::shrink::{shrink_scenario, size};
use fencesim_model::Mechanism;
use fencesim_sim::{FaultName, GatewayMode};
use std::sync::atomic::AtomicBool;

/// The scenario the rows run.
pub const FAILOVER_SCENARIO: &str = "replicated";

/// The mechanisms measured: the fenced ones on one instance, with and without the wait.
pub const FAILOVER_MECHANISMS: [Mechanism; 4] =
    [Mechanism::Fenced, Mechanism::FencedRenewal, Mechanism::FencedWaitReplica, Mechanism::FencedDbSequence];

/// Seeds per mechanism in the committed report.
pub const FAILOVER_SEEDS: u64 = 400;

/// One mechanism over the replicated scenario's seeds.
pub struct FailoverRow {
    pub mechanism: Mechanism,
    pub seeds: u64,
    /// Seeds in which a failover fired.
    pub failed_over: u64,
    /// Seeds that broke any invariant.
    pub broken: u64,
    /// The first such seed: its first broken invariant and trace hash.
    pub first: Option<(u64, &'static str, u64)>,
}

/// Every mechanism of the rows over `seeds` seeds from seed 1, on `jobs` threads.
pub fn failover_rows(seeds: u64, jobs: usize) -> Result<Vec<FailoverRow>, String> {
    let never = AtomicBool::new(false);
    let pool = Pool { jobs, interrupted: &never };
    let failover = FaultName::RedisFailover as usize;
    let mut rows = Vec::new();
    for mechanism in FAILOVER_MECHANISMS {
        let mut row = FailoverRow { mechanism, seeds: 0, failed_over: 0, broken: 0, first: None };
        row.seeds = run_seeds(
            &pool,
            SeedRange::first(seeds)?,
            false,
            |seed| {
                run_seed(FAILOVER_SCENARIO, seed, mechanism, GatewayMode::Idempotent, FaultMask::ALL, None)
            },
            |_| {},
            |result| {
                let touched: &Touched = &result.touched;
                row.failed_over += u64::from(touched.fault_kinds.contains(failover));
                if let Some(invariant) = result.violations.first() {
                    row.broken += 1;
                    row.first.get_or_insert((result.seed, invariant, result.trace_hash));
                }
            },
        )?;
        rows.push(row);
    }
    Ok(rows)
}

/// Where a row's shrunk first failure is kept, from the project root.
pub fn failover_file(mechanism: Mechanism) -> String {
    format!("{SHRUNK_DIR}/failover-{mechanism}.json")
}

/// Each row's first failure, shrunk while it still breaks the same invariant; when it stays
/// over the target (3 faults, 3 workers, 5 rows), the first of the next failing seeds that
/// shrinks within it, as the matrix's cells do (the report names the seed shrunk).
pub fn shrink_failover_failures(rows: &[FailoverRow]) -> Result<Vec<ShrunkFailure>, String> {
    let mut shrunk = Vec::new();
    for row in rows {
        let Some((first, invariant, _)) = row.first else { continue };
        let mut best =
            (first, shrunk_seed(row.mechanism, invariant, first)?.ok_or("the first failure is gone")?);
        for seed in first + 1..=first + NEXT_SEEDS {
            if within_target(&best.1.scenario.world) {
                break;
            }
            if let Some(outcome) = shrunk_seed(row.mechanism, invariant, seed)? {
                if size(&outcome.scenario) < size(&best.1.scenario) {
                    best = (seed, outcome);
                }
            }
        }
        let (seed, outcome) = best;
        let gateway = GatewayMode::Idempotent;
        shrunk.push(ShrunkFailure { mechanism: row.mechanism, gateway, invariant, seed, outcome });
    }
    Ok(shrunk)
}

/// `seed` of the replicated scenario shrunk while it still breaks `invariant`, or none if it
/// does not break it.
fn shrunk_seed(mechanism: Mechanism, invariant: &str, seed: u64) -> Result<Option<Outcome>, String> {
    let found = scenario::build(FAILOVER_SCENARIO, seed, mechanism, GatewayMode::Idempotent, FaultMask::ALL)?;
    if !run(&found, seed)?.check(invariant).is_violation() {
        return Ok(None);
    }
    let breaks = |trial: &Scenario| run(trial, seed).map(|outcome| outcome.check(invariant).is_violation());
    Ok(Some(run(&shrink_scenario(&found, seed, breaks, run)?, seed)?))
}
