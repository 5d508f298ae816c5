//! The live run from start to verdict: a Redis (the run's own server, or one at a URL
//! that is empty), the database file, the gateway service, the expiry watch and the
//! queue are set up; one process per worker is started; a worker that stopped itself for
//! a pause is resumed when the pause is over; once every job is acked the queue closes,
//! the workers leave, and the files are merged and judged.

use crate::live::clock::{wall_us, LiveClock};
use crate::live::expiry::ExpiryWatch;
use crate::live::gateway::{GatewayService, GatewaySetup};
use crate::live::log::{read_all, EventLog};
use crate::live::merge::merge;
use crate::live::postgres::{PgRefunds, PostgresServer};
use crate::live::processes::{supervise, Children};
use crate::live::queue;
use crate::live::redis::{connect, Admin};
use crate::live::server::RedisServer;
use crate::live::store::{Refunds, Sequences, StoreAt};
use crate::live::worker::WorkerSpec;
use crate::runner::{judge, Outcome, DEFAULT_SEED};
use crate::scenario::{self, FaultMask, Scenario};
use fencesim_model::{Mechanism, SqliteRefunds, WorkerId};
use fencesim_sim::{EventKind, FaultKind, GatewayMode, RunRecord, Trigger};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// The worked example under the mechanism and gateway asked for, checked for what a live
/// run can do: one Redis instance, pauses taken at a worker's own step.
pub fn live_scenario(config: &LiveConfig) -> Result<Scenario, String> {
    if !(config.time_scale.is_finite() && config.time_scale > 0.0 && config.time_scale <= 10.0) {
        return Err(format!("--time-scale {}: expected a number above 0 and at most 10", config.time_scale));
    }
    let instances = config.mechanism.redis_instances();
    if instances != 1 {
        return Err(format!(
            "{} holds its lease on {instances} Redis instances; the live run has one",
            config.mechanism
        ));
    }
    let scenario =
        scenario::build("worked-example", DEFAULT_SEED, config.mechanism, config.gateway, FaultMask::ALL)?;
    for fault in &scenario.world.faults.faults {
        let at_step = matches!(fault.trigger, Trigger::Step { .. });
        if !matches!(fault.kind, FaultKind::Pause { .. }) || !at_step {
            return Err(format!("the live run takes pauses at a worker's step only, not {fault:?}"));
        }
    }
    Ok(scenario)
}

