//! One worker of a live run, as an OS process of its own: the model's worker, unchanged,
//! over a real Redis, the shared database file, the gateway service and the stream queue.
//! A pause or a crash of the fault plan that fires at one of its steps is taken by the
//! process itself: it records the fault and stops (`SIGSTOP`) or kills itself (`SIGKILL`)
//! right there, so the moment is exact; the coordinator resumes it (`SIGCONT`) when the
//! pause is over, or starts a new process for the worker when the crash's restart is due.
//! The steps it has reached and the faults it has fired are kept in a file beside its
//! events, so that a new process for the worker counts on from where the last one died.

use crate::live::clock::{wall_us, LiveClock};
use crate::live::faults::{LiveFaults, Outside, Progress};
use crate::live::gateway::LiveGateway;
use crate::live::log::EventLog;
use crate::live::plan::Planned;
use crate::live::postgres::PgRefunds;
use crate::live::queue::{self, LiveQueue};
use crate::live::redis::{connect, LiveRedis};
use crate::live::store::{LiveStore, Refunds, StoreAt};
use crate::mutant::{Mutant, OwnPorts, Planted, PlantedPorts};
use fencesim_model::{
    BackendError, LeaseClient, Mechanism, MerchantId, Ports, Posting, Probe, RefundId, SettlementOutcome,
    SettlementStore, SqliteRefunds, Step, Token, TokenClient, Worker, WorkerConfig, WorkerId, WriteGuard,
};
use fencesim_sim::port::step_recorded;
use fencesim_sim::EventKind;
use fencesim_sim::Wiring;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strum::EnumCount;

/// Everything a worker process is told when it starts, as one JSON argument.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub worker: WorkerId,
    pub mechanism: Mechanism,
    /// The text of the file the mechanism was read from, when it was: the process defines
    /// it before it reads the rest of its spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism_file: Option<String>,
    pub ttl_ms: u64,
    /// The lock server (leases, counters), its process id when the run started it, and
    /// the queue's server.
    pub redis_url: String,
    pub redis_pid: Option<i32>,
    /// The file the lock server's clock offset is read from, when the plan jumps it.
    pub clock_file: Option<PathBuf>,
    pub queue_url: String,
    pub database: StoreAt,
    pub gateway_url: String,
    pub log: PathBuf,
    pub clock: LiveClock,
    /// The queue's visibility timeout, in the story's milliseconds.
    pub visibility_ms: u64,
    /// The faults this worker takes itself (at its steps, before its requests), by place
    /// in the plan.
    pub stops: Vec<Planned>,
    /// The world's latency on each hop, in the story's milliseconds, by `Hop`.
    pub latency_ms: [u64; fencesim_sim::Hop::COUNT],
    /// Which process of the worker this is (1 first, one more after each crash).
    pub incarnation: u32,
    /// Where the worker keeps what it has reached and fired, and what it had when this
    /// process started.
    pub progress_file: PathBuf,
    pub progress: Progress,
    /// Whether to keep every count in the file (a worker that may be killed needs it; a
    /// fault is kept in the file when it fires either way).
    pub keep_counts: bool,
    /// The bug of the mutant catalogue planted in the worker's ports, by name.
    pub mutant: Option<String>,
    /// Which of its requests wait for another party's in the same story millisecond, as
    /// the simulated run ordered them (a replay's run only).
    #[serde(default)]
    pub turns: crate::live::turns::Turns,
    /// How many workers the world has.
    pub workers: u32,
}

/// Records each step, and takes the faults the worker triggers there.
pub(crate) struct LiveProbe {
    pub worker: WorkerId,
    pub log: Arc<EventLog>,
    pub faults: Arc<LiveFaults>,
}

impl Probe for LiveProbe {
    async fn reached(&self, step: Step) {
        let kind = step.kind();
        if step_recorded(kind) {
            self.log.record(EventKind::Step { worker: self.worker, step });
        }
        self.faults.step(kind);
    }
}

/// How long a worker process waits for the story's start once it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The spec with the story's start the coordinator gives once every worker is ready; a
/// process started after a crash has it already.
fn started(mut spec: WorkerSpec) -> Result<WorkerSpec, String> {
    if spec.incarnation == 1 {
        spec.clock.start_us = queue::await_start(&mut connect(&spec.queue_url)?, spec.worker, START_TIMEOUT)?;
    }
    Ok(spec)
}

/// Runs the worker until the queue closes.
pub fn run_worker(spec: WorkerSpec) -> Result<(), String> {
    let mutant = spec.mutant.as_deref().map(|name| name.parse::<Mutant>()).transpose()?;
    let own = spec.mechanism.spec().statements;
    let statements = mutant.map_or(own, |mutant| Planted(mutant).statements(own));
    // the database is opened before the process says it is ready: a connection to a
    // busy server can take longer than any fixed lead
    match &spec.database {
        StoreAt::Sqlite { file } => {
            let refunds = SqliteRefunds::open_file(file, false)
                .map_err(|e| format!("{} is not a refund store: {e}", file.display()))?;
            run_over(&started(spec.clone())?, refunds.with_statements(statements), mutant)
        }
        StoreAt::Postgres { url } => {
            let refunds = PgRefunds::connect(url)?.with_statements(statements);
            run_over(&started(spec.clone())?, refunds, mutant)
        }
    }
}

