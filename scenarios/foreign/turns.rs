//! Where a controlled run holds each request of a copy until its turn: the gates of the
//! Redis and database proxies, of the gateway service and of the queue, each through the
//! conductor (`foreign::conductor`). A request arrives, meets the plan's faults (the
//! faults' own gate, `foreign::faults`), waits for its turn at its arrival plus the hop's
//! latency as the seed draws it, and goes on; its answer going back is its leaving. What
//! a copy sends before the story begins (its start-up) goes on as it comes.

use crate::foreign::conductor::{acting_for, acting_for_none, draw, Conductor, Held};
use crate::foreign::faults::{Outside, WireGate};
use crate::foreign::history::housekeeping;
use crate::live::gateway::CallGate;
use crate::live::pgproxy::{PgHooks, PgObserved};
use crate::live::proxy::{Gate, Observed};
use fencesim_model::WorkerId;
use fencesim_sim::Hop;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A hop's latency as the seed draws it for the request `name`: between a half and one
/// and a half of the world's, to the microsecond.
pub fn latency_us(seed: u64, name: &str, world_ms: u64) -> u64 {
    let base = world_ms * 1_000;
    base / 2 + draw(seed, name) % (base + 1)
}

/// A copy's requests on the Redis or the database hop.
pub struct TurnGate {
    conductor: Arc<Conductor>,
    faults: Arc<WireGate>,
    worker: WorkerId,
    hop: Hop,
    latency_ms: u64,
    seed: u64,
    /// Requests counted in (arrived during the story) and not yet answered.
    in_flight: AtomicU32,
    /// A client library's own commands sent during the story and not yet answered.
    housekeeping: AtomicU32,
    sent: AtomicU64,
}

impl TurnGate {
    pub fn new(
        conductor: Arc<Conductor>,
        faults: Arc<WireGate>,
        (worker, hop): (WorkerId, Hop),
        latency_ms: u64,
        seed: u64,
    ) -> TurnGate {
        let (in_flight, housekeeping, sent) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU64::new(0));
        TurnGate { conductor, faults, worker, hop, latency_ms, seed, in_flight, housekeeping, sent }
    }

    fn name(&self, nth: u64) -> String {
        format!("{} {} {nth}", self.worker, hop_word(self.hop))
    }

    /// The request arrives: through the faults, then its turn; `false` when it never goes
    /// on (a crash). A client library's own command (`history::HOUSEKEEPING`) goes on as
    /// it comes, as a start-up's requests do, whenever it is sent.
    fn arrive(&self, housekeeping: bool) -> bool {
        if housekeeping && self.conductor.gated(self.worker) {
            acting_for_none();
            self.housekeeping.fetch_add(1, Ordering::SeqCst);
            // not one of the program's calls (`foreign::faults`, `impl Gate for WireGate`)
            return true;
        }
        if !self.conductor.gated(self.worker) {
            self.conductor.starting_up(self.worker);
            acting_for_none();
            let goes = housekeeping || self.faults.before_request();
            if !goes {
                self.conductor.started_up_reply(self.worker);
            }
            return goes;
        }
        let nth = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let name = self.name(nth);
        self.conductor.arrive(self.worker);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        acting_for(self.worker, name.clone());
        let at = self.conductor.story_us() + latency_us(self.seed, &name, self.latency_ms);
        let goes =
            self.faults.before_request() && self.conductor.hold(Some(self.worker), name, at, Held::Turn);
        if !goes {
            self.left();
        }
        goes
    }

    /// The answer goes back (after the faults at its step): the request leaves.
    fn answered(&self, nth: u64, housekeeping: bool, reply: impl FnOnce()) {
        if housekeeping
            && self
                .housekeeping
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            acting_for_none();
            return reply();
        }
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            acting_for_none();
            reply();
            return self.conductor.started_up_reply(self.worker);
        }
        acting_for(self.worker, format!("{} reply", self.name(nth)));
        reply();
        self.left();
    }

    fn left(&self) {
        let counted = self.in_flight.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if counted.is_ok() {
            self.conductor.leave(self.worker);
        }
    }
}

