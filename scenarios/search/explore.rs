//! Exploration by seed: many runs in parallel, results that do not depend on how many
//! threads ran them, and every failure kept as a replay file.

use crate::check::coverage::{Coverage, Touched};
use crate::check::INVARIANTS;
use crate::files::replay_file::ReplayFile;
use crate::mutant::Mutant;
use crate::runner::{run_with, Costs, Outcome};
use crate::scenario::production::Rates;
use crate::scenario::{self, FaultMask};
use crate::search::guided::{self, features::Features, Bounds, Candidate, Judged};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// What one seed gave. An exploration keeps one per seed, so it stays small: the
/// outcome of a failing seed is handed to the caller once and then dropped.
pub struct SeedResult {
    pub seed: u64,
    pub violations: Vec<&'static str>,
    pub trace_hash: u64,
    pub touched: Touched,
    /// What the mechanism cost the run.
    pub costs: Costs,
    /// The outcome itself, for a failing seed, until the caller takes it.
    pub failure: Option<Box<Outcome>>,
}

/// Runs one seed of a scenario under a mechanism and keeps what an exploration needs.
pub fn run_seed(
    name: &str,
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
    mutant: Option<Mutant>,
) -> Result<SeedResult, String> {
    let scenario = scenario::build(name, seed, mechanism, gateway, allowed)?;
    let outcome = run_with(&scenario, seed, mutant)?;
    Ok(SeedResult::of(seed, &scenario, outcome))
}

impl SeedResult {
    /// What an exploration keeps of a seed's outcome.
    pub fn of(seed: u64, scenario: &scenario::Scenario, outcome: Outcome) -> SeedResult {
        let touched = Touched::of(&outcome.record, &scenario.world);
        SeedResult::touched(seed, scenario, outcome, touched)
    }

    /// `of`, with what the run touched already counted.
    pub fn touched(
        seed: u64,
        scenario: &scenario::Scenario,
        outcome: Outcome,
        touched: Touched,
    ) -> SeedResult {
        let violations: Vec<&'static str> = outcome.broken();
        let jobs = scenario.world.all_jobs().count() as u64;
        // every job needs one lease; each one more is a handoff (the job changed hands)
        let handoffs = u64::from(touched.leases).saturating_sub(jobs);
        let costs = Costs {
            jobs,
            handoffs,
            fence_rejections: touched.fence_rejections.into(),
            found_sent: touched.found_sent.into(),
        };
        let trace_hash = outcome.trace_hash;
        let failure = if violations.is_empty() { None } else { Some(Box::new(outcome)) };
        SeedResult { seed, violations, trace_hash, touched, costs, failure }
    }
}

/// Runs `seeds` on the pool. `on_arrival` sees each result as it arrives (it may take a
/// failure's outcome, to write it out at once; what it leaves is dropped); `in_order` then
/// receives the results in seed order and, with `stop_at_first`, none past the first
/// failing seed. Returns how many seeds `in_order` received.
pub fn run_seeds(
    pool: &Pool<'_>,
    seeds: SeedRange,
    stop_at_first: bool,
    work: impl Fn(u64) -> Result<SeedResult, String> + Sync,
    mut on_arrival: impl FnMut(&mut SeedResult),
    mut in_order: impl FnMut(SeedResult),
) -> Result<u64, String> {
    pool.run(
        seeds.positions(),
        |result: &SeedResult| stop_at_first && !result.violations.is_empty(),
        |position| work(seeds.seed(position)),
        |_, result| {
            on_arrival(result);
            result.failure = None;
        },
        |_, result| in_order(result),
    )
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
    /// A bug of the mutant catalogue planted in every run, if any.
    pub mutant: Option<Mutant>,
    /// Draw a progress bar on standard error.
    pub progress: bool,
    /// Each seed drawn afresh, or plans grown from the runs that reached something new.
    pub search: SearchKind,
}

/// How an exploration chooses its runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchKind {
    /// Seed after seed, each world and plan drawn afresh.
    #[default]
    Uniform,
    /// Plans grown from the runs that reached something new (`search::guided`).
    Guided,
}

