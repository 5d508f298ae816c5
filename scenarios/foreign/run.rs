//! A team's worker program run through a world, from its input to its verdict: PostgreSQL
//! (a cluster of the run's own) with the refund rows and the row trigger, a redis-server,
//! the gateway and queue services, one Redis proxy and one database proxy per worker; the
//! copies of the program started with their addresses; the plan's faults given from
//! outside; and, once every job is acked and the copies have left, the history built from
//! what the proxies, the trigger, the gateway, the queue and Redis's expiries saw, judged
//! by the simulation's checkers.

use crate::foreign::conductor::EPOCH_US;
use crate::foreign::controlled::{Conducted, Control, Drive};
use crate::foreign::faults::{outside_plan, Outside, OutsidePlan, Serving};
use crate::foreign::history::{History, Seen as HistorySeen};
use crate::foreign::kept::Kept;
use crate::foreign::programs::{Groups, Programs};
use crate::foreign::queue::QueueService;
use crate::foreign::seen::seen;
use crate::foreign::start_up::asleep;
use crate::foreign::turns::{TurnCall, TurnGate};
use crate::foreign::watch::{ready, Ended, Watch};
use crate::foreign::{redis_seen, rows_seen};
use crate::live::clock::{wall_us, LiveClock};
use crate::live::coordinator::{fill_store, horizon_ms, record, RunDir};
use crate::live::expiry::ExpiryWatch;
use crate::live::faketime::FakeClock;
use crate::live::gateway::{GatewayService, GatewaySetup};
use crate::live::log::{read_all, EventLog, LogLine};
use crate::live::merge::merge;
use crate::live::pgproxy::PgHooks;
use crate::live::pgproxy::PgProxy;
use crate::live::plan::world_refusal;
use crate::live::postgres::PgRefunds;
use crate::live::proxy::Gate;
use crate::live::proxy::RedisProxy;
use crate::live::redis::connect;
use crate::live::servers::{restart_mode, Servers};
use crate::live::store::Refunds;
use crate::runner::{judge, Outcome, DEFAULT_SEED};
use crate::scenario::{self, FaultMask, Scenario};
use fencesim_model::{Mechanism, WorkerId};
use fencesim_sim::{EventKind, GatewayMode, Hop, RunRecord};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `fencesim worker` was asked for.
#[derive(Clone, Debug)]
pub struct ForeignConfig {
    /// The program and its arguments, started once per worker.
    pub command: Vec<String>,
    /// The worked example's gateway, when no replay file gives the world.
    pub gateway: GatewayMode,
    /// Real time per story time.
    pub time_scale: f64,
    /// A replay file's world and plan, and its seed, instead of the worked example.
    pub replay: Option<(Scenario, u64)>,
    /// Keep the run's files (the programs' output, the services' records) in this directory.
    pub keep: Option<PathBuf>,
    /// How long a copy may take to ask the queue for its first job, in real time.
    pub first_take_within: Duration,
    /// Run on the run's own clock, each request in its turn (`foreign::controlled`).
    pub control: Option<Control>,
}

/// The world to run: a replay file's, or the worked example under the gateway asked for
/// (its lease and counter keys those of `fenced`, which the contract names).
pub fn foreign_scenario(config: &ForeignConfig) -> Result<(Scenario, OutsidePlan), String> {
    if !(config.time_scale.is_finite() && config.time_scale > 0.0 && config.time_scale <= 10.0) {
        return Err(format!("--time-scale {}: expected a number above 0 and at most 10", config.time_scale));
    }
    let scenario = match &config.replay {
        Some((scenario, _)) => scenario.clone(),
        None => scenario::build(
            "worked-example",
            DEFAULT_SEED,
            Mechanism::Fenced,
            config.gateway,
            FaultMask::ALL,
        )?,
    };
    if let Some(refusal) = world_refusal(&scenario.world) {
        return Err(refusal);
    }
    let plan = outside_plan(&scenario.world)?;
    Ok((scenario, plan))
}

/// How long the story waits, after every copy is started, before it begins.
const LEAD: Duration = Duration::from_millis(100);

/// How long a copy may stay after the queue told it the run is over.
const LEAVE_WITHIN: Duration = Duration::from_secs(5);

