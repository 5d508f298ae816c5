//! The payment gateway of a live run: a small HTTP service on loopback that keeps the
//! money ledger and the idempotency record (the simulation's own gateway core, on the
//! wall clock), and the worker's client for it.
//!
//! `GET /refunds/815` asks whether refund `r_815` was paid (200 with the receipt, or 404);
//! `POST /refunds` with `{"reference": 815, "key": "r_815", "amount": 7025}` pays it (200
//! with the receipt, 409 while another call with the key is in flight). The calling
//! worker names itself in the `worker` header. Each call takes the scenario's latency.

use crate::live::clock::{wall_us, LiveClock};
use crate::live::faults::LiveFaults;
use crate::live::log::EventLog;
use fencesim_model::{Cents, Gateway, GatewayError, IdempotencyKey, Receipt, RefundId, WorkerId};
use fencesim_sim::gateway::GatewayCore;
use fencesim_sim::{CallOutcome, EventKind, GatewayMode, Hop, Latency, LedgerEntry};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
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
    pub clock: LiveClock,
}

struct Shared {
    core: Mutex<GatewayCore>,
    /// When each worker last heard a refund call's answer, in wall-clock microseconds.
    answered: Mutex<std::collections::BTreeMap<WorkerId, u64>>,
    setup: GatewaySetup,
    log: EventLog,
}

/// The running service; stopped when dropped.
pub struct GatewayService {
    pub port: u16,
    server: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// The shortest gap between a worker's calls, in the story, that is a pause rather than
/// the worker's own work.
const PAUSE_MS: u64 = 1_000;

/// Requests answered at once: one per worker is the most a run sends, and a few spare.
const HANDLERS: usize = 6;

impl GatewayService {
    /// Listens on `port` of loopback (0: any free port).
    pub fn start(setup: GatewaySetup, log: EventLog, port: u16) -> Result<GatewayService, String> {
        let server = tiny_http::Server::http(("127.0.0.1", port))
            .map_err(|e| format!("the gateway cannot listen on 127.0.0.1:{port}: {e}"))?;
        let port = server.server_addr().to_ip().map(|a| a.port()).ok_or("the gateway has no port")?;
        let server = Arc::new(server);
        let core = Mutex::new(GatewayCore::new(setup.mode));
        let shared = Arc::new(Shared { core, answered: Mutex::default(), setup, log });
        let threads = (0..HANDLERS)
            .map(|_| {
                let (server, shared) = (server.clone(), shared.clone());
                std::thread::spawn(move || {
                    while let Ok(request) = server.recv() {
                        shared.answer(request);
                    }
                })
            })
            .collect();
        Ok(GatewayService { port, server, shared, threads })
    }

    /// Every movement of money so far.
    pub fn ledger(&self) -> Vec<LedgerEntry> {
        self.shared.core.lock().unwrap_or_else(|p| p.into_inner()).ledger().to_vec()
    }

