//! The live run from start to verdict: a Redis (the run's own server, or one at a URL
//! that is empty), the database file, the gateway service, the expiry watch and the
//! queue are set up; one process per worker is started; the plan's faults are taken
//! (`supervise`); once every job is acked the queue closes, the workers leave, and the
//! files are merged and judged.

use crate::live::clock::{wall_us, LiveClock};
use crate::live::expiry::ExpiryWatch;
use crate::live::faults::Progress;
use crate::live::gateway::{GatewayService, GatewaySetup};
use crate::live::interrupt;
use crate::live::log::{read_all, EventLog};
use crate::live::merge::merge;
use crate::live::plan::{live_plan, world_refusal, LivePlan};
use crate::live::postgres::{PgRefunds, PostgresServer};
use crate::live::processes::Children;
use crate::live::queue;
use crate::live::redis::{connect, Admin};
use crate::live::servers::{jumps, restart_mode, Servers};
use crate::live::store::{Refunds, Sequences, StoreAt};
use crate::live::supervise::Supervision;
use crate::live::turns::Turns;
use crate::live::worker::WorkerSpec;
use crate::mutant::Mutant;
use crate::runner::{judge, Outcome, DEFAULT_SEED};
use crate::scenario::{self, FaultMask, Scenario};
use fencesim_model::{Mechanism, SqliteRefunds, WorkerId};
use fencesim_sim::{EventKind, FaultKind, GatewayMode, Hop, RunRecord, Trigger, WorldConfig};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use strum::EnumCount;

/// What `fencesim live` was asked for.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    /// Real time per story time (0.1: ten times faster than the story).
    pub time_scale: f64,
    /// A Redis to use instead of starting one; its database must be empty.
    pub redis_url: Option<String>,
    /// The refund database.
    pub store: StoreChoice,
    /// The gateway's port on loopback (0: any free one).
    pub gateway_port: u16,
    /// Keep every process's event file in this directory.
    pub keep: Option<PathBuf>,
    /// The `fencesim` program each worker process runs (`fencesim live-worker SPEC`).
    pub program: PathBuf,
    /// A replay file's world and plan, and its seed, to run instead of the worked example.
    pub replay: Option<(Scenario, u64)>,
    /// The bug of the mutant catalogue the replay file plants, planted in every worker
    /// process as `replay` plants it.
    pub mutant: Option<Mutant>,
}

/// Which real database holds the refunds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreChoice {
    /// A SQLite file: this one (made if missing, else it must be a refund store), or one
    /// in the run's directory.
    Sqlite(Option<PathBuf>),
    /// PostgreSQL: the database at this URL (its refund tables made if it has none), or a
    /// cluster of the run's own.
    Postgres(Option<String>),
}

/// The world to run (a replay file's, or the worked example under the mechanism and
/// gateway asked for) and its plan as the live run takes it; refused, with what the live
/// run lacks named, when it cannot be run live.
pub fn live_scenario(config: &LiveConfig) -> Result<(Scenario, LivePlan), String> {
    if !(config.time_scale.is_finite() && config.time_scale > 0.0 && config.time_scale <= 10.0) {
        return Err(format!("--time-scale {}: expected a number above 0 and at most 10", config.time_scale));
    }
    let scenario = match &config.replay {
        Some((scenario, _)) => scenario.clone(),
        None => {
            scenario::build("worked-example", DEFAULT_SEED, config.mechanism, config.gateway, FaultMask::ALL)?
        }
    };
    let plan = refusal(&scenario.world)?;
    Ok((scenario, plan))
}

/// The plan as the live run takes it, or why the live run cannot play the world.
pub fn refusal(world: &WorldConfig) -> Result<LivePlan, String> {
    if let Some(refusal) = world_refusal(world) {
        return Err(refusal);
    }
    restart_mode(world)?;
    live_plan(world)
}

/// The directory of a run's files: removed at the end unless it was asked to be kept.
pub(crate) struct RunDir {
    pub(crate) path: PathBuf,
    keep: bool,
}