/// Everything a run stands on; torn down when dropped, the database last.
struct Stage {
    scenario: Scenario,
    dir: RunDir,
    store: PgRefunds,
    redis: std::cell::RefCell<Servers>,
    redis_url: String,
    clock: LiveClock,
    gateway: GatewayService,
    queue: QueueService,
    /// Redis's own expiry notices (a controlled run records each lease's end itself).
    watch: Option<ExpiryWatch>,
    log: Arc<EventLog>,
    database_url: String,
    /// Where a program may write its own events (`foreign::own_worker` does).
    events: PathBuf,
}

impl Stage {
    fn set_up(
        config: &ForeignConfig,
        scenario: Scenario,
        conducted: Option<(&Conducted, FakeClock)>,
        kept: &mut Kept,
    ) -> Result<Stage, String> {
        let dir = RunDir::create(config.keep.as_deref())?;
        let (database_url, store) = kept.database(conducted.as_ref().map(|(_, clock)| clock))?;
        let on_the_run = conducted.is_some();
        let redis =
            Servers::start_own(restart_mode(&scenario.world)?, conducted.map(|(_, clock)| clock), false)?;
        let redis_url = redis.lock_url.clone();
        fill_store(&scenario, &store, &mut connect(&redis_url)?)?;
        // a program that takes its tokens from the database's counter (`fence_seq`, the
        // article's other remedy) starts where the world's counters stand, as one that
        // takes them from Redis does
        for &(merchant, value) in &scenario.world.counters {
            store.set_sequence(merchant, value).map_err(|e| format!("the token counters: {e}"))?;
        }
        store
            .run(|client| client.batch_execute(rows_seen::TRIGGER))?
            .map_err(|e| format!("the row trigger: {e}"))?;
        let world = &scenario.world;
        let clock = match on_the_run {
            true => LiveClock { start_us: EPOCH_US, scale: 1.0 },
            false => LiveClock { start_us: wall_us() + LEAD.as_micros() as u64, scale: config.time_scale },
        };
        let setup = GatewaySetup::of(world, clock);
        let gateway = GatewayService::start(setup, EventLog::create(&dir.file("gateway.jsonl"))?, 0)?;
        let queue_log = EventLog::create(&dir.file("queue.jsonl"))?;
        let queue =
            QueueService::start(world.workers, world.visibility_timeout_ms, &world.jobs, clock, queue_log)?;
        let expiries = EventLog::create(&dir.file("expiries.jsonl"))?;
        let watch = match on_the_run {
            true => None,
            false => Some(ExpiryWatch::start(&redis_url, expiries)?),
        };
        let log = Arc::new(EventLog::create(&dir.file("coordinator.jsonl"))?);
        let events = dir.file("events");
        std::fs::create_dir_all(&events).map_err(|e| format!("cannot make {}: {e}", events.display()))?;
        Ok(Stage {
            scenario,
            dir,
            store,
            redis: std::cell::RefCell::new(redis),
            redis_url,
            clock,
            gateway,
            queue,
            watch,
            log,
            database_url,
            events,
        })
    }
}

/// `host:port` of a `redis://host:port` or a `host=... port=...` address.
fn host_port(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("redis://") {
        return rest.trim_end_matches('/').to_owned();
    }
    let field =
        |name: &str| url.split_whitespace().find_map(|f| f.strip_prefix(&format!("{name}="))).unwrap_or("");
    format!("{}:{}", field("host"), field("port"))
}

/// Each worker's proxies, in worker order.
struct Wires {
    redis: Vec<RedisProxy>,
    database: Vec<PgProxy>,
}

fn wires(
    stage: &Stage,
    outside: &Arc<Outside>,
    turns: Option<(&Conducted, Control)>,
) -> Result<Wires, String> {
    let world = &stage.scenario.world;
    let (redis_at, database_at) = (host_port(&stage.redis_url), host_port(&stage.database_url));
    let mut wires = Wires { redis: Vec::new(), database: Vec::new() };
    for worker in (0..world.workers).map(WorkerId) {
        let party = worker.to_string();
        let (redis_gate, database_gate): (Arc<dyn Gate>, Arc<dyn PgHooks>) = match turns {
            Some((conducted, control)) => {
                let turn = |hop, ms| {
                    let faults = outside.gate(worker, hop);
                    Arc::new(TurnGate::new(
                        conducted.conductor.clone(),
                        faults,
                        (worker, hop),
                        ms,
                        control.seed,
                    ))
                };
                (turn(Hop::Redis, world.redis_latency_ms), turn(Hop::Database, world.db_latency_ms))
            }
            None => (outside.gate(worker, Hop::Redis), outside.gate(worker, Hop::Database)),
        };
        let redis = RedisProxy::start(&redis_at, &party, redis_gate)
            .map_err(|e| format!("the Redis proxy of {worker}: {e}"))?;
        let database = PgProxy::start(&database_at, &party, database_gate)
            .map_err(|e| format!("the database proxy of {worker}: {e}"))?;
        wires.redis.push(redis);
        wires.database.push(database);
    }
    Ok(wires)
}