    pub fn log_path(&self) -> std::path::PathBuf {
        self.shared.log.path().to_owned()
    }
}

impl Drop for GatewayService {
    fn drop(&mut self) {
        for _ in &self.threads {
            self.server.unblock();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn json_response(status: u16, body: &impl Serialize) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let header = tiny_http::Header::from_bytes("content-type", "application/json").expect("a valid header");
    tiny_http::Response::from_data(serde_json::to_vec(body).expect("JSON"))
        .with_status_code(status)
        .with_header(header)
}

impl Shared {
    fn answer(&self, mut request: tiny_http::Request) {
        let worker = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("worker"))
            .and_then(|h| h.value.as_str().parse::<WorkerId>().ok());
        let (status, body) = match (request.method(), worker) {
            (_, None) => (400, serde_json::json!({"error": "no worker header"})),
            (tiny_http::Method::Get, Some(worker)) => self.look_up(worker, request.url()),
            (tiny_http::Method::Post, Some(worker)) => {
                let mut text = String::new();
                let _ = request.as_reader().read_to_string(&mut text);
                match serde_json::from_str::<RefundRequest>(&text) {
                    Ok(call) => self.pay(worker, call),
                    Err(e) => (400, serde_json::json!({"error": e.to_string()})),
                }
            }
            _ => (405, serde_json::json!({"error": "GET or POST"})),
        };
        let _ = request.respond(json_response(status, &body));
    }

    fn look_up(&self, worker: WorkerId, url: &str) -> (u16, serde_json::Value) {
        let Some(refund) = url.strip_prefix("/refunds/").and_then(|n| n.parse().ok()).map(RefundId) else {
            return (404, serde_json::json!({"error": "no such resource"}));
        };
        std::thread::sleep(self.setup.clock.real(self.setup.lookup_latency_ms));
        let found = self.core.lock().unwrap_or_else(|p| p.into_inner()).find(refund);
        self.log.record(EventKind::Lookup { worker, refund, found: found.map(|r| r.gateway_ref) });
        match found {
            Some(r) => {
                (200, serde_json::json!(ReceiptBody { gateway_ref: r.gateway_ref, amount: r.amount.0 }))
            }
            None => (404, serde_json::json!({"error": "no refund with this reference"})),
        }
    }

    /// When a refund call that arrived at `arrived_us` is answered, on the wall clock: its
    /// latency after the worker's previous answer, or at once if the worker's own work
    /// since took longer. The simulation gives a worker's own work no time, and so a row
    /// takes as long in the live story as in the simulated one, losing only what its work
    /// took beyond the latency. A gap of a story second or more is not work but a pause:
    /// the call then takes its whole latency from its arrival.
    fn due_us(&self, worker: WorkerId, refund: RefundId, arrived_us: u64) -> u64 {
        let clock = self.setup.clock;
        let latency_us = clock.real(self.setup.refund_latency.of(refund)).as_micros() as u64;
        let pause_us = clock.real(PAUSE_MS).as_micros() as u64;
        let answered = self.answered.lock().unwrap_or_else(|p| p.into_inner()).get(&worker).copied();
        match answered {
            Some(at) if arrived_us.saturating_sub(at) < pause_us => arrived_us.max(at + latency_us),
            _ => arrived_us + latency_us,
        }
    }

    fn pay(&self, worker: WorkerId, call: RefundRequest) -> (u16, serde_json::Value) {
        let clock = self.setup.clock;
        let refund = RefundId(call.reference);
        let arrived_us = wall_us();
        let paced_us = self.due_us(worker, refund, arrived_us);
        let reply = {
            let mut core = self.core.lock().unwrap_or_else(|p| p.into_inner());
            let now = clock.story_ms(arrived_us);
            let latency = clock.story_ms(paced_us) - now;
            let reply =
                core.refund(refund, IdempotencyKey(call.key), Cents(call.amount), now, latency, false);
            let (amount, gateway_ref) = (Cents(call.amount), reply.receipt.gateway_ref);
            let kind = EventKind::RefundCalled {
                worker,
                epoch: None,
                refund,
                amount,
                outcome: reply.outcome,
                gateway_ref,
                response_lost: false,
            };
            self.log.record(kind);
            reply
        };
        let due = match reply.outcome {
            CallOutcome::Created => paced_us,
            CallOutcome::Replayed | CallOutcome::Conflict => {
                clock.start_us + clock.real(reply.respond_at_ms).as_micros() as u64
            }
        };
        std::thread::sleep(Duration::from_micros(due.saturating_sub(wall_us())));
        // The answer's due time, not when the sleep ended: the machine's lateness in waking
        // is then part of the next gap, and is credited as the worker's own work is.
        self.answered.lock().unwrap_or_else(|p| p.into_inner()).insert(worker, due.max(arrived_us));
        let receipt = ReceiptBody { gateway_ref: reply.receipt.gateway_ref, amount: reply.receipt.amount.0 };
        match reply.outcome {
            CallOutcome::Created | CallOutcome::Replayed => (200, serde_json::json!(receipt)),
            CallOutcome::Conflict => (409, serde_json::json!({"error": "a call with this key is in flight"})),
        }
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
        off_the_runtime(move || Self::receipt(agent.get(&url).set("worker", &worker).call())).await
    }

    async fn refund(
        &self,
        reference: RefundId,
        key: IdempotencyKey,
        amount: Cents,
    ) -> Result<Receipt, GatewayError> {
        self.faults.call(Hop::Gateway).await;
        let url = format!("{}/refunds", self.base);
        let body = RefundRequest { reference: reference.0, key: key.0, amount: amount.0 };
        let (agent, worker) = (self.agent.clone(), self.worker.to_string());
        let paid =
            off_the_runtime(move || Self::receipt(agent.post(&url).set("worker", &worker).send_json(body)));
        paid.await?.ok_or(GatewayError::Unavailable)
    }
}
