//! The project's own worker as a program that follows the contract (docs/worker.md): the
//! model's worker, unchanged, over the addresses the contract gives (its Redis and its
//! database through the run's proxies, the gateway service, the HTTP queue), taking no
//! fault itself. Run by `fencesim worker -- fencesim contract-worker`, it is judged from what
//! the components saw, as any team's program is. It also writes its own events, as a
//! worker process of the live arm does, into `$FENCESIM_EVENTS_DIR` when the run gives
//! one: the run then judges it a second time from them, and says whether the two
//! verdicts agree (`foreign::run`).

use crate::live::clock::{wall_us, LiveClock};
use crate::live::faults::LiveFaults;
use crate::live::gateway::LiveGateway;
use crate::live::log::EventLog;
use crate::live::postgres::PgRefunds;
use crate::live::redis::LiveRedis;
use crate::live::store::{LiveStore, Refunds};
use crate::live::worker::{worker_loop, LiveParts, LiveProbe};
use crate::mutant::{Mutant, Planted};
use fencesim_model::{Delivery, Job, JobId, JobQueue, Mechanism, MerchantId, WorkerConfig, WorkerId};
use fencesim_sim::Wiring;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What `fencesim contract-worker` is asked to be.
#[derive(Clone, Copy, Debug)]
pub struct ContractWorker {
    pub mechanism: Mechanism,
    /// A bug of the catalogue planted in it, as `fencesim live` plants one.
    pub mutant: Option<Mutant>,
    /// The run's real time per story time: the contract's TTL is real, the model's is the story's.
    pub time_scale: f64,
}

/// The contract's variables, read from the environment.
struct Contract {
    worker: WorkerId,
    redis_url: String,
    database_url: String,
    gateway_url: String,
    queue_url: String,
    ttl_real_ms: u64,
    poll: Duration,
    events: Option<PathBuf>,
}

fn variable(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| {
        format!("${name} is not set: contract-worker is a program for `fencesim worker -- fencesim contract-worker`")
    })
}

fn number(name: &str) -> Result<u64, String> {
    let text = variable(name)?;
    text.parse().map_err(|_| format!("${name} is {text:?}, not a number of milliseconds"))
}

impl Contract {
    fn read() -> Result<Contract, String> {
        let worker = variable("FENCESIM_WORKER")?;
        Ok(Contract {
            worker: worker.parse().map_err(|e| format!("$FENCESIM_WORKER {worker:?}: {e}"))?,
            redis_url: variable("FENCESIM_REDIS_URL")?,
            database_url: variable("FENCESIM_DATABASE_URL")?,
            gateway_url: variable("FENCESIM_GATEWAY_URL")?,
            queue_url: variable("FENCESIM_QUEUE_URL")?,
            ttl_real_ms: number("FENCESIM_LEASE_TTL_MS")?,
            poll: Duration::from_millis(number("FENCESIM_POLL_MS")?.max(1)),
            events: std::env::var_os("FENCESIM_EVENTS_DIR").map(PathBuf::from),
        })
    }
}