impl RunDir {
    pub(crate) fn create(keep: Option<&Path>) -> Result<RunDir, String> {
        let (path, kept) = match keep {
            Some(dir) => (dir.to_owned(), true),
            None => (
                std::env::temp_dir().join(format!("fencesim-live-{}-{}", std::process::id(), wall_us())),
                false,
            ),
        };
        std::fs::create_dir_all(&path).map_err(|e| format!("cannot make {}: {e}", path.display()))?;
        Ok(RunDir { path, keep: kept })
    }

    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The refund store in `path`: a new file is made one, an existing file must be one.
fn open_file(path: &Path) -> Result<SqliteRefunds, String> {
    let existing = path.exists();
    SqliteRefunds::open_file(path, !existing).map_err(|e| {
        if existing {
            format!("{} is not a refund store: {e}", path.display())
        } else {
            format!("cannot make the refund store {}: {e}", path.display())
        }
    })
}

/// The run's refund database, where its workers find it, and the cluster it started for it.
type OpenStore = (Box<dyn Refunds>, StoreAt, Option<PostgresServer>);

fn open_store(choice: &StoreChoice, dir: &RunDir) -> Result<OpenStore, String> {
    match choice {
        StoreChoice::Sqlite(file) => {
            let file = file.clone().unwrap_or_else(|| dir.file("refunds.db"));
            Ok((Box::new(open_file(&file)?), StoreAt::Sqlite { file }, None))
        }
        StoreChoice::Postgres(Some(url)) => {
            Ok((Box::new(PgRefunds::connect(url)?), StoreAt::Postgres { url: url.clone() }, None))
        }
        StoreChoice::Postgres(None) => {
            let server = PostgresServer::start("live")?;
            let url = server.url();
            Ok((Box::new(PgRefunds::connect(&url)?), StoreAt::Postgres { url }, Some(server)))
        }
    }
}

/// The store holds the scenario's rows, and the counters stand where it says.
pub(crate) fn fill_store(
    scenario: &Scenario,
    store: &dyn Refunds,
    con: &mut redis::Connection,
) -> Result<(), String> {
    let world = &scenario.world;
    let arriving = world.arriving_rows();
    let first: Vec<_> = world.rows.iter().filter(|row| !arriving.contains(&row.id)).copied().collect();
    store.load(&first).map_err(|e| format!("the refund store: {e}"))?;
    let mut admin = Admin::new(con);
    let placed =
        world.mechanism.place_counters(&world.counters, world.workers, &mut admin, &Sequences(store));
    placed.map_err(|e| format!("the refund store: {e}"))?;
    match admin.failed() {
        Some(failed) => Err(format!("cannot place the token counters: {failed}")),
        None => Ok(()),
    }
}

/// How long after every worker process says it is ready the story starts: time for each
/// to hear so and connect to Redis and the queue.
const LEAD: Duration = Duration::from_millis(50);

/// How long the worker processes may take to start and open the database: a busy machine
/// starting a cluster and many processes at once can take seconds.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Each worker's spec: where everything is, and the faults it takes at its own steps.
fn specs(stage: &Stage, plan: &LivePlan, mutant: Option<Mutant>, turns: &Turns) -> Vec<WorkerSpec> {
    let world = &stage.scenario.world;
    (0..world.workers)
        .map(WorkerId)
        .map(|worker| WorkerSpec {
            worker,
            mechanism: world.mechanism,
            mechanism_file: world.mechanism.file_text().map(str::to_owned),
            ttl_ms: world.ttl_ms,
            redis_url: stage.redis.lock_url.clone(),
            queue_url: stage.redis.queue_url.clone(),
            redis_pid: stage.redis.lock_pid(),
            clock_file: stage.redis.clock_file(),
            database: stage.store_at.clone(),
            gateway_url: format!("http://127.0.0.1:{}", stage.gateway.port),
            log: stage.dir.file(&format!("worker-{worker}.jsonl")),
            clock: stage.clock,
            visibility_ms: world.visibility_timeout_ms,
            stops: plan.at_steps[worker.0 as usize].clone(),
            latency_ms: latencies(world),
            incarnation: 1,
            progress_file: stage.dir.file(&format!("worker-{worker}.progress")),
            progress: Progress::default(),
            keep_counts: plan.may_crash(worker, world),
            mutant: mutant.map(|mutant| mutant.name().to_owned()),
            turns: turns.clone(),
            workers: world.workers,
        })
        .collect()
}

/// The world's latency on each hop a worker sends on itself (the gateway service takes
/// the gateway's).
fn latencies(world: &WorldConfig) -> [u64; Hop::COUNT] {
    let mut latency = [0; Hop::COUNT];
    latency[Hop::Redis as usize] = world.redis_latency_ms;
    latency[Hop::Database as usize] = world.db_latency_ms;
    latency
}

/// How long the story may take: to its last timed fault or arrival, every pause and
/// restart on top, then the settle bound.
pub(crate) fn horizon_ms(world: &WorldConfig) -> u64 {
    let last_at = world.faults.faults.iter().filter_map(|f| match f.trigger {
        Trigger::At { at_ms } => Some(at_ms),
        _ => None,
    });
    let last = last_at.chain(world.last_arrival_ms()).max().unwrap_or(0);
    let held: u64 = world
        .faults
        .faults
        .iter()
        .map(|f| match f.kind {
            FaultKind::Pause { duration_ms, .. } => duration_ms,
            FaultKind::Crash { restart_after_ms, .. } => restart_after_ms,
            FaultKind::GatewayTimeout { late_ms, .. } => late_ms,
            FaultKind::RedisRestart { .. } => world.redis_restart_ms,
            _ => 0,
        })
        .sum();
    last + held + world.settle_ms
}

/// Everything a run stands on before its workers start; torn down when dropped.
struct Stage {
    scenario: Scenario,
    dir: RunDir,
    store: Box<dyn Refunds>,
    store_at: StoreAt,
    redis: Servers,
    /// To the queue's server.
    queue_con: redis::Connection,
    clock: LiveClock,
    gateway: GatewayService,
    watch: ExpiryWatch,
    log: EventLog,
    /// Stopped last: the database the others wrote to.
    _postgres: Option<PostgresServer>,
}

impl Stage {
    /// Checks the input, then sets up the store, Redis, the gateway, the expiry watch and
    /// the queue, in that order: bad input is found before anything is started.
    fn set_up(config: &LiveConfig, scenario: Scenario) -> Result<Stage, String> {
        let dir = RunDir::create(config.keep.as_deref())?;
        let (store, store_at, postgres) = open_store(&config.store, &dir)?;
        if let StoreAt::Postgres { url } = &store_at {
            // every statement the workers will run, prepared before any of them starts
            let mechanism = scenario.world.mechanism;
            let own = mechanism.spec().statements;
            let statements = config
                .mutant
                .map_or(own, |mutant| fencesim_sim::Wiring::statements(&crate::mutant::Planted(mutant), own));
            let fenced = mechanism.spec().tokens != fencesim_model::mechanism::TokenPolicy::None;
            crate::live::postgres::prepare_all(url, &statements, fenced)
                .map_err(|e| format!("the mechanism's statements on PostgreSQL: {e}"))?;
        }
        let (restarts, jumps) = (restart_mode(&scenario.world)?, jumps(&scenario.world));
        let redis = Servers::start(config.redis_url.as_deref(), restarts, jumps)?;
        let mut con = connect(&redis.lock_url)?;
        let mut queue_con = connect(&redis.queue_url)?;
        fill_store(&scenario, &*store, &mut con)?;
        let world = &scenario.world;
        // the start is provisional until `begin` fixes it, once every worker is ready
        let clock = LiveClock { start_us: wall_us() + LEAD.as_micros() as u64, scale: config.time_scale };
        let setup = GatewaySetup::of(world, clock);
        let gateway =
            GatewayService::start(setup, EventLog::create(&dir.file("gateway.jsonl"))?, config.gateway_port)?;
        let watch = ExpiryWatch::start(&redis.lock_url, EventLog::create(&dir.file("expiries.jsonl"))?)?;
        let log = EventLog::create(&dir.file("coordinator.jsonl"))?;
        queue::enqueue(&mut queue_con, &world.jobs).map_err(|e| format!("cannot fill the queue: {e}"))?;
        Ok(Stage {
            scenario,
            dir,
            store,
            store_at,
            redis,
            queue_con,
            clock,
            gateway,
            watch,
            log,
            _postgres: postgres,
        })
    }
}

impl Stage {
    /// Waits until every worker process is ready (its database open), then starts the
    /// story a moment later for all of them alike: no process's start-up, however slow,
    /// is taken out of the story's first milliseconds.
    fn begin(&mut self, children: &mut Children) -> Result<(), String> {
        let workers = self.scenario.world.workers;
        let within = Instant::now() + READY_WITHIN;
        loop {
            interrupt::check()?;
            if let Some(said) = children.exited_early() {
                return Err(said);
            }
            let ready = queue::ready(&mut self.queue_con).map_err(|e| format!("the queue's server: {e}"))?;
            if ready >= u64::from(workers) {
                break;
            }
            if Instant::now() >= within {
                let waited = READY_WITHIN.as_secs();
                return Err(format!("{ready} of {workers} worker processes were ready after {waited} s"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.clock.start_us = wall_us() + LEAD.as_micros() as u64;
        self.gateway.begin(self.clock.start_us);
        children.begin(self.clock);
        for job in &self.scenario.world.jobs {
            let enqueued = EventKind::JobEnqueued { job: job.id, merchant: job.merchant };
            self.log.record_at(self.clock.start_us, enqueued);
        }
        queue::start(&mut self.queue_con, workers, self.clock.start_us)
            .map_err(|e| format!("the queue's server: {e}"))
    }
}

/// Runs the world live and judges it as the simulation's runs are judged.
pub fn run_live(config: &LiveConfig) -> Result<Outcome, String> {
    let (scenario, plan) = live_scenario(config)?;
    let mut stage = Stage::set_up(config, scenario)?;
    let seed = config.replay.as_ref().map_or(DEFAULT_SEED, |(_, seed)| *seed);
    let turns = simulated_turns(&stage, seed, config.mutant)?;
    let specs = specs(&stage, &plan, config.mutant, &turns);
    let mut children = Children::spawn(&config.program, &specs, &stage.dir.path)?;
    stage.begin(&mut children)?;
    let world = &stage.scenario.world;
    let supervision = Supervision {
        plan: &plan,
        world,
        clock: stage.clock,
        log: &stage.log,
        store: &*stage.store,
        gateway: &stage.gateway,
        start_routine: config.mutant != Some(Mutant::NoReseedAfterRestart),
        turns: &turns,
        deadline: Instant::now() + LEAD + stage.clock.real(horizon_ms(world)),
    };
    let finished = supervision.run(&mut children, &mut stage.redis, &mut stage.queue_con)?;
    stage.gateway.wait_for_late_calls(supervision.deadline);
    let ended_at_ms = stage.clock.story_ms(wall_us());
    let failures = if finished { children.failures() } else { Vec::new() };
    let logs = children.logs().to_vec();
    drop(children);
    if !failures.is_empty() {
        return Err(failures.join("\n"));
    }
    let Stage { scenario, dir, store, gateway, watch, log, clock, .. } = stage;
    drop(watch);
    let mut files = vec![log.path().to_owned(), dir.file("expiries.jsonl"), gateway.log_path()];
    files.extend(logs);
    let merged = merge(read_all(&files)?, clock, scenario.world.workers as usize);
    let final_rows = store.all_rows().map_err(|e| format!("the refund store: {e}"))?;
    let record = record(&scenario, merged, final_rows, gateway.ledger(), finished, ended_at_ms);
    judge(&scenario, RunRecord { seed, ..record }, config.mutant)
}

/// The turns of the simulated run of the same world and seed (`live::turns`): an act waits
/// at most five story milliseconds, and at least 20 real ones, for the act before it (the
/// workers first ask the queue 5 real ms apart, so a third worker's first request comes 10
/// real ms into the story).
fn simulated_turns(stage: &Stage, seed: u64, mutant: Option<Mutant>) -> Result<Turns, String> {
    let world = &stage.scenario.world;
    let record = match mutant {
        Some(mutant) => fencesim_sim::run_ordered(world, seed, crate::mutant::Planted(mutant))?,
        None => fencesim_sim::run_ordered(world, seed, fencesim_sim::Plain)?,
    };
    let patience = stage.clock.real(5).max(Duration::from_millis(20));
    Ok(Turns::of(&record.served, &world.faults.faults, &stage.dir.path, patience))
}

/// What the run left, as the checkers read a simulated run's.
pub(crate) fn record(
    scenario: &Scenario,
    merged: crate::live::merge::Merged,
    final_rows: Vec<fencesim_model::RefundRow>,
    ledger: Vec<fencesim_sim::LedgerEntry>,
    finished: bool,
    ended_at_ms: u64,
) -> RunRecord {
    let acked = |job| {
        merged
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::JobAcked { job: j, accepted: true, .. } if j == job))
    };
    let deliveries = |job| {
        merged
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::JobDelivered { job: j, .. } if j == job))
            .count() as u32
    };
    let open_jobs: Vec<_> =
        scenario.world.all_jobs().filter(|job| !acked(job.id)).map(|job| (job, deliveries(job.id))).collect();
    let last_fault_ms =
        merged.events.iter().rev().find(|e| matches!(e.kind, EventKind::FaultFired { .. })).map(|e| e.at_ms);
    RunRecord {
        seed: DEFAULT_SEED,
        settled: finished && open_jobs.is_empty(),
        events: merged.events,
        final_rows,
        ledger,
        settlement_entries: Vec::new(),
        settlement_balances: Vec::new(),
        epochs: merged.epochs,
        ended_at_ms,
        last_fault_ms,
        open_jobs,
        leaked_tasks: 0,
        served: Vec::new(),
        sleeps: 0,
    }
}