impl SearchKind {
    /// Its name, as `--search` takes it.
    pub fn name(self) -> &'static str {
        match self {
            SearchKind::Uniform => "uniform",
            SearchKind::Guided => "guided",
        }
    }
}

impl ExploreConfig {
    /// Seeds `from..from + seeds` of the random scenario under `mechanism`, every fault
    /// kind on, an idempotent gateway, stopping at the first failure, no progress bar.
    pub fn random(mechanism: Mechanism, from: u64, seeds: u64, jobs: usize, out: PathBuf) -> ExploreConfig {
        ExploreConfig {
            scenario: "random".into(),
            mechanism,
            gateway: GatewayMode::Idempotent,
            from,
            seeds,
            jobs,
            keep_going: false,
            out,
            allowed: FaultMask::ALL,
            mutant: None,
            progress: false,
            search: SearchKind::Uniform,
        }
    }
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
    /// Every failing seed's replay file, in seed order.
    pub replay_files: Vec<PathBuf>,
    /// The first few seeds that broke each invariant.
    pub first_seeds: BTreeMap<&'static str, Vec<u64>>,
    /// A replay file could not be written (a full disk): the exploration stopped there.
    pub write_error: Option<String>,
}

/// How many of an invariant's failing seeds a report names.
pub const FIRST_SEEDS: usize = 5;

fn progress_bar(config: &ExploreConfig) -> indicatif::ProgressBar {
    if !config.progress {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(config.seeds);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} seeds, {per_sec}, ETA {eta} {msg}")
            .expect("a valid template"),
    );
    bar
}

/// What the exploration gathers while runs arrive, and then in run order. A run is known
/// by its key: its seed in a uniform search, its place in a guided one (where a seed's
/// world runs under many plans).
struct Gathered {
    failures: u64,
    written: BTreeMap<u64, PathBuf>,
    write_error: Option<String>,
    violations: BTreeMap<&'static str, u64>,
    first_seeds: BTreeMap<&'static str, Vec<u64>>,
    coverage: Coverage,
    /// The failing runs' keys and seeds, in run order.
    failing: Vec<(u64, u64)>,
}

impl Gathered {
    fn new() -> Gathered {
        Gathered {
            failures: 0,
            written: BTreeMap::new(),
            write_error: None,
            violations: INVARIANTS.iter().map(|invariant| (invariant.name, 0)).collect(),
            first_seeds: BTreeMap::new(),
            coverage: Coverage::new(),
            failing: Vec::new(),
        }
    }

    /// A failing run's replay file is written whole before anything reports it, named by
    /// its seed (and, in a guided search, its run); a file that cannot be written stops the
    /// exploration (`halt`) with what it found so far.
    fn arrived(
        &mut self,
        key: u64,
        result: &mut SeedResult,
        run: Option<u64>,
        (out, halt): (&Path, &AtomicBool),
        bar: &indicatif::ProgressBar,
    ) {
        bar.inc(1);
        let Some(outcome) = result.failure.take() else { return };
        self.failures += 1;
        bar.set_message(format!("{} violating run(s)", self.failures));
        let file = ReplayFile::from_outcome(&outcome);
        let written = match run {
            None => file.write_into(out),
            Some(run) => file.write_into_as(out, &format!("run-{run}")),
        };
        match written {
            Ok(path) => {
                self.written.insert(key, path);
            }
            Err(error) => {
                self.write_error.get_or_insert(error);
                halt.store(true, Ordering::Relaxed);
            }
        }
    }

    fn in_order(&mut self, key: u64, result: SeedResult) {
        self.coverage.add(&result.touched);
        for invariant in &result.violations {
            *self.violations.entry(invariant).or_default() += 1;
            let first = self.first_seeds.entry(invariant).or_default();
            if first.len() < FIRST_SEEDS {
                first.push(result.seed);
            }
        }
        if !result.violations.is_empty() {
            self.failing.push((key, result.seed));
        }
    }

