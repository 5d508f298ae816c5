//! The world one run happens in: the components' pure cores under one lock, and the few
//! helpers every adapter shares (record an event, send a Redis command, move the queue).
//! The fault engine (`fault_engine.rs`, beside it), the run loop (`run`) and the adapters
//! (`port`) build on it.

mod fault_engine;
mod fault_state;

pub(crate) use fault_state::{CallCounter, Counted, FaultState, RefundCall};

use crate::clock::SimClock;
use crate::config::WorldConfig;
use crate::gateway::GatewayCore;
use crate::history::{Event, EventKind};
use crate::ledger::{EpochLedger, Moment};
use crate::queue::{QueueCore, QueueEvent};
use crate::redis::{Command, Expired, RedisCore, Reply, Value};
use crate::replica::ReplicaLink;
use fencesim_model::{CounterAdmin, RefundRow, SqliteRefunds, SqliteSettlement, WorkerId};
use madsim::runtime::NodeHandle;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

/// Everything that changes during a run, under one lock.
pub(crate) struct State {
    pub events: Vec<Event>,
    pub redis: Vec<RedisCore>,
    /// The first instance's replica, in a replicated world.
    pub replica: Option<ReplicaLink>,
    pub gateway: GatewayCore,
    pub queue: QueueCore,
    pub ledger: EpochLedger,
    pub faults: FaultState,
    /// The arrivals still to come, as indexes into the world's list, the next one last.
    pub arrivals_due: Vec<usize>,
    scratch_expired: Vec<Expired>,
    scratch_queue: Vec<QueueEvent>,
}

pub(crate) struct World {
    pub clock: SimClock,
    pub config: WorldConfig,
    pub state: Mutex<State>,
    pub store: SqliteRefunds,
    /// The second store, in a world that has one.
    pub settlement: Option<SqliteSettlement>,
    /// Whether a restarted Redis runs the deployment's start-up routine.
    pub start_routine: bool,
    /// Counts each worker's requests and says which fire a call trigger.
    pub calls: CallCounter,
    /// Wakes the time-keeping loop when a new deadline or a completion appears.
    pub changed: Notify,
    /// Wakes a worker waiting on the queue.
    pub worker_wake: Vec<Notify>,
    pub nodes: Mutex<Vec<Option<NodeHandle>>>,
    /// Each arrival's rows, in the order the world lists the arrivals.
    pub arrival_rows: Vec<Vec<RefundRow>>,
    /// The order requests were served and timed faults fired in, when the run keeps it.
    pub order: crate::order::Kept,
}

/// Each arrival's rows, looked up once by id.
pub(crate) fn arrival_rows(config: &WorldConfig) -> Vec<Vec<RefundRow>> {
    if config.arrivals.is_empty() {
        return Vec::new();
    }
    let by_id: std::collections::BTreeMap<_, _> = config.rows.iter().map(|row| (row.id, row)).collect();
    let rows_of = |ids: &[fencesim_model::RefundId]| {
        ids.iter().filter_map(|id| by_id.get(id).map(|row| **row)).collect()
    };
    config.arrivals.iter().map(|arrival| rows_of(&arrival.rows)).collect()
}

pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(n) => n.to_string(),
    }
}

/// The arrivals in the order they come (by time, then as listed), the first one last.
fn arrivals_due(config: &WorldConfig) -> Vec<usize> {
    let mut due: Vec<usize> = (0..config.arrivals.len()).collect();
    due.sort_by_key(|&index| std::cmp::Reverse((config.arrivals[index].at_ms, index)));
    due
}

impl State {
    pub fn new(config: &WorldConfig, redis: Vec<RedisCore>) -> State {
        let workers = config.workers as usize;
        let replica = config.replica.map(|r| ReplicaLink::new(&redis[0], r.lag_ms, workers));
        State {
            events: Vec::with_capacity(config.rows.len() * 8 + 64),
            ledger: EpochLedger::new(redis.len(), workers),
            replica,
            redis,
            gateway: GatewayCore::for_refunds(config.gateway_mode, config.rows.len()),
            queue: QueueCore::new(workers, config.visibility_timeout_ms),
            faults: FaultState::new(config),
            arrivals_due: arrivals_due(config),
            scratch_expired: Vec::new(),
            scratch_queue: Vec::new(),
        }
    }

    /// The moment `at_ms` as the next event recorded will tell it.
    pub fn moment(&self, at_ms: u64) -> Moment {
        Moment { at_ms, event: self.events.len() }
    }

