//! The job queue a team's worker program takes its jobs from: a small HTTP service on
//! loopback over the simulation's own queue core (at-least-once delivery, a visibility
//! timeout, the same rule for who is handed a job), on the story's clock. Each worker is
//! given a base address of its own (`/A/queue`), so that what it took and acked is known to
//! be its own; the service records every delivery, expiry and ack as the simulation does.
//!
//! `POST {base}/take` answers `200 {"job": 1, "merchant": 4471, "receipt": 3}`, `204` (nothing
//! for this worker now: ask again shortly) or `410` (the run is over: leave). `POST
//! {base}/ack` with `{"receipt": 3}` answers `200 {"accepted": true}`, or `false` once the
//! job was handed to another worker.

use crate::live::clock::{wall_us, LiveClock};
use crate::live::gateway::CallGate;
use crate::live::http::{Handler, HttpRequest, HttpServer, Method};
use crate::live::log::EventLog;
use fencesim_model::{Clock, Delivery, Job, WorkerId};
use fencesim_sim::queue::{QueueCore, QueueEvent};
use fencesim_sim::EventKind;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

struct State {
    core: QueueCore,
    /// Each delivery's job, by receipt: an ack names only its receipt.
    delivered: BTreeMap<u32, (Job, WorkerId)>,
    clock: LiveClock,
    /// Whether the story's start is set: before it, every take is answered `204`.
    begun: bool,
    /// What the core did before the story began (the first deliveries), recorded when it begins.
    early: Vec<QueueEvent>,
    workers: u32,
    /// The workers that have asked for a job at least once.
    asked: std::collections::BTreeSet<WorkerId>,
}

struct Shared {
    state: Mutex<State>,
    log: EventLog,
    stop: AtomicBool,
    on_delivery: Mutex<Option<OnDelivery>>,
    /// Asked before a worker's request is answered (a controlled run holds it there).
    gate: Mutex<Option<Arc<dyn CallGate>>>,
}

/// On a controlled run's clock, the longest a take waits for a job before it is answered
/// `204`: one story second. The copy's own HTTP client counts real time, and a take held
/// while the run goes on for many story seconds outlasted the examples' 5 s timeouts on a
/// busy machine (the copy asked again at a moment the machine chose, and two runs of one
/// seed parted there).
const LONG_POLL_US: u64 = 100_000;

/// How long a take asked before a controlled run's story begins waits, in real time,
/// before it is answered `204`.
const EARLY_TAKE_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// Told when a worker is handed a job, before the answer goes back (the step `JobReceived`,
/// where a fault of the plan may fire). It must not wait: the service answers one request
/// at a time.
pub type OnDelivery = Arc<dyn Fn(WorkerId) + Send + Sync>;

/// The running service; stopped when dropped.
pub struct QueueService {
    pub port: u16,
    shared: Arc<Shared>,
    /// Stops taking connections when dropped.
    _server: HttpServer,
}