/// The worker's own event file in `dir`, and which of its processes this is (one more
/// than the files it left before, each process a file of its own); without a directory
/// the events are dropped and the process id tells the processes apart.
fn own_log(dir: Option<&Path>, worker: WorkerId) -> Result<(EventLog, u32), String> {
    let Some(dir) = dir else {
        return Ok((EventLog::create(Path::new("/dev/null"))?, std::process::id()));
    };
    let prefix = format!("{worker}-");
    let before = std::fs::read_dir(dir)
        .map_err(|e| format!("$FENCESIM_EVENTS_DIR {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .count() as u32;
    let incarnation = before + 1;
    Ok((EventLog::create(&dir.join(format!("{worker}-{incarnation}.jsonl")))?, incarnation))
}

/// Runs the worker until the queue answers 410.
pub fn run_contract_worker(asked: ContractWorker) -> Result<(), String> {
    if !(asked.time_scale.is_finite() && asked.time_scale > 0.0) {
        return Err(format!("--time-scale {}: expected a number above 0", asked.time_scale));
    }
    let contract = Contract::read()?;
    let own = asked.mechanism.spec().statements;
    let statements = asked.mutant.map_or(own, |mutant| Planted(mutant).statements(own));
    let refunds = PgRefunds::connect(&contract.database_url)?.with_statements(statements);
    run_over(&contract, asked, refunds)
}

fn run_over<R: Refunds + Clone>(
    contract: &Contract,
    asked: ContractWorker,
    refunds: R,
) -> Result<(), String> {
    let (log, incarnation) = own_log(contract.events.as_deref(), contract.worker)?;
    let log = Arc::new(log);
    let (id, mechanism) = (contract.worker, asked.mechanism);
    // the story's milliseconds are counted from this process's start: the worker reads
    // only spans of them (a lease's age), never the story's hour
    let clock = LiveClock { start_us: wall_us(), scale: asked.time_scale };
    let ttl_ms = (contract.ttl_real_ms as f64 / asked.time_scale).round() as u64;
    // how many workers there are only matters to faults, and this worker takes none
    let faults = Arc::new(LiveFaults::none(id, log.clone(), clock, mechanism, 1));
    let redis = LiveRedis::new(&contract.redis_url, id, log.clone(), clock, faults.clone())?;
    let store = LiveStore { refunds, worker: id, log: log.clone(), faults: faults.clone() };
    let queue = HttpQueue::new(&contract.queue_url, contract.poll);
    let probe = LiveProbe { worker: id, log: log.clone(), faults: faults.clone() };
    let gateway = LiveGateway::new(&contract.gateway_url, id, faults);
    let config = WorkerConfig { id, mechanism, ttl_ms, settlement: false };
    let parts = LiveParts { redis, store, gateway, queue, probe, clock };
    drive(worker_loop(config, parts, incarnation, asked.mutant))
}

fn drive(worker: impl std::future::Future<Output = ()>) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the worker's runtime: {e}"))?;
    runtime.block_on(worker);
    Ok(())
}

/// The contract's queue, asked over HTTP: `POST {base}/take`, `POST {base}/ack`. What it
/// hands out and takes back is recorded by the queue service, not here.
#[derive(Clone)]
struct HttpQueue {
    agent: ureq::Agent,
    base: String,
    poll: Duration,
}

/// What one take brought.
enum Taken {
    Job(Delivery),
    Nothing,
    Over,
}

impl HttpQueue {
    fn new(base: &str, poll: Duration) -> HttpQueue {
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
        HttpQueue { agent, base: base.trim_end_matches('/').to_owned(), poll }
    }

    fn take(&self) -> Taken {
        let answer = self.agent.post(&format!("{}/take", self.base)).call();
        match answer {
            Ok(response) if response.status() == 200 => {
                let Ok(body) = response.into_json::<serde_json::Value>() else { return Taken::Nothing };
                let field = |name: &str| body.get(name).and_then(serde_json::Value::as_u64).map(|n| n as u32);
                match (field("job"), field("merchant"), field("receipt")) {
                    (Some(job), Some(merchant), Some(receipt)) => Taken::Job(Delivery {
                        job: Job { id: JobId(job), merchant: MerchantId(merchant) },
                        receipt,
                    }),
                    _ => Taken::Nothing,
                }
            }
            Ok(_) => Taken::Nothing,
            // the run is over, or its queue is gone: either way there is nothing more to do
            Err(ureq::Error::Status(410, _)) | Err(ureq::Error::Transport(_)) => Taken::Over,
            Err(ureq::Error::Status(..)) => Taken::Nothing,
        }
    }
}

impl JobQueue for HttpQueue {
    /// Waits for a job; the wait is part of the story between the worker's refund calls,
    /// as the live arm's queue tells the gateway service (`live::pace`).
    async fn receive(&self) -> Option<Delivery> {
        let started = std::time::Instant::now();
        loop {
            let queue = self.clone();
            match tokio::task::spawn_blocking(move || queue.take()).await.unwrap_or(Taken::Over) {
                Taken::Job(delivery) => {
                    crate::live::clock::slept(started.elapsed());
                    crate::live::clock::due(started.elapsed());
                    crate::live::clock::woke();
                    return Some(delivery);
                }
                Taken::Over => return None,
                Taken::Nothing => tokio::time::sleep(self.poll).await,
            }
        }
    }

    async fn ack(&self, delivery: Delivery) -> bool {
        let (agent, url) = (self.agent.clone(), format!("{}/ack", self.base));
        let acked = tokio::task::spawn_blocking(move || {
            let answer = agent.post(&url).send_json(serde_json::json!({"receipt": delivery.receipt}));
            let body: serde_json::Value = answer.ok()?.into_json().ok()?;
            body.get("accepted").and_then(serde_json::Value::as_bool)
        });
        acked.await.ok().flatten().unwrap_or(false)
    }
}