fn hop_word(hop: Hop) -> &'static str {
    match hop {
        Hop::Redis => "redis",
        Hop::Database => "database",
        Hop::Gateway => "gateway",
        Hop::Settlement => "settlement",
    }
}

impl Gate for TurnGate {
    fn pass(&self, _party: &str, _nth: u64, request: &str) -> bool {
        self.arrive(housekeeping(request))
    }

    fn replied(&self, observed: &Observed) {
        let own = housekeeping(&observed.request);
        self.answered(observed.nth, own, || Gate::replied(&*self.faults, observed));
    }

    /// While the lock server is away (a restart), a new connection waits for it: the copy
    /// waits, and the run's clock goes on to the server's return.
    fn connecting(&self, _party: &str) {
        if !self.conductor.gated(self.worker) || !self.conductor.redis_away() {
            return;
        }
        self.conductor.arrive(self.worker);
        let name = format!("{} connects to Redis", self.worker);
        acting_for(self.worker, name.clone());
        while self.conductor.redis_away() {
            if !self.conductor.hold(Some(self.worker), name.clone(), u64::MAX, Held::Change) {
                break;
            }
        }
        self.conductor.leave(self.worker);
    }

    fn unanswered(&self, _party: &str) {
        match self.in_flight.load(Ordering::SeqCst) {
            0 => self.conductor.started_up_reply(self.worker),
            _ => self.left(),
        }
    }
}

impl PgHooks for TurnGate {
    fn before_send(&self, _party: &str, _nth: u64, _sql: &str, _params: &[Option<String>]) -> bool {
        self.arrive(false)
    }

    fn before_reply(&self, observed: &PgObserved) {
        self.answered(observed.nth, false, || PgHooks::before_reply(&*self.faults, observed));
    }
}

thread_local! {
    /// Whether the request this thread answers was counted in (arrived during the story).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the request the calling thread answers waited for its turn (it arrived after
/// the story began, and not while its copy was starting up).
pub fn in_turn() -> bool {
    COUNTED.with(Cell::get)
}

/// A copy's calls to a service of the run's own (the gateway, the queue): each held until
/// its turn, after the faults' gate where there is one (the gateway's).
pub struct TurnCall {
    conductor: Arc<Conductor>,
    faults: Option<Arc<Outside>>,
    word: &'static str,
    seed: u64,
    sent: Mutex<BTreeMap<WorkerId, u64>>,
}

impl TurnCall {
    pub fn new(
        conductor: Arc<Conductor>,
        faults: Option<Arc<Outside>>,
        word: &'static str,
        seed: u64,
    ) -> TurnCall {
        TurnCall { conductor, faults, word, seed, sent: Mutex::default() }
    }
}

impl CallGate for TurnCall {
    fn pass(&self, worker: WorkerId) -> bool {
        let faults = |worker| self.faults.as_ref().is_none_or(|faults| faults.pass(worker));
        if self.conductor.begun() && self.conductor.restarting(worker) && self.word == "queue" {
            // a copy started again asks for a job: its start-up is over once it is still
            self.conductor.started(worker);
        }
        if !self.conductor.gated(worker) {
            acting_for_none();
            return faults(worker);
        }
        let nth = {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            let n = sent.entry(worker).or_default();
            *n += 1;
            *n
        };
        let name = format!("{worker} {} {nth}", self.word);
        self.conductor.arrive(worker);
        COUNTED.with(|counted| counted.set(true));
        acting_for(worker, name.clone());
        // the service's own latency is its to keep; the turn only orders the calls
        let at = self.conductor.story_us() + draw(self.seed, &name) % 100;
        faults(worker) && self.conductor.hold(Some(worker), name, at, Held::Turn)
    }

    fn answered(&self, worker: WorkerId) {
        if COUNTED.with(|counted| counted.replace(false)) {
            self.conductor.leave(worker);
        }
    }
}