impl QueueService {
    /// Listens on a free port of 127.0.0.1 with `jobs` queued for `workers` workers; the
    /// story's clock is set by `begin`.
    pub fn start(
        workers: u32,
        visibility_timeout_ms: u64,
        jobs: &[Job],
        clock: LiveClock,
        log: EventLog,
    ) -> Result<QueueService, String> {
        let mut core = QueueCore::new(workers as usize, visibility_timeout_ms);
        let mut out = Vec::new();
        for job in jobs {
            core.enqueue(*job, &mut out);
        }
        let state = State {
            core,
            delivered: BTreeMap::new(),
            clock,
            begun: false,
            early: out,
            workers,
            asked: Default::default(),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            log,
            stop: AtomicBool::new(false),
            on_delivery: Mutex::new(None),
            gate: Mutex::new(None),
        });
        let answering = shared.clone();
        // each connection's requests on a thread of their own: a take with nothing for
        // its worker waits for a job on a controlled run's clock, holding its connection
        let handler: Handler = Arc::new(move |request| answering.answer(request));
        let server = HttpServer::start(0, handler).map_err(|e| format!("the queue service: {e}"))?;
        let port = server.port();
        Ok(QueueService { port, shared, _server: server })
    }

    /// Asks `gate` before each worker's request is answered, and tells it when it was.
    pub fn gate(&self, gate: Arc<dyn CallGate>) {
        *self.shared.gate.lock().unwrap_or_else(|p| p.into_inner()) = Some(gate);
    }

    /// Tells `on_delivery` of each job handed out from now on.
    pub fn on_delivery(&self, on_delivery: OnDelivery) {
        *self.shared.on_delivery.lock().unwrap_or_else(|p| p.into_inner()) = Some(on_delivery);
    }

    /// A worker's base address.
    pub fn url(&self, worker: WorkerId) -> String {
        format!("http://127.0.0.1:{}/{worker}/queue", self.port)
    }

    /// The story starts at `start_us`: jobs are handed out from now on.
    pub fn begin(&self, start_us: u64) {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.clock.start_us = start_us;
        state.begun = true;
        let early = std::mem::take(&mut state.early);
        self.shared.record(&state, early);
    }

    /// Lets timed-out deliveries become visible again, now, whether or not a worker asks.
    pub fn tick(&self) {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.begun {
            let now = state.clock.now_ms();
            let mut out = Vec::new();
            state.core.tick(now, &mut out);
            self.shared.record(&state, out);
        }
    }

    /// The queue gives up on `worker`'s delivery now (`duplicate`: delivers it again while
    /// the first is still in flight); whether it held one.
    pub fn hand_on(&self, worker: WorkerId, duplicate: bool) -> bool {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = state.clock.now_ms();
        let mut out = Vec::new();
        let held = match duplicate {
            true => state.core.duplicate_from(worker, &mut out),
            false => state.core.redeliver_from(worker, now, &mut out),
        };
        self.shared.record(&state, out);
        crate::live::clock::changed();
        held
    }

    /// Whether every job queued so far is acked.
    pub fn all_done(&self) -> bool {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).core.all_done()
    }

    /// Whether `worker` has asked for a job yet.
    pub fn asked(&self, worker: WorkerId) -> bool {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).asked.contains(&worker)
    }

    /// Whether every worker has asked for a job yet.
    pub fn all_asked(&self) -> bool {
        let state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.asked.len() as u32 == state.workers
    }

    /// How many workers the queue serves.
    pub fn workers(&self) -> u32 {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).workers
    }

    /// Adds a job that arrived during the run.
    pub fn add(&self, job: Job) {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        state.core.enqueue(job, &mut out);
        self.shared.record(&state, out);
        crate::live::clock::changed();
    }

    /// No job will come any more: takes are answered `410` from now on.
    pub fn close(&self) {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).core.close();
        crate::live::clock::changed();
    }

    /// The jobs not acked, with how many times each was delivered.
    pub fn open_jobs(&self) -> Vec<(Job, u32)> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).core.open_jobs().collect()
    }
}

