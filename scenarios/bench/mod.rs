//! `fencesim bench`: the simulated worked example and exploration, in one process, against
//! two references: their SQL floor (`floor.rs`: the same statements with no simulation
//! around them), whose ratio is what the simulation costs on top of the database work it
//! cannot avoid; and the baseline (`baseline.rs`: the writes as they were before, on fresh
//! databases), whose ratio is what the cheaper database work saved. Timings use the real
//! clock, outside any run.

use crate::check::{check_all, Facts};
use crate::runner::{judge, run, DEFAULT_SEED};
use crate::scenario::production::Rates;
use crate::scenario::{self, worked_example, FaultMask};
use crate::search::explore::{run_candidate, run_seed, run_seeds, SeedResult};
use crate::search::guided::{self, Bounds};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use fencesim_model::Mechanism;
use fencesim_sim::{run_wired, run_world, trace_hash, GatewayMode};
use serde::Serialize;
use std::time::Instant;

mod baseline;
pub mod floor;
pub mod inside;
pub mod programs;
pub mod scale;
pub mod scripts;
pub mod timers;

pub use baseline::Baseline;
pub use floor::{statements, Floor, FloorOp};

#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub runs: usize,
    pub statements: usize,
    pub worked_example_ms_median: f64,
    pub sql_floor_ms_median: f64,
    pub ratio: f64,
    /// The same run under the baseline (the writes returning their rows, fresh databases).
    pub baseline_ms_median: f64,
    /// The run's cost against the baseline's: what the cheaper database work saved.
    pub cost_vs_baseline: f64,
    /// Of the worked example: the simulated world alone, and the checkers with the hash.
    pub world_ms_median: f64,
    pub checks_ms_median: f64,
    /// The lease's Lua: the scripts the run sent, their time on a bare simulated Redis, and
    /// that time's share of the run's.
    pub scripts: usize,
    pub scripts_ms_median: f64,
    pub script_share: f64,
    /// The runtime's timer: the waits the run made on it, and their price on a bare runtime
    /// over the SQL floor, the points of `ratio` they make.
    pub sleeps: u64,
    pub sleep_ratio_points: f64,
    /// The SQL inside the run: the real time the run's statements took in it (a run of
    /// its own, watched, the median), over the SQL floor. `ratio` less this is the path's
    /// share: the simulation's own work around its requests, in points of the floor.
    pub sql_in_run_ratio: f64,
    pub path_ratio_points: f64,
    /// The watched run's time over the unwatched one's: what reading the clock around
    /// every statement added.
    pub watch_cost: f64,
    /// Recordings taken, interleaved with exploration's; `ratio` is their median and
    /// these their lowest and highest, the whole result the median recording's.
    pub recordings: usize,
    pub ratio_spread: [f64; 2],
}

/// The machine when the bench began: its load over the last minute (Linux's load
/// average; none elsewhere) and its cores. A ratio taken on a busy machine moves.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub load_at_start: Option<f64>,
    pub cores: usize,
}

impl Machine {
    pub fn now() -> Machine {
        let load = std::fs::read_to_string("/proc/loadavg").ok();
        Machine {
            load_at_start: load.and_then(|text| text.split_whitespace().next()?.parse().ok()),
            cores: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
        }
    }
}

