//! Exploration by seed: many runs in parallel, results that do not depend on how many
//! threads ran them, and every failure kept as a replay file.

use crate::checkers::INVARIANTS;
use crate::coverage::{Coverage, Touched};
use crate::random::FaultMask;
use crate::replay::ReplayFile;
use crate::runner::{run, Outcome};
use crate::scenario;
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// What one seed gave. An exploration keeps one per seed, so it stays small: the
/// outcome of a failing seed is handed to the caller once and then dropped.
pub struct SeedResult {
    pub seed: u64,
    pub violations: Vec<&'static str>,
    pub trace_hash: u64,
    pub touched: Touched,
    /// The outcome itself, for a failing seed, until the caller takes it.
    pub failure: Option<Box<Outcome>>,
}

/// Runs one seed of a scenario under a strategy and keeps what an exploration needs.
pub fn run_seed(
    name: &str,
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Result<SeedResult, String> {
    let sc = scenario::build(name, seed, mechanism, gateway, allowed)?;
    let outcome = run(&sc, seed)?;
    let violations: Vec<&'static str> =
        outcome.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant).collect();
    let touched = Touched::of(&outcome.record);
    let trace_hash = outcome.trace_hash;
    let failure = if violations.is_empty() { None } else { Some(Box::new(outcome)) };
    Ok(SeedResult { seed, violations, trace_hash, touched, failure })
}

/// Runs `seeds` on `jobs` threads. `on_arrival` sees each result on this thread as it
/// arrives (it may take a failure's outcome, to write it out at once); `in_order` then
/// receives the results in seed order, without gaps, and, with `stop_at_first`, none
/// past the first failing seed: what it sees does not depend on the thread count. Only
/// the few results that arrive ahead of their turn are held, so memory stays flat
/// however many seeds run. Returns how many seeds `in_order` received.
pub fn run_parallel(
    seeds: std::ops::Range<u64>,
    jobs: usize,
    stop_at_first: bool,
    interrupted: &AtomicBool,
    work: impl Fn(u64) -> Result<SeedResult, String> + Sync,
    mut on_arrival: impl FnMut(&mut SeedResult),
    mut in_order: impl FnMut(SeedResult),
) -> Result<u64, String> {
    let next = AtomicU64::new(seeds.start);
    let stop_above = AtomicU64::new(u64::MAX);
    let (tx, rx) = mpsc::channel::<Result<SeedResult, String>>();
    let mut waiting: BTreeMap<u64, SeedResult> = BTreeMap::new();
    let mut expected = seeds.start;
    let mut done = false;
    let mut error = None;
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let tx = tx.clone();
            let (next, stop_above, work) = (&next, &stop_above, &work);
            scope.spawn(move || loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end
                    || seed > stop_above.load(Ordering::Relaxed)
                    || interrupted.load(Ordering::Relaxed)
                {
                    return;
                }
                let result = work(seed);
                if let Ok(r) = &result {
                    if stop_at_first && !r.violations.is_empty() {
                        stop_above.fetch_min(seed, Ordering::Relaxed);
                    }
                }
                if tx.send(result).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        for result in rx {
            match result {
                Ok(mut r) => {
                    on_arrival(&mut r);
                    r.failure = None;
                    waiting.insert(r.seed, r);
                    while !done {
                        let Some(r) = waiting.remove(&expected) else { break };
                        expected += 1;
                        done = stop_at_first && !r.violations.is_empty();
                        in_order(r);
                    }
                }
                Err(e) => {
                    error.get_or_insert(e);
                    interrupted.store(true, Ordering::Relaxed);
                }
            }
        }
    });
    match error {
        Some(e) => Err(e),
        None => Ok(expected - seeds.start),
    }
}

pub struct ExploreConfig {
    pub scenario: String,
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    pub from: u64,
    pub seeds: u64,
    pub jobs: usize,
    pub keep_going: bool,
    pub out: PathBuf,
    pub allowed: FaultMask,
    /// Draw a progress bar on standard error.
    pub progress: bool,
}

#[derive(Debug, Serialize)]
pub struct ExploreReport {
    pub seeds_run: u64,
    /// Seeds that broke each invariant.
    pub violations: BTreeMap<&'static str, u64>,
    pub first_failing_seed: Option<u64>,
    pub replay_file: Option<PathBuf>,
    pub seeds_per_second: f64,
    pub interrupted: bool,
    pub coverage: Coverage,
    #[serde(skip)]
    pub replay_files: Vec<PathBuf>,
}

pub fn explore(cfg: &ExploreConfig, interrupted: &AtomicBool) -> Result<ExploreReport, String> {
    scenario::known(&cfg.scenario)?;
    let bar = if cfg.progress {
        let bar = indicatif::ProgressBar::new(cfg.seeds);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} seeds, {per_sec}, ETA {eta} {msg}")
                .expect("a valid template"),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let start = Instant::now();
    let mut failures = 0u64;
    let mut written: BTreeMap<u64, PathBuf> = BTreeMap::new();
    let mut write_error = None;
    let (name, mech, gw, allowed) = (cfg.scenario.as_str(), cfg.mechanism, cfg.gateway, cfg.allowed);
    let mut violations: BTreeMap<&'static str, u64> = INVARIANTS.iter().map(|n| (*n, 0)).collect();
    let mut coverage = Coverage::new();
    let mut failing: Vec<u64> = Vec::new();
    let seeds_run = run_parallel(
        cfg.from..cfg.from.saturating_add(cfg.seeds),
        cfg.jobs,
        !cfg.keep_going,
        interrupted,
        |seed| run_seed(name, seed, mech, gw, allowed),
        |r| {
            bar.inc(1);
            if let Some(outcome) = r.failure.take() {
                failures += 1;
                bar.set_message(format!("{failures} violating seed(s)"));
                // Written whole before anything reports it.
                match ReplayFile::from_outcome(&outcome).write_into(&cfg.out) {
                    Ok(path) => {
                        written.insert(r.seed, path);
                    }
                    Err(e) => {
                        write_error.get_or_insert(e);
                    }
                }
            }
        },
        |r| {
            coverage.add(&r.touched);
            for v in &r.violations {
                *violations.entry(v).or_default() += 1;
            }
            if !r.violations.is_empty() {
                failing.push(r.seed);
            }
        },
    )?;
    bar.finish_and_clear();
    if let Some(e) = write_error {
        return Err(e);
    }
    let elapsed = start.elapsed().as_secs_f64();
    violations.retain(|_, n| *n > 0);
    let first_failing_seed = failing.first().copied();
    let replay_files: Vec<PathBuf> = failing.iter().filter_map(|s| written.get(s).cloned()).collect();
    Ok(ExploreReport {
        seeds_run,
        violations,
        first_failing_seed,
        replay_file: first_failing_seed.and_then(|s| written.get(&s).cloned()),
        seeds_per_second: seeds_run as f64 / elapsed.max(1e-9),
        interrupted: interrupted.load(Ordering::Relaxed),
        coverage,
        replay_files,
    })
}
