//! `fencesim mutants`: how good the suite is at finding real bugs. Each mutant plants one
//! realistic bug in the worker or lock code of the mechanism that has that line; the
//! suite's search (the random scenario, seed after seed) runs the same seed with and
//! without the bug, and the mutant is caught when the bug breaks an invariant the correct
//! code does not break on that seed. The catching plan is then shrunk, one fault at a
//! time, to the smallest plan that still catches it.

use crate::mutant::Mutant;
use crate::random::FaultMask;
use crate::runner::run_planted;
use crate::runner::{run, Outcome};
use crate::scenario::{self, Scenario};
use fencesim_sim::{FaultPlan, GatewayMode};
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Instant;

pub const DETECTION_REPORT: &str = "reports/detection.md";
/// Where each search starts: the seeds are far apart so that the searches are independent.
pub const START_STRIDE: u64 = 100_000;

fn broken(o: &Outcome) -> Vec<&'static str> {
    o.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant).collect()
}

/// The invariant the bug breaks on this scenario that the correct code does not, if any.
pub fn catches(sc: &Scenario, seed: u64, mutant: Mutant) -> Result<Option<(&'static str, u64)>, String> {
    let right = run(sc, seed)?;
    let wrong = run_planted(sc, seed, mutant)?;
    let before = broken(&right);
    Ok(broken(&wrong).into_iter().find(|v| !before.contains(v)).map(|v| (v, wrong.trace_hash)))
}

/// The gateway a mutant is searched with. A claim whose row count is ignored lets a stale
/// worker call the gateway for a row it does not own; an idempotent gateway absorbs that
/// call (which is why the idempotency key exists), so the search uses one that pays.
pub fn gateway_for(mutant: Mutant) -> GatewayMode {
    match mutant {
        Mutant::ClaimRowCountIgnored => GatewayMode::NonIdempotent,
        _ => GatewayMode::Idempotent,
    }
}

fn scenario_for(mutant: Mutant, seed: u64) -> Result<Scenario, String> {
    scenario::build("random", seed, mutant.baseline(), gateway_for(mutant), FaultMask::ALL)
}

/// Removes faults one at a time while the plan still catches the mutant with the same
/// invariant; returns the smallest plan found.
pub fn shrink(sc: &Scenario, seed: u64, mutant: Mutant, invariant: &str) -> Result<FaultPlan, String> {
    let mut plan = sc.world.faults.clone();
    let mut i = 0;
    while i < plan.faults.len() {
        let mut fewer = plan.clone();
        fewer.faults.remove(i);
        let mut trial = sc.clone();
        trial.world.faults = fewer.clone();
        match catches(&trial, seed, mutant)? {
            Some((v, _)) if v == invariant => plan = fewer,
            _ => i += 1,
        }
    }
    Ok(plan)
}

/// One search: the first seed from `start` (within `budget` seeds) that catches it.
pub fn search(mutant: Mutant, start: u64, budget: u64) -> Result<Option<(u64, &'static str, u64)>, String> {
    for seed in start..start + budget {
        if let Some((invariant, hash)) = catches(&scenario_for(mutant, seed)?, seed, mutant)? {
            return Ok(Some((seed, invariant, hash)));
        }
    }
    Ok(None)
}

#[derive(Clone, Debug, Serialize)]
pub struct MutantReport {
    pub name: &'static str,
    pub baseline: &'static str,
    pub gateway: &'static str,
    pub caught: bool,
    /// The invariant that caught it in the first search.
    pub invariant: Option<&'static str>,
    /// Seeds run until it was caught, in each search (a search that did not catch it
    /// counts its whole budget).
    pub seeds_to_detect: Vec<u64>,
    pub seeds_to_detect_median: u64,
    /// Faults left in the first search's plan after shrinking.
    pub shrunk_faults: Option<usize>,
    /// The first search's catching seed and the buggy run's trace hash.
    pub first_seed: Option<u64>,
    pub trace_hash: Option<String>,
    pub wall_ms: u64,
}

pub fn evaluate(mutant: Mutant, starts: u64, budget: u64) -> Result<MutantReport, String> {
    let t = Instant::now();
    let mut seeds_to_detect = Vec::new();
    let mut first = None;
    for k in 0..starts.max(1) {
        let start = 1 + k * START_STRIDE;
        match search(mutant, start, budget)? {
            Some((seed, invariant, hash)) => {
                seeds_to_detect.push(seed - start + 1);
                first.get_or_insert((seed, invariant, hash));
            }
            None => seeds_to_detect.push(budget),
        }
    }
    let shrunk_faults = match first {
        Some((seed, invariant, _)) => {
            Some(shrink(&scenario_for(mutant, seed)?, seed, mutant, invariant)?.faults.len())
        }
        None => None,
    };
    let mut sorted = seeds_to_detect.clone();
    sorted.sort_unstable();
    Ok(MutantReport {
        name: mutant.name(),
        baseline: mutant.baseline().name(),
        gateway: gateway_for(mutant).name(),
        caught: first.is_some(),
        invariant: first.map(|f| f.1),
        seeds_to_detect_median: sorted[sorted.len() / 2],
        seeds_to_detect,
        shrunk_faults,
        first_seed: first.map(|f| f.0),
        trace_hash: first.map(|f| format!("{:016x}", f.2)),
        wall_ms: t.elapsed().as_millis() as u64,
    })
}

/// Every mutant of the catalogue, on `jobs` threads.
pub fn evaluate_all(starts: u64, budget: u64, jobs: usize) -> Result<Vec<MutantReport>, String> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&mutant) = Mutant::ALL.get(i) else { return };
                let r = evaluate(mutant, starts, budget);
                results.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// `reports/detection.md`.
pub fn detection_report(reports: &[MutantReport], starts: u64, budget: u64) -> String {
    let mut out = String::from("# Detection power, measured with mutants\n\n");
    out.push_str(
        "Generated by `fencesim mutants`; do not edit by hand. A test re-runs the catching seeds named here and \
         fails when this file is stale.\n\n",
    );
    let _ = writeln!(
        out,
        "Each mutant plants one bug in the mechanism whose code has that line. The suite's search runs the random \
         scenario seed after seed, with and without the bug; the mutant is caught when the bug breaks an invariant \
         that the correct code does not break on the same seed. {starts} searches per mutant, {budget} seeds at most \
         each, starting {START_STRIDE} seeds apart. The catching plan of the first search is shrunk one fault at a \
         time. Wall time is for all of a mutant's searches and its shrinking, on this machine.\n"
    );
    out.push_str(
        "| mutant | planted in | gateway | caught by | seeds to detect, median | per search | shrunk plan (faults) | first seed | trace hash | wall time |\n\
         |---|---|---|---|---:|---|---:|---:|---|---:|\n",
    );
    for r in reports {
        let per: Vec<String> = r.seeds_to_detect.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} s |",
            r.name,
            r.baseline,
            r.gateway,
            r.invariant.unwrap_or("NOT CAUGHT"),
            r.seeds_to_detect_median,
            per.join(", "),
            r.shrunk_faults.map_or("-".to_owned(), |n| n.to_string()),
            r.first_seed.map_or("-".to_owned(), |s| s.to_string()),
            r.trace_hash.as_deref().unwrap_or("-"),
            r.wall_ms as f64 / 1000.0,
        );
    }
    let caught = reports.iter().filter(|r| r.caught).count();
    let _ = writeln!(out, "\n{caught} of {} mutants caught.", reports.len());
    out
}