/// How long a copy's call (to Redis, the database, the gateway, the queue) may wait, in
/// real time: on a run's clock a call waits for its turn while the story goes on (a pause,
/// a reply held for story seconds, a long gateway latency among fast hops), and a loaded
/// machine takes seconds of real time for what is milliseconds of story.
const TIMEOUT_MS: u64 = 5_000;
const TIMEOUT_CONTROLLED_MS: u64 = 600_000;

/// What puts a copy on the servers' clock when the run asks for it (`--program-clock run`):
/// libfaketime and the clock's file, its monotonic clock left alone; not the stand-in for
/// the lock server's allocator (a library path of the server's own).
fn servers_clock_env(conducted: Option<&Conducted>, control: Option<Control>) -> Vec<(String, String)> {
    match (conducted, control) {
        (Some(conducted), Some(control)) if control.program_clock => {
            conducted.env.iter().filter(|(name, _)| name != "LD_LIBRARY_PATH").cloned().collect()
        }
        _ => Vec::new(),
    }
}

/// What each copy is given: the contract's variables (docs/worker.md), and `clock` (what
/// puts it on the run's clock, when asked).
fn environment(
    stage: &Stage,
    wires: &Wires,
    controlled: bool,
    clock: &[(String, String)],
) -> Vec<Vec<(String, String)>> {
    let timeout_ms = if controlled { TIMEOUT_CONTROLLED_MS } else { TIMEOUT_MS };
    let world = &stage.scenario.world;
    let gateway = stage.gateway.port;
    let ttl_ms = stage.clock.real(world.ttl_ms).as_millis().max(1);
    (0..world.workers)
        .map(WorkerId)
        .map(|worker| {
            let i = worker.0 as usize;
            [
                ("FENCESIM_WORKER", worker.to_string()),
                ("FENCESIM_REDIS_URL", format!("redis://127.0.0.1:{}", wires.redis[i].port)),
                (
                    "FENCESIM_DATABASE_URL",
                    format!("postgresql://postgres@127.0.0.1:{}/postgres", wires.database[i].port),
                ),
                ("FENCESIM_GATEWAY_URL", format!("http://127.0.0.1:{gateway}/{worker}/gateway")),
                ("FENCESIM_QUEUE_URL", stage.queue.url(worker)),
                ("FENCESIM_LEASE_TTL_MS", ttl_ms.to_string()),
                ("FENCESIM_POLL_MS", "5".to_owned()),
                ("FENCESIM_TIMEOUT_MS", timeout_ms.to_string()),
                ("FENCESIM_EVENTS_DIR", stage.events.display().to_string()),
                // every address is on loopback: an HTTP client that follows a proxy
                // setting of the machine's must not send them elsewhere
                ("NO_PROXY", "127.0.0.1,localhost".to_owned()),
                ("no_proxy", "127.0.0.1,localhost".to_owned()),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .chain(clock.iter().cloned())
            .collect()
        })
        .collect()
}

/// A run's verdicts.
pub struct ForeignRun {
    /// Judged from what the components saw.
    pub outcome: Outcome,
    /// Whether the copies left when told.
    pub ended: Ended,
    /// Judged again from the events the program wrote itself into `$FENCESIM_EVENTS_DIR`,
    /// in place of what the proxies and the row trigger saw, when it wrote any.
    pub own: Option<Outcome>,
    /// Each copy that left before the queue said the run was over.
    pub left_early: Vec<crate::foreign::watch::LeftEarly>,
    /// A controlled run's history: every turn, request, reply and event, in story order.
    pub history: Option<History>,
    /// Each copy whose story fell behind the simulation's pace, and by how many story
    /// milliseconds (`GatewayService::behind_ms`): the run then told a later story than
    /// the simulation's, and its verdict is of that story. Empty on a controlled run.
    pub behind_ms: Vec<(WorkerId, u64)>,
}

impl ForeignRun {
    /// Whether the program's own events give the verdict the observations give.
    pub fn own_agrees(&self) -> Option<bool> {
        self.own.as_ref().map(|own| own.broken() == self.outcome.broken())
    }
}

/// Runs the program through the world and judges what the components saw; also says
/// which copies had to be stopped because they stayed after the run was over.
pub fn run_foreign(config: &ForeignConfig) -> Result<ForeignRun, String> {
    run_foreign_kept(config, &mut Kept::new())
}

/// `run_foreign` on the servers `kept` keeps from the run before (`foreign::kept`).
pub fn run_foreign_kept(config: &ForeignConfig, kept: &mut Kept) -> Result<ForeignRun, String> {
    let (scenario, plan) = foreign_scenario(config)?;
    let (conducted, servers_clock) = match config.control {
        Some(control) => {
            let clock = kept.clock()?;
            (Some(Conducted::start(control, &clock)?), Some(clock))
        }
        None => (None, None),
    };
    let mut stage = Stage::set_up(config, scenario, conducted.as_ref().zip(servers_clock), kept)?;
    let keys = redis_seen::Keys::of(&stage.scenario.world);
    let outside =
        Outside::new(plan.on_the_wire.clone(), Groups::default(), stage.log.clone(), stage.clock, keys);
    let outside = Arc::new(outside);
    outside.serving(serving(&stage));
    let turns = conducted.as_ref().zip(config.control);
    gate_services(&stage, &outside, turns);
    let wires = wires(&stage, &outside, turns)?;
    let program_clock = servers_clock_env(conducted.as_ref(), config.control);
    let env = environment(&stage, &wires, turns.is_some(), &program_clock);
    let mut programs = Programs::spawn(&config.command, env, &stage.dir.path, outside.groups())?;
    ready(&stage.queue, &mut programs, &config.command, config.first_take_within, &stage.log)?;
    let (ended, left_early) = match turns {
        Some((conducted, control)) => {
            let groups = outside.groups();
            conducted.conductor.tell_sleep_by(Box::new(move |worker| asleep(&groups.of(worker))));
            conducted.conductor.begin(Duration::from_secs(5));
            begin(&mut stage, &outside, EPOCH_US);
            let driven = drive(&stage, &plan, &outside, conducted, control).run(&mut programs);
            conducted.conductor.finish();
            driven?
        }
        None => {
            begin(&mut stage, &outside, wall_us() + LEAD.as_micros() as u64);
            watch(&stage, &plan, &outside).run(&mut programs)?
        }
    };
    stage.gateway.wait_for_late_calls(Instant::now() + Duration::from_secs(5));
    let behind_ms = stage.gateway.behind_ms();
    let ended_at_ms = stage.clock.story_ms(wall_us());
    drop(programs);
    let seen = seen(&stage.scenario, &wires.redis, &wires.database, &stage.store, stage.clock)?;
    let history = match &conducted {
        Some(conducted) => Some(history(&stage, &wires, &conducted.conductor.order())?),
        None => None,
    };
    drop(wires);
    let seed = config.replay.as_ref().map_or(DEFAULT_SEED, |(_, seed)| *seed);
    let run = judge_run(stage, seen, seed, ended, ended_at_ms)?;
    Ok(ForeignRun { left_early, history, behind_ms, ..run })
}

/// A controlled run's history, also written into the run's directory (`history.txt`).
fn history(stage: &Stage, wires: &Wires, turns: &[(u64, String)]) -> Result<History, String> {
    let (redis, database) = crate::foreign::seen::by_worker(&wires.redis, &wires.database);
    let files = [stage.log.path().to_owned(), stage.gateway.log_path(), stage.dir.file("queue.jsonl")];
    let events: Vec<LogLine> = read_all(&files)?;
    let seen = HistorySeen { turns, redis: &redis, database: &database, events: &events, start_us: EPOCH_US };
    let history = History::of(&seen);
    let text = history.lines.join("\n") + "\n";
    let path = stage.dir.file("history.txt");
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(history)
}

/// The gateway and the queue ask the faults (the gateway) and, on a controlled run, the
/// conductor before they answer a copy.
fn gate_services(stage: &Stage, outside: &Arc<Outside>, turns: Option<(&Conducted, Control)>) {
    match turns {
        Some((conducted, control)) => {
            let conductor = &conducted.conductor;
            outside.conduct(conductor.clone());
            let gateway = TurnCall::new(conductor.clone(), Some(outside.clone()), "gateway", control.seed);
            stage.gateway.gate(Arc::new(gateway));
            stage.queue.gate(Arc::new(TurnCall::new(conductor.clone(), None, "queue", control.seed)));
        }
        None => stage.gateway.gate(outside.clone()),
    }
    let told = outside.clone();
    let delivered = stage.gateway.deliveries();
    stage.queue.on_delivery(Arc::new(move |worker| {
        delivered(worker);
        told.job_received(worker);
    }));
}

/// The story starts at `start_us` on the wall clock (or the run's): the services and the
/// faults are told, and the world's first jobs are queued then.
fn begin(stage: &mut Stage, outside: &Outside, start_us: u64) {
    stage.clock.start_us = start_us;
    stage.gateway.begin(start_us);
    stage.queue.begin(start_us);
    outside.begin(stage.clock);
    for job in &stage.scenario.world.jobs {
        let enqueued = EventKind::JobEnqueued { job: job.id, merchant: job.merchant };
        stage.log.record_at(start_us, enqueued);
    }
}

/// Judges what the components saw (`seen`), and again from the program's own events when
/// it wrote any.
fn judge_run(
    stage: Stage,
    seen: Vec<LogLine>,
    seed: u64,
    ended: Ended,
    ended_at_ms: u64,
) -> Result<ForeignRun, String> {
    let own_lines = own_events(&stage.events)?;
    let Stage { scenario, dir, store, gateway, watch, log, clock, .. } = stage;
    drop(watch);
    let files =
        [log.path().to_owned(), dir.file("expiries.jsonl"), gateway.log_path(), dir.file("queue.jsonl")];
    let world_lines: Vec<LogLine> = read_all(&files)?;
    let final_rows = store.all_rows().map_err(|e| format!("the refund store: {e}"))?;
    let judged = |told: Vec<LogLine>| {
        let mut lines = world_lines.clone();
        lines.extend(told);
        lines.sort_by_key(|line| line.at_us);
        let merged = merge(lines, clock, scenario.world.workers as usize);
        let finished = ended != Ended::OutOfTime;
        let record = record(&scenario, merged, final_rows.clone(), gateway.ledger(), finished, ended_at_ms);
        judge(&scenario, RunRecord { seed, ..record }, None)
    };
    let outcome = judged(seen)?;
    let own = match own_lines.is_empty() {
        true => None,
        false => Some(judged(own_lines)?),
    };
    Ok(ForeignRun { outcome, ended, own, left_early: Vec::new(), history: None, behind_ms: Vec::new() })
}

/// The events the copies wrote themselves, if any did (every file of the directory).
fn own_events(dir: &std::path::Path) -> Result<Vec<LogLine>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    read_all(&files).map_err(|e| format!("the program's own events: {e}"))
}