/// `recordings` of the worked example's ratio and of exploration's floor ratio,
/// interleaved (the worked example, then exploration's seeds, and again), so that a
/// stretch in which the machine was busy moves one recording of each, not all of one;
/// then exploration's other figures. Each ratio is the median recording's.
pub fn bench_recorded(
    runs: usize,
    seeds: u64,
    memory_seeds: u64,
    recordings: usize,
) -> Result<(Machine, BenchResult, ExploreBench), String> {
    if !inside::can_watch() {
        return Err(
            "the machine's clock cannot be read inside a run: the SQL inside it cannot be timed".to_owned()
        );
    }
    let machine = Machine::now();
    let (mut worked, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..recordings.max(1) {
        worked.push(bench(runs)?);
        floors.push(explore_floor(seeds, Mechanism::Fenced, GatewayMode::Idempotent)?);
    }
    let explore = bench_explore(seeds, memory_seeds, &floors)?;
    let (middle, ratio_spread) = median_recording(&worked, |worked| worked.ratio)?;
    Ok((machine, BenchResult { recordings: worked.len(), ratio_spread, ..middle }, explore))
}

/// Waits the bench times on a bare runtime to price one.
const SLEEP_SAMPLE: u64 = 200_000;

/// The middle of `values` (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The Lua scripts `scenario`'s lease runs.
fn mechanism_scripts(scenario: &scenario::Scenario) -> fencesim_model::mechanism::Scripts {
    scenario.world.mechanism.spec().scripts
}

/// Milliseconds `f` took, and what it gave.
fn timed_ms<T>(f: impl FnOnce() -> Result<T, String>) -> Result<(T, f64), String> {
    let clock = Instant::now();
    let value = f()?;
    Ok((value, clock.elapsed().as_secs_f64() * 1e3))
}

pub fn bench(runs: usize) -> Result<BenchResult, String> {
    let scenario = worked_example().with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent);
    let reference = run(&scenario, DEFAULT_SEED)?;
    let ops = statements(&reference.record);
    let (script_ops, lua) = (scripts::script_calls(&reference.record), mechanism_scripts(&scenario));
    let floor = Floor::new()?;
    let expected_rows = floor.run(&scenario, &ops)?;
    let same = |hash: u64, what: &str| match hash == reference.trace_hash {
        true => Ok(()),
        false => Err(format!("the worked example gave another trace {what}")),
    };
    let (mut sim_ms, mut floor_ms, mut baseline_ms, mut world_ms, mut checks_ms, mut scripts_ms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut sql_in_run_ms, mut watched_ms) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let (outcome, ms) = timed_ms(|| run(&scenario, DEFAULT_SEED))?;
        same(outcome.trace_hash, "when run again in one process")?;
        sim_ms.push(ms);
        let ((outcome, sql_ms), ms) = timed_ms(|| Ok(inside::watched(|| run(&scenario, DEFAULT_SEED))))?;
        same(outcome?.trace_hash, "with its SQL watched")?;
        sql_in_run_ms.push(sql_ms);
        watched_ms.push(ms);
        let (baseline, ms) =
            timed_ms(|| judge(&scenario, run_wired(&scenario.world, DEFAULT_SEED, Baseline)?, None))?;
        same(baseline.trace_hash, "under the baseline")?;
        baseline_ms.push(ms);
        let (record, ms) = timed_ms(|| run_world(&scenario.world, DEFAULT_SEED))?;
        world_ms.push(ms);
        let facts = Facts { record: &record, world: &scenario.world, base: scenario.base };
        checks_ms
            .push(timed_ms(|| Ok(std::hint::black_box((check_all(&facts), trace_hash(&record.events)))))?.1);
        let (rows, ms) = timed_ms(|| floor.run(&scenario, &ops))?;
        floor_ms.push(ms);
        if rows != expected_rows {
            return Err("the SQL floor updated a different number of rows".to_owned());
        }
        let script_ms = timed_ms(|| scripts::run_scripts(lua, scenario.world.ttl_ms, &script_ops))?.1;
        scripts_ms.push(script_ms);
    }
    let (worked_example_ms_median, sql_floor_ms_median) = (median(sim_ms), median(floor_ms));
    let (baseline_ms_median, scripts_ms_median) = (median(baseline_ms), median(scripts_ms));
    let sleep_ms = reference.record.sleeps as f64 * timers::sleep_ns(SLEEP_SAMPLE) / 1e6;
    let ratio = worked_example_ms_median / sql_floor_ms_median;
    let sql_in_run_ratio = median(sql_in_run_ms) / sql_floor_ms_median;
    Ok(BenchResult {
        runs: runs.max(1),
        statements: ops.len(),
        worked_example_ms_median,
        sql_floor_ms_median,
        ratio,
        baseline_ms_median,
        cost_vs_baseline: worked_example_ms_median / baseline_ms_median,
        world_ms_median: median(world_ms),
        checks_ms_median: median(checks_ms),
        scripts: script_ops.len(),
        scripts_ms_median,
        script_share: scripts_ms_median / worked_example_ms_median,
        sleeps: reference.record.sleeps,
        sleep_ratio_points: sleep_ms / sql_floor_ms_median,
        sql_in_run_ratio,
        path_ratio_points: ratio - sql_in_run_ratio,
        watch_cost: median(watched_ms) / worked_example_ms_median,
        recordings: 1,
        ratio_spread: [ratio, ratio],
    })
}