impl Drop for QueueService {
    fn drop(&mut self) {
        // a connection still open answers nothing more
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// The worker a path names and what it asks for: `/A/queue/take` is `(A, "take")`.
fn routed(url: &str) -> Option<(WorkerId, &str)> {
    let mut parts = url.trim_start_matches('/').splitn(3, '/');
    match (parts.next()?.parse().ok()?, parts.next()?, parts.next()?) {
        (worker, "queue", asked) => Some((worker, asked)),
        _ => None,
    }
}

impl Shared {
    fn answer(&self, request: HttpRequest) {
        if self.stop.load(Ordering::SeqCst) {
            return;
        }
        let text = request.body().to_owned();
        let gate = self.gate.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let gated = gate.zip(routed(request.url()).map(|(worker, _)| worker));
        if let Some((gate, worker)) = &gated {
            if !gate.pass(*worker) {
                return gate.answered(*worker);
            }
        }
        self.answered(request, &text);
        if let Some((gate, worker)) = gated {
            gate.answered(worker);
        }
    }

    fn answered(&self, request: HttpRequest, text: &str) {
        let (status, body) = match (request.method(), routed(request.url())) {
            (Method::Post, Some((worker, "take"))) => self.take(worker),
            (Method::Post, Some((worker, "ack"))) => self.ack(worker, text),
            (_, Some(_)) => (404, serde_json::json!({"error": "POST {base}/take or POST {base}/ack"})),
            (_, None) => (404, serde_json::json!({"error": "a queue address is /<worker>/queue/..."})),
        };
        let response = match status {
            204 => None,
            _ => Some(serde_json::to_vec(&body).expect("JSON")),
        };
        if let (200, Some((worker, "take"))) = (status, routed(request.url())) {
            let told = self.on_delivery.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(on_delivery) = told {
                on_delivery(worker);
            }
        }
        request.respond(status, response);
    }

    fn take(&self, worker: WorkerId) -> (u16, serde_json::Value) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if worker.0 >= state.workers {
            return (404, serde_json::json!({"error": format!("no worker {worker} in this run")}));
        }
        state.asked.insert(worker);
        // on a run's clock a take that did not wait for its turn is a start-up's, even if
        // the story began while it was on its way: answered with a job, it went on before
        // its turn, and the copy's next request came at a moment the machine chose
        let starting = crate::live::clock::controlled() && !crate::foreign::turns::in_turn();
        if !state.begun || wall_us() < state.clock.start_us || starting {
            if crate::live::clock::controlled() {
                // a controlled run's copies sleep between their asks while they start up,
                // so that the end of their start-up can be seen (`foreign::start_up`)
                drop(state);
                std::thread::sleep(EARLY_TAKE_WAIT);
            }
            return (204, serde_json::Value::Null);
        }
        let asked_us = wall_us();
        let delivery = loop {
            let now = state.clock.now_ms();
            let mut out = Vec::new();
            state.core.tick(now, &mut out);
            let delivery = state.core.receive(worker, now, &mut out);
            self.record(&state, out);
            let waited_enough = wall_us() >= asked_us + LONG_POLL_US;
            if delivery.is_some()
                || state.core.is_closed()
                || !crate::live::clock::controlled()
                || waited_enough
            {
                break delivery;
            }
            // a controlled run's take waits for a job: until the next delivery times out,
            // or the queue changes (a job arrives or is handed on, the queue closes), or
            // for a story second at most, so that no copy's request is held long
            let clock = state.clock;
            let deadline =
                state.core.next_deadline().map(|ms| clock.start_us + clock.real(ms).as_micros() as u64);
            let due = deadline.map_or(asked_us + LONG_POLL_US, |at| at.min(asked_us + LONG_POLL_US));
            drop(state);
            // a take whose copy a crash killed (or whose run is over) waits no more: left
            // waiting, it would hold a job for nobody; nor one held through many turns
            // (`Held::Poll`)
            let waited = crate::live::clock::poll_for_change(due);
            state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if !waited {
                break None;
            }
        };
        match delivery {
            Some(Delivery { job, receipt }) => {
                state.delivered.insert(receipt, (job, worker));
                // another take may now wait for this delivery's time-out
                crate::live::clock::changed();
                let body =
                    serde_json::json!({"job": job.id.0, "merchant": job.merchant.0, "receipt": receipt});
                (200, body)
            }
            None if state.core.is_closed() => (410, serde_json::json!({"error": "the run is over"})),
            None => (204, serde_json::Value::Null),
        }
    }

    fn ack(&self, worker: WorkerId, text: &str) -> (u16, serde_json::Value) {
        let receipt = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|body| body.get("receipt")?.as_u64())
            .and_then(|receipt| u32::try_from(receipt).ok());
        let Some(receipt) = receipt else {
            return (400, serde_json::json!({"error": "an ack is {\"receipt\": <number>}"}));
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(&(job, _)) = state.delivered.get(&receipt) else {
            return (400, serde_json::json!({"error": format!("no delivery has receipt {receipt}")}));
        };
        let accepted = state.core.ack(Delivery { job, receipt });
        self.log.record(EventKind::JobAcked { job: job.id, worker, receipt, accepted });
        drop(state);
        crate::live::clock::changed();
        (200, serde_json::json!({"accepted": accepted}))
    }

    /// Records what the core did: a delivery now, an expiry at the story time it fell due.
    fn record(&self, state: &State, out: Vec<QueueEvent>) {
        for event in out {
            match event {
                QueueEvent::Delivered { job, worker, receipt, delivery } => {
                    let at_us = wall_us().max(state.clock.start_us);
                    self.log.record_at(at_us, EventKind::JobDelivered { job, worker, receipt, delivery });
                }
                QueueEvent::VisibilityExpired { job, worker, receipt, at_ms } => {
                    let at_us = state.clock.start_us + state.clock.real(at_ms).as_micros() as u64;
                    self.log.record_at(at_us, EventKind::VisibilityExpired { job, worker, receipt });
                }
            }
        }
    }
}