    pub fn record(&mut self, at_ms: u64, kind: EventKind) {
        self.events.push(Event { at_ms, kind });
    }

    /// Ends the epochs of the keys `instance` just expired, and records the lease keys.
    fn record_expired(&mut self, instance: u8) {
        let expired = std::mem::take(&mut self.scratch_expired);
        for e in &expired {
            let value = value_text(&e.value);
            let at = self.moment(e.at_ms);
            let epoch = self.ledger.lost(instance, &e.key, &value, at, false);
            // a lease holds its holder's value; a counter, an integer, never expires by itself
            if matches!(e.value, Value::Str(_)) {
                self.record(e.at_ms, EventKind::LeaseExpired { instance, key: e.key.clone(), value, epoch });
            }
        }
        self.scratch_expired = expired;
        self.scratch_expired.clear();
    }

    /// Runs `f` on one Redis core with a list to put the keys it expires in, then records them.
    pub fn expiring<T>(&mut self, instance: u8, f: impl FnOnce(&mut RedisCore, &mut Vec<Expired>) -> T) -> T {
        let mut expired = std::mem::take(&mut self.scratch_expired);
        let out = f(&mut self.redis[instance as usize], &mut expired);
        if let Some(replica) = self.replica.as_mut().filter(|_| instance == 0) {
            for e in &expired {
                replica.sent(&e.key, None, e.at_ms);
            }
        }
        self.scratch_expired = expired;
        self.record_expired(instance);
        out
    }

    /// One command to one Redis instance at `now_ms`; a change it makes to the primary
    /// of a replicated instance goes on its way to the replica.
    pub fn redis(&mut self, instance: u8, cmd: Command<'_>, now_ms: u64) -> Reply {
        let Some(replica) = self.replica.as_mut().filter(|_| instance == 0) else {
            return self.expiring(instance, |core, expired| core.apply(cmd, now_ms, expired));
        };
        let mut expired = std::mem::take(&mut self.scratch_expired);
        let reply = replica.apply(&mut self.redis[0], cmd, now_ms, &mut expired);
        self.scratch_expired = expired;
        self.record_expired(0);
        reply
    }
}

/// The deployment's admin connection to a Redis core: sets counters with no latency.
impl CounterAdmin for RedisCore {
    fn has(&self, key: &str) -> bool {
        self.value_of(key).is_some()
    }

    fn set(&mut self, key: &str, value: i64) {
        self.preset(key, Value::Int(value));
    }
}

impl World {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records queue events and wakes the workers that were handed a job.
    fn record_queue(&self, state: &mut State, now: u64) {
        let events = std::mem::take(&mut state.scratch_queue);
        for e in &events {
            match *e {
                QueueEvent::Delivered { job, worker, receipt, delivery } => {
                    state.record(now, EventKind::JobDelivered { job, worker, receipt, delivery });
                    self.worker_wake[worker.0 as usize].notify_one();
                }
                QueueEvent::VisibilityExpired { job, worker, receipt, at_ms } => {
                    state.record(at_ms, EventKind::VisibilityExpired { job, worker, receipt });
                }
            }
        }
        state.scratch_queue = events;
        state.scratch_queue.clear();
    }

    /// Runs `f` on the queue core, then records what it did and wakes whom it handed a job.
    pub fn with_queue(
        &self,
        state: &mut State,
        now: u64,
        f: impl FnOnce(&mut QueueCore, &mut Vec<QueueEvent>),
    ) {
        let mut events = std::mem::take(&mut state.scratch_queue);
        f(&mut state.queue, &mut events);
        state.scratch_queue = events;
        self.record_queue(state, now);
    }

    /// Writes the refunds that arrive by `now` to the store and queues their jobs.
    pub fn arrive(&self, state: &mut State, now: u64) {
        while let Some(&index) = state.arrivals_due.last() {
            let arrival = &self.config.arrivals[index];
            if arrival.at_ms > now {
                return;
            }
            state.arrivals_due.pop();
            let rows = &self.arrival_rows[index];
            crate::sql_watch::timed(|| self.store.insert(rows))
                .expect("arriving rows have ids of their own (the world was validated)");
            let (job, merchant) = (arrival.job.id, arrival.job.merchant);
            state.record(now, EventKind::RefundsArrived { job, merchant, refunds: rows.len() as u32 });
            state.record(now, EventKind::JobEnqueued { job, merchant });
            self.with_queue(state, now, |queue, out| queue.enqueue(arrival.job, out));
        }
    }

    pub fn node_of(&self, worker: WorkerId) -> Option<NodeHandle> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())[worker.0 as usize].clone()
    }
}