/// Exploration's cost: throughput per core, against the SQL floor of the same seeds and
/// against the baseline, the speed-up of a second thread, and whether memory stays flat
/// over many seeds.
#[derive(Clone, Debug, Serialize)]
pub struct ExploreBench {
    pub mechanism: String,
    pub seeds: u64,
    pub seeds_per_second_per_core: f64,
    pub sql_floor_seconds: f64,
    pub explore_seconds: f64,
    /// Simulated seeds against the same seeds' statements on bare databases.
    pub floor_ratio: f64,
    /// The lease's Lua over the same seeds: scripts per seed, their time on a bare
    /// simulated Redis as a share of the seeds' time, and the points of the floor ratio
    /// that time makes.
    pub scripts_per_seed: f64,
    pub script_share: f64,
    pub script_ratio_points: f64,
    /// The runtime's timer over the same seeds: waits per seed, the price of one on a bare
    /// runtime, and the points of the floor ratio those waits make at that price.
    pub sleeps_per_seed: f64,
    pub sleep_ns: f64,
    pub sleep_ratio_points: f64,
    /// The SQL inside the runs (each seed run once more, watched) over the floor, the
    /// path's points (`floor_ratio` less it), and what watching cost the watched runs.
    pub sql_in_run_ratio: f64,
    pub path_ratio_points: f64,
    pub watch_cost: f64,
    /// Recordings of the floor ratio, interleaved with the worked example's: `floor_ratio`
    /// is their median, these their lowest and highest, the other floor figures the median
    /// recording's.
    pub recordings: usize,
    pub floor_ratio_spread: [f64; 2],
    /// The same seeds under the baseline, on one thread, and the cost per seed against it.
    pub baseline_seeds_per_second: f64,
    pub cost_vs_baseline: f64,
    pub jobs2_speedup: f64,
    /// The guided search over as many runs from seed 1, on one thread: its runs per second,
    /// and its cost per run against the uniform search's.
    pub guided_runs_per_second: f64,
    pub guided_cost_vs_uniform: f64,
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

/// Seeds 1 to `seeds` simulated, against their statements on bare databases and their
/// scripts on a bare simulated Redis.
#[derive(Clone, Default)]
pub struct Against {
    simulated: f64,
    floor: f64,
    scripts: f64,
    script_calls: usize,
    sleeps: u64,
    /// The same seeds run again with their SQL watched: the time their statements took,
    /// and the watched runs' own.
    sql_in_run: f64,
    watched: f64,
}

impl Against {
    fn ratio(&self) -> f64 {
        self.simulated / self.floor
    }
}

/// The statements of seeds 1 to `seeds`, run on bare databases, and their scripts on a
/// bare simulated Redis, against the simulated runs that executed them (in seconds).
pub fn explore_floor(seeds: u64, mechanism: Mechanism, gateway: GatewayMode) -> Result<Against, String> {
    let floor_databases = Floor::new()?;
    let mut against = Against::default();
    for seed in 1..=seeds {
        let scenario = scenario::build("random", seed, mechanism, gateway, FaultMask::ALL)?;
        let (outcome, ms) = timed_ms(|| run(&scenario, seed))?;
        against.simulated += ms / 1e3;
        let ((watched, sql_ms), ms) = timed_ms(|| Ok(inside::watched(|| run(&scenario, seed))))?;
        if watched?.trace_hash != outcome.trace_hash {
            return Err(format!("seed {seed} gave another trace with its SQL watched"));
        }
        against.sql_in_run += sql_ms / 1e3;
        against.watched += ms / 1e3;
        let ops = statements(&outcome.record);
        against.floor += timed_ms(|| floor_databases.run(&scenario, &ops))?.1 / 1e3;
        let calls = scripts::script_calls(&outcome.record);
        let lua = mechanism_scripts(&scenario);
        against.scripts += timed_ms(|| scripts::run_scripts(lua, scenario.world.ttl_ms, &calls))?.1 / 1e3;
        against.script_calls += calls.len();
        against.sleeps += outcome.record.sleeps;
    }
    Ok(against)
}

/// One seed of the bench's exploration under the baseline.
fn baseline_seed(seed: u64, mechanism: Mechanism, gateway: GatewayMode) -> Result<SeedResult, String> {
    let scenario = scenario::build("random", seed, mechanism, gateway, FaultMask::ALL)?;
    let outcome = judge(&scenario, run_wired(&scenario.world, seed, Baseline)?, None)?;
    Ok(SeedResult::of(seed, &scenario, outcome))
}

/// Seconds the guided search takes for `runs` runs from seed 1, on one thread, each run
/// judged and read for its features as `explore --search guided` does.
fn guided_seconds(runs: u64, mechanism: Mechanism, gateway: GatewayMode) -> Result<f64, String> {
    let never = std::sync::atomic::AtomicBool::new(false);
    let bounds = Bounds { from: 1, runs, allowed: FaultMask::ALL, stop_at_first: false, rates: Rates::Swarm };
    let clock = Instant::now();
    guided::search(
        &bounds,
        &Pool { jobs: 1, interrupted: &never },
        |seed| scenario::build("random", seed, mechanism, gateway, FaultMask::ALL),
        |candidate| run_candidate(candidate, None),
        |_, _| {},
        |_, _| {},
    )?;
    Ok(clock.elapsed().as_secs_f64())
}

/// The recording whose `ratio` is the median (the upper one of an even count), and the
/// lowest and highest ratio.
fn median_recording<T: Clone>(recordings: &[T], ratio: impl Fn(&T) -> f64) -> Result<(T, [f64; 2]), String> {
    let mut sorted = recordings.to_vec();
    sorted.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    let (lowest, highest) = match (sorted.first(), sorted.last()) {
        (Some(lowest), Some(highest)) => (ratio(lowest), ratio(highest)),
        _ => return Err("no recording was taken".to_owned()),
    };
    Ok((sorted.swap_remove(sorted.len() / 2), [lowest, highest]))
}

/// Exploration's figures; `floors` are the recordings of its floor ratio already taken.
pub fn bench_explore(seeds: u64, memory_seeds: u64, floors: &[Against]) -> Result<ExploreBench, String> {
    let (mechanism, gateway) = (Mechanism::Fenced, GatewayMode::Idempotent);
    let never = std::sync::atomic::AtomicBool::new(false);
    let work = |seed| run_seed("random", seed, mechanism, gateway, FaultMask::ALL, None);
    let baseline = |seed| baseline_seed(seed, mechanism, gateway);
    let on = |jobs| Pool { jobs, interrupted: &never };
    let range = SeedRange::first(seeds)?;
    // seconds on `jobs` threads, and every seed's trace hash
    let timed = |jobs: usize, work: &(dyn Fn(u64) -> Result<SeedResult, String> + Sync)| {
        let mut hashes = Vec::new();
        let clock = Instant::now();
        run_seeds(&on(jobs), range, false, work, |_| {}, |result| hashes.push(result.trace_hash))?;
        Ok::<_, String>((clock.elapsed().as_secs_f64(), hashes))
    };
    // Best of three, alternating, so that a noisy neighbour does not decide a ratio.
    let (mut one, mut two, mut before) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..3 {
        let (seconds, hashes) = timed(1, &work)?;
        one = one.min(seconds);
        let (seconds, baseline_hashes) = timed(1, &baseline)?;
        before = before.min(seconds);
        if hashes != baseline_hashes {
            return Err("a seed gave another trace under the baseline".to_owned());
        }
        two = two.min(timed(2, &work)?.0);
    }
    let after_1000 = {
        if seeds < 1_000 {
            run_seeds(&on(2), SeedRange::new(seeds + 1, 1_000 - seeds)?, false, work, |_| {}, |_| {})?;
        }
        peak_rss_mb()
    };
    let (middle, [lowest, highest]) = median_recording(floors, Against::ratio)?;
    let Against { simulated, floor, scripts, script_calls, sleeps, sql_in_run, watched } = middle;
    let sleep_ns = timers::sleep_ns(SLEEP_SAMPLE);
    let after_many = if memory_seeds > 1_000 {
        run_seeds(&on(2), SeedRange::new(1_001, memory_seeds - 1_000)?, false, work, |_| {}, |_| {})?;
        peak_rss_mb()
    } else {
        0.0
    };
    // last, so that the memory figures are the uniform search's alone; alternating again
    let (mut uniform, mut guided) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        guided = guided.min(guided_seconds(seeds, mechanism, gateway)?);
        uniform = uniform.min(timed(1, &work)?.0);
    }
    Ok(ExploreBench {
        mechanism: mechanism.name().to_owned(),
        seeds,
        seeds_per_second_per_core: seeds as f64 / one,
        sql_floor_seconds: floor,
        explore_seconds: simulated,
        floor_ratio: simulated / floor,
        scripts_per_seed: script_calls as f64 / seeds as f64,
        script_share: scripts / simulated,
        script_ratio_points: scripts / floor,
        sleeps_per_seed: sleeps as f64 / seeds as f64,
        sleep_ns,
        sleep_ratio_points: sleeps as f64 * sleep_ns / 1e9 / floor,
        sql_in_run_ratio: sql_in_run / floor,
        path_ratio_points: (simulated - sql_in_run) / floor,
        watch_cost: watched / simulated,
        recordings: floors.len(),
        floor_ratio_spread: [lowest, highest],
        baseline_seeds_per_second: seeds as f64 / before,
        cost_vs_baseline: one / before,
        jobs2_speedup: one / two,
        guided_runs_per_second: seeds as f64 / guided,
        guided_cost_vs_uniform: guided / uniform,
        peak_rss_mb_after_1000: after_1000,
        memory_seeds,
        peak_rss_mb_after_memory_seeds: after_many,
    })
}