    fn report(mut self, runs: u64, elapsed: f64, interrupted: bool) -> ExploreReport {
        self.violations.retain(|_, seeds| *seeds > 0);
        // Files are written as failures arrive; one that arrived past the run an
        // exploration stopped at was never counted: drop it, so that the files do not
        // depend on timing.
        for (key, path) in &self.written {
            if !self.failing.iter().any(|(failing, _)| failing == key) {
                let _ = std::fs::remove_file(path);
            }
        }
        let first = self.failing.first().copied();
        let written = &self.written;
        ExploreReport {
            seeds_run: runs,
            violations: self.violations,
            first_failing_seed: first.map(|(_, seed)| seed),
            replay_file: first.and_then(|(key, _)| written.get(&key).cloned()),
            seeds_per_second: runs as f64 / elapsed.max(1e-9),
            interrupted,
            coverage: self.coverage,
            replay_files: self.failing.iter().filter_map(|(key, _)| written.get(key).cloned()).collect(),
            first_seeds: self.first_seeds,
            write_error: self.write_error,
        }
    }
}

/// Runs one candidate of a guided exploration and judges it: found when it broke an
/// invariant; its features read from the same record.
pub fn run_candidate(candidate: &Candidate, mutant: Option<Mutant>) -> Result<Judged<SeedResult>, String> {
    let outcome = run_with(&candidate.scenario, candidate.seed, mutant)?;
    let (features, touched) = Features::of(&outcome.record, &outcome.scenario.world);
    let result = SeedResult::touched(candidate.seed, &candidate.scenario, outcome, touched);
    Ok(Judged { features, found: !result.violations.is_empty(), result })
}

/// The guided search over the scenario's worlds: fresh seeds from `from`, every run judged
/// by the invariants and read for its features.
fn explore_guided(
    config: &ExploreConfig,
    pool: &Pool<'_>,
    seeds: SeedRange,
    arrivals: &std::cell::RefCell<Gathered>,
    bar: &indicatif::ProgressBar,
) -> Result<u64, String> {
    let (name, mechanism, gateway, allowed, mutant) =
        (config.scenario.as_str(), config.mechanism, config.gateway, config.allowed, config.mutant);
    let rates = Rates::of_scenario(name);
    let bounds =
        Bounds { from: seeds.from, runs: seeds.count, allowed, stop_at_first: !config.keep_going, rates };
    guided::search(
        &bounds,
        pool,
        |seed| scenario::build(name, seed, mechanism, gateway, allowed),
        |candidate| run_candidate(candidate, mutant),
        |candidate, result| {
            let to = (config.out.as_path(), pool.interrupted);
            arrivals.borrow_mut().arrived(candidate.run, result, Some(candidate.run), to, bar);
        },
        |candidate, result| arrivals.borrow_mut().in_order(candidate.run, result),
    )
}

pub fn explore(config: &ExploreConfig, interrupted: &AtomicBool) -> Result<ExploreReport, String> {
    scenario::known(&config.scenario)?;
    let seeds = SeedRange::new(config.from, config.seeds)?;
    let bar = progress_bar(config);
    let start = Instant::now();
    let (name, mechanism, gateway, allowed, mutant) =
        (config.scenario.as_str(), config.mechanism, config.gateway, config.allowed, config.mutant);
    let arrivals = std::cell::RefCell::new(Gathered::new());
    let pool = Pool { jobs: config.jobs, interrupted };
    let runs = match config.search {
        SearchKind::Uniform => run_seeds(
            &pool,
            seeds,
            !config.keep_going,
            |seed| run_seed(name, seed, mechanism, gateway, allowed, mutant),
            |result| {
                arrivals.borrow_mut().arrived(result.seed, result, None, (&config.out, interrupted), &bar)
            },
            |result| arrivals.borrow_mut().in_order(result.seed, result),
        )?,
        SearchKind::Guided => explore_guided(config, &pool, seeds, &arrivals, &bar)?,
    };
    bar.finish_and_clear();
    Ok(arrivals.into_inner().report(runs, start.elapsed().as_secs_f64(), interrupted.load(Ordering::Relaxed)))
}
