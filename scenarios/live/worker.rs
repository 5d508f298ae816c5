//! One worker of a live run, as an OS process of its own: the model's worker, unchanged,
//! over a real Redis, the shared database file, the gateway service and the stream queue.
//! A pause of the fault plan that fires at one of its steps is taken by the process
//! itself: it records the fault and stops (`SIGSTOP`) right there, so the moment is
//! exact, and the coordinator resumes it (`SIGCONT`) when the pause is over.

use crate::live::clock::{wall_us, LiveClock};
use crate::live::gateway::LiveGateway;
use crate::live::log::EventLog;
use crate::live::postgres::PgRefunds;
use crate::live::queue::LiveQueue;
use crate::live::redis::{connect, LiveRedis};
use crate::live::store::{LiveStore, Refunds, StoreAt};
use fencesim_model::{
    BackendError, LeaseClient, Mechanism, MerchantId, Ports, Posting, Probe, RefundId, SettlementOutcome,
    SettlementStore, SqliteRefunds, Step, StepKind, Token, TokenClient, Worker, WorkerConfig, WorkerId,
    WriteGuard,
};
use fencesim_sim::port::step_recorded;
use fencesim_sim::{EventKind, Fault, Trigger};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Everything a worker process is told when it starts, as one JSON argument.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub worker: WorkerId,
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    pub redis_url: String,
    pub database: StoreAt,
    pub gateway_url: String,
    pub log: PathBuf,
    pub clock: LiveClock,
    /// The queue's visibility timeout, in the story's milliseconds.
    pub visibility_ms: u64,
    /// A pause this worker takes at a step of its own.
    pub stop: Option<Fault>,
}

/// Records each step and stops the process at the one the plan names.
struct LiveProbe {
    worker: WorkerId,
    log: Arc<EventLog>,
    /// The step kind, how many times it is reached before the stop, and the fault.
    stop: Option<(StepKind, u32, Fault)>,
    counts: Mutex<BTreeMap<StepKind, u32>>,
}

impl Probe for LiveProbe {
    async fn reached(&self, step: Step) {
        let kind = step.kind();
        if step_recorded(kind) {
            self.log.record(EventKind::Step { worker: self.worker, step });
        }
        let nth = {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            let count = counts.entry(kind).or_default();
            *count += 1;
            *count
        };
        if let Some((at, at_nth, fault)) = &self.stop {
            if *at == kind && *at_nth == nth {
                self.log.record(EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
                // SAFETY: raising a signal at the calling process has no memory effects.
                unsafe { libc::raise(libc::SIGSTOP) };
            }
        }
    }
}

/// The step a pause fires at, if it is a pause at one of `worker`'s steps.
fn stop_of(fault: &Fault) -> Option<(StepKind, u32, Fault)> {
    match fault.trigger {
        Trigger::Step { step, nth, .. } => Some((step, nth, fault.clone())),
        Trigger::At { .. } | Trigger::Call { .. } | Trigger::Within { .. } => None,
    }
}

/// How much later in the story each worker asks the queue for its first job than the one
/// before it.
const STAGGER_MS: u64 = 100;

/// Runs the worker until the queue closes.
pub fn run_worker(spec: WorkerSpec) -> Result<(), String> {
    match &spec.database {
        StoreAt::Sqlite { file } => {
            let refunds = SqliteRefunds::open_file(file, false)
                .map_err(|e| format!("{} is not a refund store: {e}", file.display()))?;
            run_over(&spec, refunds)
        }
        StoreAt::Postgres { url } => run_over(&spec, PgRefunds::connect(url)?),
    }
}

/// Runs the model's worker over the live ports, with `refunds` as its database.
fn run_over<R: Refunds + Clone>(spec: &WorkerSpec, refunds: R) -> Result<(), String> {
    let log = Arc::new(EventLog::create(&spec.log)?);
    let id = spec.worker;
    let redis = LiveRedis::new(connect(&spec.redis_url)?, id, log.clone(), spec.clock);
    let store = LiveStore { refunds, worker: id, log: log.clone() };
    let visibility = spec.clock.real(spec.visibility_ms).as_millis() as u64;
    let poll = spec.clock.real(50).max(Duration::from_millis(1));
    let queue = LiveQueue::new(connect(&spec.redis_url)?, id, visibility, poll, log.clone());
    let stop = spec.stop.as_ref().and_then(stop_of);
    let probe = LiveProbe { worker: id, log: log.clone(), stop, counts: Mutex::default() };
    let ports = Ports {
        lease: LeaseClient::new(spec.mechanism, vec![redis.clone()], spec.clock),
        tokens: TokenClient::new(spec.mechanism, redis, store.clone(), spec.ttl_ms),
        store,
        gateway: LiveGateway::new(&spec.gateway_url, id),
        queue,
        probe,
        clock: spec.clock,
        settlement: NoSettlement,
    };
    let config = WorkerConfig { id, mechanism: spec.mechanism, ttl_ms: spec.ttl_ms, settlement: false };
    let worker = Worker::new(config, ports, 1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the worker's runtime: {e}"))?;
    // The story starts at the same instant for every process, and the workers ask the
    // queue in id order, as the simulated queue hands a job to the lowest idle worker.
    let first_ask = spec.clock.start_us + spec.clock.real(STAGGER_MS * u64::from(id.0)).as_micros() as u64;
    std::thread::sleep(Duration::from_micros(first_ask.saturating_sub(wall_us())));
    runtime.block_on(worker.run());
    Ok(())
}

/// The live arm has no second store: its worlds have one store only, and `fencesim live`
/// refuses a mechanism that is about the second store. The worker never calls this port
/// (its config says there is no ledger); a call would be answered as a backend error.
struct NoSettlement;

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