/// The servers a fault acts on: the lock server (as it runs now) and the gateway service.
fn serving(stage: &Stage) -> Serving {
    Serving {
        redis_pid: stage.redis.borrow().lock_pid(),
        redis_url: stage.redis_url.clone(),
        gateway_url: format!("http://127.0.0.1:{}", stage.gateway.port),
    }
}

fn drive<'a>(
    stage: &'a Stage,
    plan: &'a OutsidePlan,
    outside: &'a Outside,
    conducted: &'a Conducted,
    control: Control,
) -> Drive<'a> {
    Drive {
        world: &stage.scenario.world,
        plan,
        log: &stage.log,
        gateway: &stage.gateway,
        queue: &stage.queue,
        store: &stage.store,
        redis_url: &stage.redis_url,
        outside,
        servers: &stage.redis,
        conductor: &conducted.conductor,
        control,
    }
}

fn watch<'a>(stage: &'a Stage, plan: &'a OutsidePlan, outside: &'a Outside) -> Watch<'a> {
    let world = &stage.scenario.world;
    Watch {
        outside,
        servers: &stage.redis,
        world,
        plan,
        clock: stage.clock,
        log: &stage.log,
        gateway: &stage.gateway,
        queue: &stage.queue,
        store: &stage.store,
        redis_url: &stage.redis_url,
        leave_within: LEAVE_WITHIN,
        deadline: Instant::now() + LEAD + stage.clock.real(horizon_ms(world)),
    }
}