/// Runs the model's worker over the live ports, with `refunds` as its database and
/// `mutant`, if any, planted in them.
fn run_over<R: Refunds + Clone>(spec: &WorkerSpec, refunds: R, mutant: Option<Mutant>) -> Result<(), String> {
    let log = Arc::new(EventLog::create(&spec.log)?);
    let id = spec.worker;
    let faults = Arc::new(LiveFaults {
        worker: id,
        log: log.clone(),
        planned: spec.stops.clone(),
        progress: Mutex::new(spec.progress.clone()),
        progress_file: spec.progress_file.clone(),
        keep_counts: spec.keep_counts,
        admin: Mutex::new(Some(connect(&spec.redis_url)?)),
        latency_ms: spec.latency_ms,
        held: Mutex::default(),
        clock: spec.clock,
        last_request: Mutex::default(),
        last_hop: Mutex::default(),
        turns: spec.turns.clone(),
        mechanism: spec.mechanism,
        workers: spec.workers,
        outside: Outside {
            gateway_url: spec.gateway_url.clone(),
            queue: Mutex::new(Some(connect(&spec.queue_url)?)),
            visibility_ms: spec.clock.real(spec.visibility_ms).as_millis() as u64,
            redis_pid: spec.redis_pid,
            clock_file: spec.clock_file.clone(),
            redis_url: spec.redis_url.clone(),
        },
    });
    let redis = LiveRedis::new(&spec.redis_url, id, log.clone(), spec.clock, faults.clone())?;
    let store = LiveStore { refunds, worker: id, log: log.clone(), faults: faults.clone() };
    let visibility = spec.clock.real(spec.visibility_ms).as_millis() as u64;
    // an idle worker asks again every story millisecond (from half a real millisecond to
    // five), as the simulated queue hands a job on the moment its timeout ends
    let poll = spec.clock.real(1).clamp(Duration::from_micros(500), Duration::from_millis(5));
    let queue = LiveQueue::new(connect(&spec.queue_url)?, id, visibility, poll, log.clone());
    let probe = LiveProbe { worker: id, log: log.clone(), faults: faults.clone() };
    let gateway = LiveGateway::new(&spec.gateway_url, id, faults);
    let (mechanism, clock, ttl_ms) = (spec.mechanism, spec.clock, spec.ttl_ms);
    let config = WorkerConfig { id, mechanism, ttl_ms, settlement: false };
    let parts = LiveParts { redis, store, gateway, queue, probe, clock };
    drive(spec, worker_loop(config, parts, spec.incarnation, mutant))
}

/// A worker's ports over the live components, before a planted bug, if any, wraps them.
pub(crate) struct LiveParts<R, Q> {
    pub redis: LiveRedis,
    pub store: LiveStore<R>,
    pub gateway: LiveGateway,
    pub queue: Q,
    pub probe: LiveProbe,
    pub clock: LiveClock,
}

/// The model's worker over `parts`, with `mutant` planted in them if given: its loop, to be
/// driven until the queue closes (a live worker process's, or the project's own worker run
/// as a team's program).
pub(crate) fn worker_loop<R, Q>(
    config: WorkerConfig,
    parts: LiveParts<R, Q>,
    incarnation: u32,
    mutant: Option<Mutant>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
where
    R: Refunds + Clone + Send + Sync + 'static,
    Q: fencesim_model::JobQueue + Send + Sync + 'static,
{
    let LiveParts { redis, store, gateway, queue, probe, clock } = parts;
    let (mechanism, id, ttl_ms) = (config.mechanism, config.id, config.ttl_ms);
    let Some(mutant) = mutant else {
        let ports = Ports {
            lease: LeaseClient::new(mechanism, vec![redis.clone()], clock),
            tokens: TokenClient::new(mechanism, id, redis, store.clone(), ttl_ms),
            store,
            gateway,
            queue,
            probe,
            clock,
            settlement: NoSettlement,
        };
        return Box::pin(Worker::new(config, ports, incarnation).run());
    };
    let own = OwnPorts {
        mechanism,
        worker: id,
        incarnation,
        ttl_ms,
        redis: vec![redis],
        store,
        gateway,
        queue,
        clock,
    };
    let PlantedPorts { lease, tokens, store, gateway, queue, .. } = Planted(mutant).plant(own);
    let ports = Ports { lease, tokens, store, gateway, queue, probe, clock, settlement: NoSettlement };
    Box::pin(Worker::new(config, ports, incarnation).run())
}

/// Runs a worker's loop on a runtime of the process's own until the queue closes.
pub(crate) fn drive(spec: &WorkerSpec, worker: impl std::future::Future<Output = ()>) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the worker's runtime: {e}"))?;
    // The story starts at the same instant for every process, and the workers ask the
    // queue in id order, as the simulated queue hands a job to the lowest idle worker; a
    // process started after a crash asks at once.
    if spec.incarnation == 1 {
        let first_ask = spec.clock.start_us + queue::STAGGER_US * u64::from(spec.worker.0);
        std::thread::sleep(Duration::from_micros(first_ask.saturating_sub(wall_us())));
    }
    runtime.block_on(worker);
    Ok(())
}

/// The live arm has no second store: its worlds have one store only, and `fencesim live`
/// refuses a mechanism that is about the second store. The worker never calls this port
/// (its config says there is no ledger); a call would be answered as a backend error.
pub(crate) struct NoSettlement;

const NO_SETTLEMENT: &str = "the live arm has no settlement ledger";

impl SettlementStore for NoSettlement {
    async fn enroll(&self, _: MerchantId, _: Token) -> Result<SettlementOutcome, BackendError> {
        Err(BackendError(NO_SETTLEMENT.into()))
    }

    async fn posted(&self, _: RefundId) -> Result<bool, BackendError> {
        Err(BackendError(NO_SETTLEMENT.into()))
    }

    async fn post(&self, _: Posting, _: WriteGuard) -> Result<SettlementOutcome, BackendError> {
        Err(BackendError(NO_SETTLEMENT.into()))
    }
}
