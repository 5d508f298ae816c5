//! The payment gateway of a live run: a small HTTP service on loopback that keeps the
//! money ledger and the idempotency record (the simulation's own gateway core, on the
//! wall clock), and the worker's client for it.
//!
//! `GET /refunds/815` asks whether refund `r_815` was paid (200 with the receipt, or 404);
//! `POST /refunds` with `{"reference": 815, "key": "r_815", "amount": 7025}` pays it (200
//! with the receipt, 409 while another call with the key is in flight). The calling
//! worker names itself in the `worker` header, and a refund call says in `slept-us` how
//! long the worker has slept on purpose and in `due-us` what its batch's requests stand
//! for by their nominal times. Each call takes the scenario's latency, on the
//! simulation's pace (`live::pace`).

use crate::live::clock::{wall_us, LiveClock};
use crate::live::faults::{GatewayArmed, LiveFaults};
use crate::live::http::{Handler, HttpRequest, HttpServer, Method};
use crate::live::log::EventLog;
use crate::live::pace::{self, Pace, Told, CATCH_UP_MS, CATCH_UP_REAL, PAUSE_MS};
use fencesim_model::{
    Cents, Gateway, GatewayCall, GatewayError, IdempotencyKey, Receipt, RefundId, WorkerId,
};
use fencesim_sim::gateway::{CallReply, GatewayCore, LookupCopy};
use fencesim_sim::{CallOutcome, EventKind, FaultKind, GatewayMode, Hop, Latency, LedgerEntry};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Serialize, Deserialize)]
struct RefundRequest {
    reference: u32,
    key: String,
    amount: i64,
}

#[derive(Serialize, Deserialize)]
struct ReceiptBody {
    gateway_ref: u32,
    amount: i64,
}

/// What the service needs to answer as the scenario says.
pub struct GatewaySetup {
    pub mode: GatewayMode,
    pub refund_latency: Latency,
    pub lookup_latency_ms: u64,
    /// How far behind the ledger the copy lookups are answered from, in the story.
    pub lookup_lag_ms: u64,
    pub clock: LiveClock,
}

impl GatewaySetup {
    /// The service `world` asks for, on `clock`.
    pub fn of(world: &fencesim_sim::WorldConfig, clock: LiveClock) -> GatewaySetup {
        GatewaySetup {
            mode: world.gateway_mode,
            refund_latency: world.refund_latency.clone(),
            lookup_latency_ms: world.lookup_latency_ms,
            lookup_lag_ms: world.lookup_lag_ms,
            clock,
        }
    }
}

/// The faults in force at the gateway, in the story's milliseconds.
#[derive(Default)]
struct InForce {
    outage_until_ms: u64,
    conflicts_until_ms: u64,
    lookups: LookupCopy,
    /// Faults armed here for a worker's next refund call (a team's program, which carries
    /// no headers; the project's worker arms its own).
    armed: std::collections::BTreeMap<WorkerId, GatewayArmed>,
}

/// Asked before the service answers a worker's call (a lookup or a refund call), as the
/// worker's n-th call on the gateway hop; `false`: the caller is gone and the call is dropped.
pub trait CallGate: Send + Sync {
    fn pass(&self, worker: WorkerId) -> bool;
    /// The call `pass` let through has been answered.
    fn answered(&self, _worker: WorkerId) {}
}

struct Shared {
    core: Mutex<GatewayCore>,
    in_force: Mutex<InForce>,
    /// Refund calls held up on their way that have not landed yet.
    on_the_way: std::sync::atomic::AtomicU32,
    /// Each worker's last refund call: when it was answered, and on what pace.
    paced: Mutex<std::collections::BTreeMap<WorkerId, Pace>>,
    /// How long the coordinator has frozen each worker in all (a pause at a time), in real
    /// microseconds: part of what the worker's time between two calls stands for, which
    /// the worker cannot tell itself (`live::pace::Told::due_us`).
    frozen: Mutex<std::collections::BTreeMap<WorkerId, u64>>,
    /// How far each worker's story fell behind the simulation's pace, in real µs (`behind_ms`).
    lost: Mutex<std::collections::BTreeMap<WorkerId, u64>>,
    /// When each worker was last handed a job, in real microseconds, and how long it had
    /// been frozen in all by then (`pace::started_late`).
    delivered: Mutex<std::collections::BTreeMap<WorkerId, (u64, u64)>>,
    /// When the story starts on the wall clock: the setup's until the workers are ready
    /// and the coordinator fixes it (`GatewayService::begin`).
    start_us: std::sync::atomic::AtomicU64,
    setup: GatewaySetup,
    log: EventLog,
    gate: Mutex<Option<Arc<dyn CallGate>>>,
}