/// The directory of a run's files: removed at the end unless it was asked to be kept.
struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    fn create(keep: Option<&Path>) -> Result<RunDir, String> {
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

    fn file(&self, name: &str) -> PathBuf {
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

/// The run's Redis: a server of its own, or the one at a URL.
struct LiveRedisSetup {
    _own: Option<RedisServer>,
    url: String,
}

impl LiveRedisSetup {
    fn start(url: Option<&str>) -> Result<LiveRedisSetup, String> {
        let (own, url) = match url {
            Some(url) => (None, url.to_owned()),
            None => {
                let server = RedisServer::start("live", &["--appendonly", "no", "--hz", "100"])?;
                let url = server.url();
                (Some(server), url)
            }
        };
        let mut con = connect(&url)?;
        let keys: u64 = redis::cmd("DBSIZE").query(&mut con).map_err(|e| format!("Redis at {url}: {e}"))?;
        if keys > 0 {
            return Err(format!(
                "the Redis database at {url} holds {keys} key(s); the live run needs an empty one (it writes lock, counter and queue keys)"
            ));
        }
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("Ex")
            .query::<()>(&mut con)
            .map_err(|e| format!("Redis at {url} refuses keyspace notifications, which show the live run its expiries: {e}"))?;
        Ok(LiveRedisSetup { _own: own, url })
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
fn fill_store(scenario: &Scenario, store: &dyn Refunds, con: &mut redis::Connection) -> Result<(), String> {
    let world = &scenario.world;
    store.load(&world.rows).map_err(|e| format!("the refund store: {e}"))?;
    let mut admin = Admin { con, failed: None };
    let placed = world.mechanism.place_counters(&world.counters, &mut admin, &Sequences(store));
    placed.map_err(|e| format!("the refund store: {e}"))?;
    match admin.failed {
        Some(failed) => Err(format!("cannot place the token counters: {failed}")),
        None => Ok(()),
    }
}

/// How long before the story starts the workers are started, so that each is ready at
/// its first instant: a process takes a few milliseconds to start.
const LEAD: Duration = Duration::from_millis(200);

/// Each worker's spec: where everything is, and the pause it takes at a step of its own.
fn specs(
    scenario: &Scenario,
    url: &str,
    database: &StoreAt,
    gateway: u16,
    clock: LiveClock,
    dir: &RunDir,
) -> Vec<WorkerSpec> {
    let world = &scenario.world;
    let stop_of =
        |worker: WorkerId| world.faults.faults.iter().find(|f| f.trigger.worker() == Some(worker)).cloned();
    (0..world.workers)
        .map(WorkerId)
        .map(|worker| WorkerSpec {
            worker,
            mechanism: world.mechanism,
            ttl_ms: world.ttl_ms,
            redis_url: url.to_owned(),
            database: database.clone(),
            gateway_url: format!("http://127.0.0.1:{gateway}"),
            log: dir.file(&format!("worker-{worker}.jsonl")),
            clock,
            visibility_ms: world.visibility_timeout_ms,
            stop: stop_of(worker),
        })
        .collect()
}

/// Each pause's worker and real length, and the story's longest pause.
fn pauses(scenario: &Scenario, clock: LiveClock) -> (Vec<(WorkerId, Duration)>, u64) {
    let mut longest = 0;
    let pauses = scenario.world.faults.faults.iter().filter_map(|fault| match fault.kind {
        FaultKind::Pause { worker, duration_ms } => {
            longest = longest.max(duration_ms);
            Some((worker, clock.real(duration_ms)))
        }
        _ => None,
    });
    (pauses.collect(), longest)
}

/// Everything a run stands on before its workers start; torn down when dropped.
struct Stage {
    scenario: Scenario,
    dir: RunDir,
    store: Box<dyn Refunds>,
    store_at: StoreAt,
    redis: LiveRedisSetup,
    con: redis::Connection,
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
    fn set_up(config: &LiveConfig) -> Result<Stage, String> {
        let scenario = live_scenario(config)?;
        let dir = RunDir::create(config.keep.as_deref())?;
        let (store, store_at, postgres) = open_store(&config.store, &dir)?;
        let redis = LiveRedisSetup::start(config.redis_url.as_deref())?;
        let mut con = connect(&redis.url)?;
        fill_store(&scenario, &*store, &mut con)?;
        let world = &scenario.world;
        let clock = LiveClock { start_us: wall_us() + LEAD.as_micros() as u64, scale: config.time_scale };
        let setup = GatewaySetup {
            mode: world.gateway_mode,
            refund_latency: world.refund_latency.clone(),
            lookup_latency_ms: world.lookup_latency_ms,
            clock,
        };
        let gateway =
            GatewayService::start(setup, EventLog::create(&dir.file("gateway.jsonl"))?, config.gateway_port)?;
        let watch = ExpiryWatch::start(&redis.url, EventLog::create(&dir.file("expiries.jsonl"))?)?;
        let log = EventLog::create(&dir.file("coordinator.jsonl"))?;
        queue::enqueue(&mut con, &world.jobs).map_err(|e| format!("cannot fill the queue: {e}"))?;
        for job in &world.jobs {
            log.record_at(clock.start_us, EventKind::JobEnqueued { job: job.id, merchant: job.merchant });
        }
        Ok(Stage {
            scenario,
            dir,
            store,
            store_at,
            redis,
            con,
            clock,
            gateway,
            watch,
            log,
            _postgres: postgres,
        })
    }
}

/// Runs the worked example live and judges it as the simulation's runs are judged.
pub fn run_live(config: &LiveConfig) -> Result<Outcome, String> {
    let mut stage = Stage::set_up(config)?;
    let (scenario, clock) = (&stage.scenario, stage.clock);
    let specs = specs(scenario, &stage.redis.url, &stage.store_at, stage.gateway.port, clock, &stage.dir);
    let (pauses, longest) = pauses(scenario, clock);
    let mut children = Children::spawn(&config.program, &specs, &stage.dir.path)?;
    let deadline = Instant::now() + LEAD + clock.real(longest + scenario.world.settle_ms);
    let jobs = scenario.world.jobs.len() as u64;
    let finished = supervise(&mut children, &pauses, &mut stage.con, jobs, deadline, &stage.log)?;
    let ended_at_ms = clock.story_ms(wall_us());
    let failures = if finished { children.failures() } else { Vec::new() };
    drop(children);
    if !failures.is_empty() {
        return Err(failures.join("\n"));
    }
    let Stage { scenario, dir, store, gateway, watch, log, .. } = stage;
    drop(watch);
    let mut files = vec![log.path().to_owned(), dir.file("expiries.jsonl"), gateway.log_path()];
    files.extend(specs.iter().map(|spec| spec.log.clone()));
    let merged = merge(read_all(&files)?, clock, scenario.world.workers as usize);
    let final_rows = store.all_rows().map_err(|e| format!("the refund store: {e}"))?;
    let record = record(&scenario, merged, final_rows, gateway.ledger(), finished, ended_at_ms);
    judge(&scenario, record, None)
}

/// What the run left, as the checkers read a simulated run's.
fn record(
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
    let open_jobs: Vec<_> = scenario
        .world
        .jobs
        .iter()
        .filter(|job| !acked(job.id))
        .map(|job| (*job, deliveries(job.id)))
        .collect();
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
    }
}