/// The running service; stopped when dropped.
pub struct GatewayService {
    pub port: u16,
    /// Stops taking connections when dropped.
    _server: HttpServer,
    shared: Arc<Shared>,
}

impl GatewayService {
    /// Listens on `port` of loopback (0: any free port).
    pub fn start(setup: GatewaySetup, log: EventLog, port: u16) -> Result<GatewayService, String> {
        let core = Mutex::new(GatewayCore::new(setup.mode));
        let shared = Arc::new(Shared {
            core,
            in_force: Mutex::default(),
            on_the_way: Default::default(),
            paced: Mutex::default(),
            frozen: Mutex::default(),
            lost: Mutex::default(),
            delivered: Mutex::default(),
            start_us: setup.clock.start_us.into(),
            setup,
            log,
            gate: Mutex::new(None),
        });
        // each connection's calls on a thread of their own (a controlled run holds each
        // call there until its turn)
        let answering = shared.clone();
        let handler: Handler = Arc::new(move |request| Shared::answer(&answering, request));
        let server = HttpServer::start(port, handler)
            .map_err(|e| format!("the gateway cannot listen on 127.0.0.1:{port}: {e}"))?;
        let port = server.port();
        Ok(GatewayService { port, _server: server, shared })
    }

    /// The story starts at `start_us` on the wall clock (no request comes before).
    pub fn begin(&self, start_us: u64) {
        self.shared.start_us.store(start_us, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every movement of money so far.
    pub fn ledger(&self) -> Vec<LedgerEntry> {
        self.shared.core.lock().unwrap_or_else(|p| p.into_inner()).ledger().to_vec()
    }

    pub fn log_path(&self) -> std::path::PathBuf {
        self.shared.log.path().to_owned()
    }

    /// How far each worker that fell behind the simulation's pace fell, in story
    /// milliseconds: its own work between two refund calls took longer than the calls'
    /// latency, more than its next calls could make up (`live::pace`), so its story went on
    /// that much later than the simulation's. Workers that kept the pace are left out.
    pub fn behind_ms(&self) -> Vec<(WorkerId, u64)> {
        let clock = self.shared.clock();
        let lost = self.shared.lost.lock().unwrap_or_else(|p| p.into_inner());
        let story = |us: u64| (us as f64 / 1_000.0 / clock.scale).round() as u64;
        lost.iter().map(|(&worker, &us)| (worker, story(us))).filter(|&(_, ms)| ms > 0).collect()
    }

    /// What to call when the queue hands a worker a job: its first refund call after it
    /// is measured from then (`behind_ms`).
    pub fn deliveries(&self) -> impl Fn(WorkerId) + Send + Sync + 'static {
        let shared = self.shared.clone();
        move |worker| {
            let frozen = shared.frozen.lock().unwrap_or_else(|p| p.into_inner()).get(&worker).copied();
            let mut delivered = shared.delivered.lock().unwrap_or_else(|p| p.into_inner());
            delivered.insert(worker, (wall_us(), frozen.unwrap_or(0)));
        }
    }

    /// Waits until every refund call held up on its way has landed, or `deadline` passes:
    /// a run ends when nothing is still to come, a late call included.
    pub fn wait_for_late_calls(&self, deadline: std::time::Instant) {
        while self.shared.on_the_way.load(std::sync::atomic::Ordering::SeqCst) > 0
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The coordinator froze `worker` for `real` (a pause at a time).
    pub fn frozen(&self, worker: WorkerId, real: Duration) {
        let mut frozen = self.shared.frozen.lock().unwrap_or_else(|p| p.into_inner());
        *frozen.entry(worker).or_default() += real.as_micros() as u64;
    }

    /// Takes a fault that acts on the gateway as a whole (the coordinator's, at a time).
    pub fn take(&self, kind: FaultKind) {
        self.shared.take(kind);
    }

    /// Asks `gate` before each call is answered.
    pub fn gate(&self, gate: Arc<dyn CallGate>) {
        *self.shared.gate.lock().unwrap_or_else(|p| p.into_inner()) = Some(gate);
    }
}

/// Sends a fault that acts on the gateway as a whole to the service at `base` (a
/// worker's, at its own trigger), and waits until it is in force.
pub fn send_fault(base: &str, kind: FaultKind) -> Result<(), String> {
    let url = format!("{}/faults", base.trim_end_matches('/'));
    ureq::post(&url).set("worker", "coordinator").send_json(kind).map(drop).map_err(|e| e.to_string())
}

/// How long an outage takes to refuse a request, in the story, as in the simulation.
const REFUSAL_MS: u64 = 1;

/// A header's number, if the request has it.
fn header(request: &HttpRequest, name: &str) -> Option<u64> {
    request.header(name).and_then(|value| value.parse::<u64>().ok())
}

/// What a refund call says of the worker's time (`live::pace::Told`).
fn told(request: &HttpRequest) -> Told {
    Told {
        slept_us: header(request, "slept-us").unwrap_or(0),
        due_us: header(request, "due-us").unwrap_or(0),
    }
}

/// The calling worker and the path it asked for: named by the `worker` header (the
/// project's own worker), or by the path's first part (`/A/gateway/refunds/815`: a program
/// the run does not control is given a base address of its own, so that its calls are
/// known to be its own without its cooperation); the base is taken off the path either way.
fn routed(named: Option<WorkerId>, url: &str) -> (Option<WorkerId>, String) {
    let mut parts = url.trim_start_matches('/').splitn(3, '/');
    match (parts.next().and_then(|w| w.parse::<WorkerId>().ok()), parts.next(), parts.next()) {
        (Some(worker), Some("gateway"), rest) => (named.or(Some(worker)), format!("/{}", rest.unwrap_or(""))),
        _ => (named, url.to_owned()),
    }
}

/// What a refund call carries in its headers: the faults armed for it.
fn armed(request: &HttpRequest) -> GatewayArmed {
    let header = |name: &str| header(request, name);
    GatewayArmed {
        extra_ms: header("extra-ms").unwrap_or(0),
        lost: header("lose").unwrap_or(0) as u32,
        late_ms: header("late-ms"),
    }
}

fn json_body(body: &impl Serialize) -> Option<Vec<u8>> {
    Some(serde_json::to_vec(body).expect("JSON"))
}

impl Shared {
    fn clock(&self) -> LiveClock {
        let start_us = self.start_us.load(std::sync::atomic::Ordering::SeqCst);
        LiveClock { start_us, ..self.setup.clock }
    }

    fn answer(self: &Arc<Self>, request: HttpRequest) {
        let named = request.header("worker").and_then(|value| value.parse::<WorkerId>().ok());
        let (worker, path) = routed(named, request.url());
        let text = request.body().to_owned();
        let gate = self.gate.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let gated = gate.filter(|_| path != "/faults").zip(worker);
        if let Some((gate, worker)) = &gated {
            if !gate.pass(*worker) {
                request.respond(503, json_body(&serde_json::json!({"error": "caller gone"})));
                return gate.answered(*worker);
            }
        }
        let (status, body) = match (request.method(), worker) {
            (Method::Post, _) if path == "/faults" => match serde_json::from_str::<FaultKind>(&text) {
                Ok(kind) => {
                    self.take(kind);
                    (200, serde_json::json!({"taken": kind.name()}))
                }
                Err(e) => (400, serde_json::json!({"error": e.to_string()})),
            },
            (_, None) => (400, serde_json::json!({"error": "no worker header"})),
            (Method::Get, Some(worker)) => self.look_up(worker, &path),
            (Method::Post, Some(worker)) if path == "/refunds" => {
                match serde_json::from_str::<RefundRequest>(&text) {
                    Ok(call) => {
                        let armed = armed(&request).and(self.armed_here(worker));
                        self.pay(worker, call, armed, told(&request))
                    }
                    Err(e) => (400, serde_json::json!({"error": e.to_string()})),
                }
            }
            _ => (405, serde_json::json!({"error": "GET or POST"})),
        };
        request.respond(status, json_body(&body));
        if let Some((gate, worker)) = gated {
            gate.answered(worker);
        }
    }

    /// Takes a fault that acts on the gateway as a whole, now.
    fn take(&self, kind: FaultKind) {
        let now = fencesim_model::Clock::now_ms(&self.clock());
        let mut in_force = self.in_force.lock().unwrap_or_else(|p| p.into_inner());
        match kind {
            FaultKind::GatewayOutage { for_ms } => {
                in_force.outage_until_ms = in_force.outage_until_ms.max(now + for_ms)
            }
            FaultKind::GatewayConflicts { for_ms } => {
                in_force.conflicts_until_ms = in_force.conflicts_until_ms.max(now + for_ms)
            }
            FaultKind::LookupLag { for_ms } => in_force.lookups.freeze(now, for_ms),
            FaultKind::GatewayLatency { worker, extra_ms } => {
                in_force.armed.entry(worker).or_default().extra_ms += extra_ms
            }
            FaultKind::LostResponse { worker } => in_force.armed.entry(worker).or_default().lost += 1,
            FaultKind::GatewayTimeout { worker, late_ms } => {
                in_force.armed.entry(worker).or_default().late_ms = Some(late_ms)
            }
            // the live plan sends the gateway no other kind
            _ => {}
        }
    }

    /// What was armed here for `worker`'s next refund call, taken.
    fn armed_here(&self, worker: WorkerId) -> GatewayArmed {
        let mut in_force = self.in_force.lock().unwrap_or_else(|p| p.into_inner());
        in_force.armed.remove(&worker).unwrap_or_default()
    }

    /// During an outage the request is refused at once; records it if so.
    fn refused(&self, worker: WorkerId, refund: RefundId, call: GatewayCall) -> bool {
        let now = fencesim_model::Clock::now_ms(&self.clock());
        if now >= self.in_force.lock().unwrap_or_else(|p| p.into_inner()).outage_until_ms {
            return false;
        }
        self.log.record(EventKind::GatewayRefused { worker, refund, call });
        crate::live::clock::sleep(self.clock().real(REFUSAL_MS));
        true
    }

    fn look_up(&self, worker: WorkerId, url: &str) -> (u16, serde_json::Value) {
        let Some(refund) = url.strip_prefix("/refunds/").and_then(|n| n.parse().ok()).map(RefundId) else {
            return (404, serde_json::json!({"error": "no such resource"}));
        };
        if self.refused(worker, refund, GatewayCall::Lookup) {
            return (503, serde_json::json!({"error": "the gateway is down"}));
        }
        crate::live::clock::sleep(self.clock().real(self.setup.lookup_latency_ms));
        let now = fencesim_model::Clock::now_ms(&self.clock());
        let horizon = {
            let in_force = self.in_force.lock().unwrap_or_else(|p| p.into_inner());
            in_force.lookups.horizon(now, self.setup.lookup_lag_ms)
        };
        let (found, told) =
            self.core.lock().unwrap_or_else(|p| p.into_inner()).look_up(worker, refund, now, horizon);
        for kind in told {
            self.log.record(kind);
        }
        match found {
            Some(r) => {
                (200, serde_json::json!(ReceiptBody { gateway_ref: r.gateway_ref, amount: r.amount.0 }))
            }
            None => (404, serde_json::json!({"error": "no refund with this reference"})),
        }
    }

    /// When a refund call that arrived at `arrived_us` is answered, on the wall clock: on
    /// the simulation's pace, or at once if the worker's own work made it later, the
    /// lateness then made up by its next calls (`live::pace`). On a controlled run's clock
    /// a worker's own work takes no time: a call is answered its latency after it arrived.
    fn due(&self, worker: WorkerId, refund: RefundId, arrived_us: u64, extra_ms: u64, told: Told) -> Pace {
        let clock = self.clock();
        let latency_us = clock.real(self.setup.refund_latency.of(refund) + extra_ms).as_micros() as u64;
        if crate::live::clock::controlled() {
            return pace::answer(
                None,
                arrived_us,
                Told::default(),
                latency_us,
                pace::Bounds { pause_us: 0, catch_up_us: 0 },
            );
        }
        let bounds = pace::Bounds {
            pause_us: clock.real(PAUSE_MS).as_micros() as u64,
            catch_up_us: clock.real(CATCH_UP_MS).min(CATCH_UP_REAL).as_micros() as u64,
        };
        let last = self.paced.lock().unwrap_or_else(|p| p.into_inner()).get(&worker).copied();
        let frozen = self.frozen.lock().unwrap_or_else(|p| p.into_inner()).get(&worker).copied();
        let told = Told { due_us: told.due_us + frozen.unwrap_or(0), ..told };
        let (paced, lost) = pace::answer_and_lost(last, arrived_us, told, latency_us, bounds);
        let delivered = self.delivered.lock().unwrap_or_else(|p| p.into_inner()).get(&worker).copied();
        let first = pace::started_late(delivered, last, arrived_us, frozen.unwrap_or(0), bounds);
        let lost = first.unwrap_or(lost);
        if lost > 0 {
            *self.lost.lock().unwrap_or_else(|p| p.into_inner()).entry(worker).or_default() += lost;
        }
        paced
    }

    /// The call reaches the ledger at `now` (story ms) and is recorded; `lost`: nobody
    /// hears its answer (a conflict is always heard). `sent_us`: when a late call was sent.
    fn reach(
        &self,
        worker: WorkerId,
        call: &RefundRequest,
        now: u64,
        latency: u64,
        lost: bool,
        sent_us: Option<u64>,
    ) -> CallReply {
        let refund = RefundId(call.reference);
        let refuse = now < self.in_force.lock().unwrap_or_else(|p| p.into_inner()).conflicts_until_ms;
        let mut core = self.core.lock().unwrap_or_else(|p| p.into_inner());
        let (key, amount) = (IdempotencyKey(call.key.clone()), Cents(call.amount));
        let reply = core.refund(refund, key, amount, now, latency, refuse);
        let kind = EventKind::RefundCalled {
            worker,
            epoch: None,
            refund,
            amount,
            outcome: reply.outcome,
            gateway_ref: reply.receipt.gateway_ref,
            response_lost: lost && reply.outcome != CallOutcome::Conflict,
        };
        match sent_us {
            Some(sent_us) => self.log.record_late(sent_us, kind),
            None => self.log.record(kind),
        }
        reply
    }

    fn pay(
        self: &Arc<Self>,
        worker: WorkerId,
        call: RefundRequest,
        armed: GatewayArmed,
        told: Told,
    ) -> (u16, serde_json::Value) {
        let clock = self.clock();
        let refund = RefundId(call.reference);
        if self.refused(worker, refund, GatewayCall::Refund) {
            return (503, serde_json::json!({"error": "the gateway is down"}));
        }
        let arrived_us = wall_us();
        let paced = self.due(worker, refund, arrived_us, armed.extra_ms, told);
        let now = clock.story_ms(arrived_us);
        let latency = clock.story_ms(paced.answered_us) - now;
        if let Some(late_ms) = armed.late_ms {
            // held up on its way: the worker hears nothing when its answer is due, and the
            // call lands later and does what a call does then
            self.log.record_at(
                arrived_us,
                EventKind::RefundTimedOut { worker, refund, lands_at_ms: now + late_ms },
            );
            let shared = self.clone();
            self.on_the_way.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let lands_us = arrived_us + clock.real(late_ms).as_micros() as u64;
            crate::live::clock::at_time(lands_us, move || {
                shared.reach(worker, &call, clock.story_ms(lands_us), latency, false, Some(arrived_us));
                shared.on_the_way.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
            self.wait_until(worker, paced);
            return (504, serde_json::json!({"error": "no answer in time"}));
        }
        let reply = self.reach(worker, &call, now, latency, armed.lost > 0, None);
        let paced = match reply.outcome {
            CallOutcome::Created => paced,
            CallOutcome::Replayed | CallOutcome::Conflict => {
                let at_us =
                    (clock.start_us + clock.real(reply.respond_at_ms).as_micros() as u64).max(arrived_us);
                Pace { answered_us: at_us, on_time_us: at_us, ..paced }
            }
        };
        self.wait_until(worker, paced);
        let receipt = ReceiptBody { gateway_ref: reply.receipt.gateway_ref, amount: reply.receipt.amount.0 };
        match (reply.outcome, armed.lost > 0) {
            (CallOutcome::Conflict, _) => {
                (409, serde_json::json!({"error": "a call with this key is in flight"}))
            }
            (CallOutcome::Created | CallOutcome::Replayed, true) => {
                (504, serde_json::json!({"error": "the answer was lost"}))
            }
            (CallOutcome::Created | CallOutcome::Replayed, false) => (200, serde_json::json!(receipt)),
        }
    }

    /// Answers at the pace's time; the worker's last answer is then that time, not when
    /// the sleep ended: the machine's lateness in waking is part of the next gap, and is
    /// made up as the worker's own work is.
    fn wait_until(&self, worker: WorkerId, paced: Pace) {
        crate::live::clock::sleep_until_us(paced.answered_us);
        self.paced.lock().unwrap_or_else(|p| p.into_inner()).insert(worker, paced);
    }
}

/// Waits for a gateway call on a thread of its own, so that the worker's other task (a
/// renewal) keeps its time while the call is out, as it does in the simulation.
async fn off_the_runtime<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, GatewayError> + Send + 'static,
) -> Result<T, GatewayError> {
    tokio::task::spawn_blocking(call).await.unwrap_or(Err(GatewayError::Unavailable))
}

/// A worker's client for the gateway service.
pub struct LiveGateway {
    agent: ureq::Agent,
    base: String,
    worker: WorkerId,
    faults: Arc<LiveFaults>,
}

impl LiveGateway {
    pub fn new(base: &str, worker: WorkerId, faults: Arc<LiveFaults>) -> LiveGateway {
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
        LiveGateway { agent, base: base.trim_end_matches('/').to_owned(), worker, faults }
    }

    /// The answer as a receipt, `None` for 404, or how the call failed.
    fn receipt(answer: Result<ureq::Response, ureq::Error>) -> Result<Option<Receipt>, GatewayError> {
        match answer {
            Ok(response) => {
                let body: ReceiptBody = response.into_json().map_err(|_| GatewayError::Timeout)?;
                Ok(Some(Receipt { gateway_ref: body.gateway_ref, amount: Cents(body.amount) }))
            }
            Err(ureq::Error::Status(404, _)) => Ok(None),
            Err(ureq::Error::Status(409, _)) => Err(GatewayError::Conflict),
            Err(ureq::Error::Status(504, _)) => Err(GatewayError::Timeout),
            Err(ureq::Error::Status(..)) => Err(GatewayError::Unavailable),
            // The request may have left: only a lookup can tell what it did.
            Err(ureq::Error::Transport(_)) => Err(GatewayError::Timeout),
        }
    }
}

impl Gateway for LiveGateway {
    async fn find(&self, reference: RefundId) -> Result<Option<Receipt>, GatewayError> {
        self.faults.call(Hop::Gateway).await;
        let url = format!("{}/refunds/{}", self.base, reference.0);
        let (agent, worker) = (self.agent.clone(), self.worker.to_string());
        let asked = std::time::Instant::now();
        let found =
            off_the_runtime(move || Self::receipt(agent.get(&url).set("worker", &worker).call())).await;
        // the service held the answer for the lookup's latency: a wait, not this worker's
        // work, and part of the story between two refund calls
        crate::live::clock::slept(asked.elapsed());
        crate::live::clock::due(asked.elapsed());
        crate::live::clock::woke();
        found
    }

    async fn refund(
        &self,
        reference: RefundId,
        key: IdempotencyKey,
        amount: Cents,
    ) -> Result<Receipt, GatewayError> {
        self.faults.call(Hop::Gateway).await;
        let armed = self.faults.take_gateway();
        let url = format!("{}/refunds", self.base);
        let body = RefundRequest { reference: reference.0, key: key.0, amount: amount.0 };
        let (agent, worker) = (self.agent.clone(), self.worker.to_string());
        let paid = off_the_runtime(move || {
            let mut request = agent.post(&url).set("worker", &worker);
            request = request
                .set("extra-ms", &armed.extra_ms.to_string())
                .set("lose", &armed.lost.min(1).to_string())
                .set("slept-us", &crate::live::clock::slept_us().to_string())
                .set("due-us", &crate::live::clock::due_us().to_string());
            if let Some(late_ms) = armed.late_ms {
                request = request.set("late-ms", &late_ms.to_string());
            }
            Self::receipt(request.send_json(body))
        });
        let paid = paid.await;
        crate::live::clock::woke();
        // a lost answer is taken by the next call that is heard; a conflict is always heard
        let kept = match paid {
            Err(GatewayError::Conflict) => armed.lost,
            _ => armed.lost.saturating_sub(1),
        };
        self.faults.keep_lost(kept);
        paid?.ok_or(GatewayError::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::routed;
    use fencesim_model::WorkerId;

    #[test]
    fn a_caller_is_known_by_its_header_or_its_base_address() {
        let (a, b) = (Some(WorkerId(0)), Some(WorkerId(1)));
        assert_eq!(routed(a, "/refunds/815"), (a, "/refunds/815".to_owned()));
        assert_eq!(routed(None, "/B/gateway/refunds/815"), (b, "/refunds/815".to_owned()));
        assert_eq!(routed(None, "/B/gateway/refunds"), (b, "/refunds".to_owned()));
        assert_eq!(routed(a, "/A/gateway/refunds"), (a, "/refunds".to_owned()), "the header and the base");
        assert_eq!(routed(None, "/refunds/815"), (None, "/refunds/815".to_owned()), "nobody named");
        assert_eq!(routed(None, "/faults"), (None, "/faults".to_owned()));
    }
}
