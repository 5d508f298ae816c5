//! The world one run happens in: the components' cores under one lock, the clients each
//! worker talks through, and the loop that keeps time for everything that happens on its
//! own (key expiry, visibility timeouts, timed faults, resumes and restarts).

use crate::clock::SimClock;
use crate::faults::{Fault, FaultKind, FaultPlan, Trigger};
use crate::gateway::{CallOutcome, GatewayCore, GatewayMode, LedgerEntry};
use crate::history::{Event, EventKind};
use crate::queue::{QueueCore, QueueEvent};
use crate::redis::{Command, Expired, RedisCore, Reply, Value};
use fencesim_model::mechanism::{LeaseKind, TokenPolicy};
use fencesim_model::{
    BackendError, Cents, Clock, Delivery, Gateway, GatewayError, IdempotencyKey, Job, JobQueue, LeaseClient,
    Mechanism, MerchantId, Mutant, Ports, Probe, Receipt, RedisInstance, RefundId, RefundRow, RefundStore,
    SqliteRefunds, Step, StepKind, Token, TokenClient, Worker, WorkerConfig, WorkerId, WriteGuard, WriteKind,
    WriteOutcome,
};
use madsim::runtime::{Handle, NodeHandle, Runtime};
use madsim::task::JoinHandle;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Gateway latency: per refund where the scenario says, else a default.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Latency {
    pub default_ms: u64,
    /// Indexed by refund number; 0 means "use the default".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_refund_ms: Vec<u64>,
}

impl Latency {
    pub fn flat(ms: u64) -> Latency {
        Latency { default_ms: ms, per_refund_ms: Vec::new() }
    }

    pub fn of(&self, refund: RefundId) -> u64 {
        match self.per_refund_ms.get(refund.0 as usize) {
            Some(&ms) if ms > 0 => ms,
            _ => self.default_ms,
        }
    }
}

/// Everything a run needs, as data.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldConfig {
    pub workers: u32,
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    pub gateway_mode: GatewayMode,
    pub refund_latency: Latency,
    pub lookup_latency_ms: u64,
    pub db_latency_ms: u64,
    pub redis_latency_ms: u64,
    pub visibility_timeout_ms: u64,
    pub rows: Vec<RefundRow>,
    pub jobs: Vec<Job>,
    /// Where each merchant's token counter stands when the run starts (`m_4471: 32`).
    pub counters: Vec<(MerchantId, i64)>,
    pub faults: FaultPlan,
    /// How long after the last fault every job must be done.
    pub settle_ms: u64,
    /// A bug switched on for mutation testing; absent in every ordinary run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutant: Option<Mutant>,
}

impl WorldConfig {
    /// Redis instances the lease lives on: five for Redlock, else one.
    pub fn redis_instances(&self) -> usize {
        match self.mechanism.policy().lease {
            LeaseKind::Single => 1,
            LeaseKind::Redlock => 5,
        }
    }

    /// The plan and the parameters make sense together; a reason if not.
    pub fn validate(&self) -> Result<(), String> {
        if self.workers == 0 || self.workers > 26 {
            return Err(format!("workers must be between 1 and 26, got {}", self.workers));
        }
        if self.ttl_ms == 0 {
            return Err("the TTL must be a positive number of milliseconds".to_owned());
        }
        if self.visibility_timeout_ms == 0 {
            return Err("the visibility timeout must be a positive number of milliseconds".to_owned());
        }
        let instances = self.redis_instances() as u8;
        for (i, f) in self.faults.faults.iter().enumerate() {
            let worker = match f.kind {
                FaultKind::Pause { worker, .. }
                | FaultKind::Crash { worker, .. }
                | FaultKind::Redeliver { worker }
                | FaultKind::DuplicateDelivery { worker }
                | FaultKind::DbDelay { worker, .. }
                | FaultKind::GatewayLatency { worker, .. }
                | FaultKind::LostResponse { worker } => Some(worker),
                _ => None,
            };
            let trigger_worker = match f.trigger {
                Trigger::Step { worker, .. } => Some(worker),
                Trigger::At { .. } => None,
            };
            for w in worker.into_iter().chain(trigger_worker) {
                if w.0 >= self.workers {
                    return Err(format!(
                        "fault {i} names worker {w}, but the run has {} workers",
                        self.workers
                    ));
                }
            }
            let instance = match f.kind {
                FaultKind::ExpireLease { instance, .. }
                | FaultKind::RedisClockJump { instance, .. }
                | FaultKind::RedisRestart { instance, .. } => Some(instance),
                _ => None,
            };
            if let Some(n) = instance.filter(|&n| n >= instances) {
                return Err(format!("fault {i} names Redis instance {n}, but the run has {instances}"));
            }
        }
        Ok(())
    }
}

/// A lease Redis granted: the truth the checkers judge by. With Redlock, the lease is a
/// majority of the instances, and the epoch begins when the majority is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub number: u32,
    pub worker: WorkerId,
    pub key: String,
    pub value: String,
    pub granted_at_ms: u64,
    /// When the lease ended without its holder's release (expiry, a restart, a stranger's DEL).
    pub expired_at_ms: Option<u64>,
}

/// What a run leaves behind for the checkers and the reports.
#[derive(Clone, Debug)]
pub struct RunRecord {
    pub seed: u64,
    pub events: Vec<Event>,
    pub final_rows: Vec<RefundRow>,
    pub ledger: Vec<LedgerEntry>,
    pub epochs: Vec<Epoch>,
    /// Every job was acked and every worker was idle when the run ended.
    pub settled: bool,
    pub ended_at_ms: u64,
    /// When the last fault fired, if any did.
    pub last_fault_ms: Option<u64>,
    /// Jobs still open at the end, with their delivery counts.
    pub open_jobs: Vec<(Job, u32)>,
    /// Tasks still alive in the runtime once the run was wound down (should be none).
    pub leaked_tasks: usize,
}

/// A value held on some instances, on its way to (or past) a majority.
struct Grant {
    key: String,
    value: String,
    worker: WorkerId,
    /// One bit per instance that holds it now.
    holders: u8,
    epoch: Option<u32>,
}

/// Faults armed for a worker's next action.
#[derive(Default, Clone, Copy)]
struct Armed {
    db_delay_ms: u64,
    gateway_extra_ms: u64,
    lost_responses: u32,
}

struct State {
    events: Vec<Event>,
    redis: Vec<RedisCore>,
    gateway: GatewayCore,
    queue: QueueCore,
    grants: Vec<Grant>,
    epochs: Vec<Epoch>,
    current_epoch: Vec<Option<u32>>,
    /// How often each worker reached each step: `[worker][step]`.
    step_counts: Vec<[u32; StepKind::COUNT]>,
    armed: Vec<Armed>,
    conflicts_until_ms: u64,
    /// Workers to resume, with when.
    resumes: Vec<(u64, WorkerId)>,
    /// Crashed workers to start again, with when.
    restarts: Vec<(u64, WorkerId)>,
    incarnation: Vec<u32>,
    crashed: Vec<bool>,
    /// Timed faults not fired yet (index into the plan).
    timed: Vec<usize>,
    last_fault_ms: Option<u64>,
    scratch_expired: Vec<Expired>,
    scratch_queue: Vec<QueueEvent>,
}

struct World {
    clock: SimClock,
    config: WorldConfig,
    majority: u32,
    state: Mutex<State>,
    store: SqliteRefunds,
    /// Wakes the time-keeping loop when a new deadline or a completion appears.
    changed: Notify,
    /// Wakes a worker waiting on the queue.
    worker_wake: Vec<Notify>,
    nodes: Mutex<Vec<Option<NodeHandle>>>,
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(n) => n.to_string(),
    }
}

impl State {
    fn record(&mut self, at_ms: u64, kind: EventKind) {
        self.events.push(Event { at_ms, kind });
    }

    fn grant_mut(&mut self, key: &str, value: &str) -> Option<&mut Grant> {
        self.grants.iter_mut().find(|g| g.key == key && g.value == value)
    }

    /// `instance` no longer holds `value` at `key` (expired, lost, deleted by someone):
    /// the epoch ends if its majority is gone.
    fn lose(
        &mut self,
        instance: u8,
        key: &str,
        value: &str,
        at_ms: u64,
        majority: u32,
        by_owner: bool,
    ) -> Option<u32> {
        let grant = self.grant_mut(key, value)?;
        grant.holders &= !(1 << instance);
        let (holders, epoch) = (grant.holders.count_ones(), grant.epoch);
        let number = epoch?;
        if holders < majority && !by_owner {
            let ep = &mut self.epochs[number as usize - 1];
            ep.expired_at_ms.get_or_insert(at_ms);
        }
        Some(number)
    }

    fn record_expired(&mut self, instance: u8, majority: u32) {
        let expired = std::mem::take(&mut self.scratch_expired);
        for e in &expired {
            let value = value_text(&e.value);
            let epoch = self.lose(instance, &e.key, &value, e.at_ms, majority, false);
            if e.key.starts_with("lock:") {
                self.record(e.at_ms, EventKind::LeaseExpired { instance, key: e.key.clone(), value, epoch });
            }
        }
        self.scratch_expired = expired;
        self.scratch_expired.clear();
    }
}

impl World {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn redis(&self, st: &mut State, instance: u8, cmd: Command<'_>) -> Reply {
        let now = self.clock.now_ms();
        let mut expired = std::mem::take(&mut st.scratch_expired);
        let reply = st.redis[instance as usize].apply(cmd, now, &mut expired);
        st.scratch_expired = expired;
        st.record_expired(instance, self.majority);
        reply
    }

    /// Records queue events and wakes the workers that were handed a job.
    fn record_queue(&self, st: &mut State, now: u64) {
        let events = std::mem::take(&mut st.scratch_queue);
        for e in &events {
            match *e {
                QueueEvent::Delivered { job, worker, receipt, delivery } => {
                    st.record(now, EventKind::JobDelivered { job, worker, receipt, delivery });
                    self.worker_wake[worker.0 as usize].notify_one();
                }
                QueueEvent::VisibilityExpired { job, worker, receipt, at_ms } => {
                    st.record(at_ms, EventKind::VisibilityExpired { job, worker, receipt });
                }
            }
        }
        st.scratch_queue = events;
        st.scratch_queue.clear();
    }

    fn with_queue(&self, st: &mut State, now: u64, f: impl FnOnce(&mut QueueCore, &mut Vec<QueueEvent>)) {
        let mut qev = std::mem::take(&mut st.scratch_queue);
        f(&mut st.queue, &mut qev);
        st.scratch_queue = qev;
        self.record_queue(st, now);
    }

    fn node_of(&self, worker: WorkerId) -> Option<NodeHandle> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())[worker.0 as usize].clone()
    }

    /// Fires one fault now. A worker that fires a pause or a crash of its own process must
    /// then yield, so that the fault takes hold right there.
    fn fire(&self, st: &mut State, fault: &Fault) {
        let now = self.clock.now_ms();
        st.last_fault_ms = Some(now);
        st.record(now, EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
        match fault.kind {
            FaultKind::Pause { worker, duration_ms } => {
                if st.crashed[worker.0 as usize] || st.resumes.iter().any(|r| r.1 == worker) {
                    return;
                }
                if let Some(node) = self.node_of(worker) {
                    Handle::current().pause(node.id());
                    st.resumes.push((now + duration_ms, worker));
                }
            }
            FaultKind::Crash { worker, restart_after_ms } => {
                if st.crashed[worker.0 as usize] {
                    return;
                }
                if let Some(node) = self.node_of(worker) {
                    Handle::current().kill(node.id());
                }
                st.crashed[worker.0 as usize] = true;
                st.resumes.retain(|r| r.1 != worker);
                st.current_epoch[worker.0 as usize] = None;
                st.restarts.push((now + restart_after_ms, worker));
            }
            FaultKind::ExpireLease { instance, merchant } => {
                let key = format!("lock:settle:{merchant}");
                if let Some(e) = st.redis[instance as usize].expire_now(&key, now) {
                    st.scratch_expired.push(e);
                    st.record_expired(instance, self.majority);
                }
            }
            FaultKind::RedisClockJump { instance, by_ms } => {
                st.redis[instance as usize].jump_clock(by_ms as i64);
                let mut expired = std::mem::take(&mut st.scratch_expired);
                st.redis[instance as usize].expire_due(now, &mut expired);
                st.scratch_expired = expired;
                st.record_expired(instance, self.majority);
            }
            FaultKind::RedisRestart { instance, persistence } => {
                let before: Vec<(String, String)> = st
                    .grants
                    .iter()
                    .filter(|g| g.holders & (1 << instance) != 0)
                    .map(|g| (g.key.clone(), g.value.clone()))
                    .collect();
                let lost = st.redis[instance as usize].restart(persistence, now);
                for (key, value) in before {
                    let still = st.redis[instance as usize].value_of(&key).map(value_text);
                    if still.as_deref() != Some(value.as_str()) {
                        st.lose(instance, &key, &value, now, self.majority, false);
                    }
                }
                st.record(now, EventKind::RedisRestarted { instance, lost });
                let reseed = self.config.mutant != Some(Mutant::NoReseedAfterRestart);
                if self.config.mechanism.policy().seed_counter_on_restart && instance == 0 && reseed {
                    self.seed_counters(st, now);
                }
            }
            FaultKind::Redeliver { worker } => self.with_queue(st, now, |q, out| {
                q.redeliver_from(worker, now, out);
            }),
            FaultKind::DuplicateDelivery { worker } => self.with_queue(st, now, |q, out| {
                q.duplicate_from(worker, out);
            }),
            FaultKind::DbDelay { worker, delay_ms } => st.armed[worker.0 as usize].db_delay_ms += delay_ms,
            FaultKind::GatewayLatency { worker, extra_ms } => {
                st.armed[worker.0 as usize].gateway_extra_ms += extra_ms
            }
            FaultKind::LostResponse { worker } => st.armed[worker.0 as usize].lost_responses += 1,
            FaultKind::GatewayConflicts { for_ms } => {
                st.conflicts_until_ms = st.conflicts_until_ms.max(now + for_ms)
            }
        }
        self.changed.notify_one();
    }

    /// `fenced-seeded`: when Redis starts, each merchant's counter is set from `MAX(fence)`.
    fn seed_counters(&self, st: &mut State, now: u64) {
        let merchants: std::collections::BTreeSet<MerchantId> =
            self.config.jobs.iter().map(|j| j.merchant).collect();
        for merchant in merchants {
            let key = format!("fence:settle:{merchant}");
            if st.redis[0].value_of(&key).is_some() {
                continue;
            }
            let value = self.store.max_fence(merchant).unwrap_or(0);
            st.redis[0].preset(&key, Value::Int(value));
            st.record(now, EventKind::CounterSeeded { instance: 0, key, value });
        }
    }

    /// One pass of everything due at `now`; returns the workers to start again.
    fn tick(&self, now: u64) -> Vec<WorkerId> {
        let mut st = self.lock();
        let st = &mut *st;
        let plan = &self.config.faults.faults;
        let mut due: Vec<usize> = Vec::new();
        st.timed.retain(|&i| match plan[i].trigger {
            Trigger::At { at_ms } if at_ms <= now => {
                due.push(i);
                false
            }
            _ => true,
        });
        due.sort_unstable();
        for i in due {
            self.fire(st, &plan[i]);
        }
        let handle = Handle::current();
        let mut resumed = Vec::new();
        st.resumes.retain(|&(at, worker)| {
            if at <= now {
                resumed.push((at, worker));
                false
            } else {
                true
            }
        });
        for (at, worker) in resumed {
            if let Some(node) = self.node_of(worker) {
                handle.resume(node.id());
            }
            st.record(at, EventKind::Resumed { worker });
        }
        let mut restart = Vec::new();
        st.restarts.retain(|&(at, worker)| {
            if at <= now {
                restart.push(worker);
                false
            } else {
                true
            }
        });
        for i in 0..st.redis.len() {
            let mut expired = std::mem::take(&mut st.scratch_expired);
            st.redis[i].expire_due(now, &mut expired);
            st.scratch_expired = expired;
            st.record_expired(i as u8, self.majority);
        }
        self.with_queue(st, now, |q, out| q.tick(now, out));
        restart
    }

    fn next_deadline(&self) -> Option<u64> {
        let st = self.lock();
        let plan = &self.config.faults.faults;
        let timed = st.timed.iter().filter_map(|&i| match plan[i].trigger {
            Trigger::At { at_ms } => Some(at_ms),
            Trigger::Step { .. } => None,
        });
        let resumes = st.resumes.iter().map(|r| r.0).chain(st.restarts.iter().map(|r| r.0));
        let expiries = st.redis.iter().filter_map(|r| r.next_expiry());
        timed.chain(resumes).chain(expiries).chain(st.queue.next_deadline()).min()
    }

    fn settled(&self) -> bool {
        let st = self.lock();
        st.queue.all_done()
            && st.resumes.is_empty()
            && st.restarts.is_empty()
            && (0..self.config.workers)
                .all(|w| st.queue.is_idle(WorkerId(w)) && !st.queue.has_assigned(WorkerId(w)))
    }
}

/// A worker's connection to one Redis instance.
#[derive(Clone)]
pub struct RedisClient {
    world: Arc<World>,
    worker: WorkerId,
    instance: u8,
}

impl RedisClient {
    async fn call<T>(&self, f: impl FnOnce(&World, &mut State, u64) -> T) -> T {
        let w = &self.world;
        w.clock.sleep_ms(w.config.redis_latency_ms).await;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        f(w, &mut st, now)
    }
}

impl RedisInstance for RedisClient {
    async fn set_nx_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| match w.redis(st, instance, Command::SetNxPx { key, value, ttl_ms }) {
            Reply::Ok => {
                // A value no instance holds any more starts a new grant (a lock value that
                // is not unique comes back for another worker).
                st.grants.retain(|g| !(g.key == key && g.value == value && g.holders == 0));
                if st.grant_mut(key, value).is_none() {
                    st.grants.push(Grant {
                        key: key.to_owned(),
                        value: value.to_owned(),
                        worker,
                        holders: 0,
                        epoch: None,
                    });
                }
                let grant = st.grant_mut(key, value).expect("just inserted");
                grant.holders |= 1 << instance;
                let reached = grant.epoch.is_none() && grant.holders.count_ones() >= w.majority;
                let mut epoch = None;
                if reached {
                    let number = st.epochs.len() as u32 + 1;
                    st.grant_mut(key, value).expect("present").epoch = Some(number);
                    st.epochs.push(Epoch {
                        number,
                        worker,
                        key: key.to_owned(),
                        value: value.to_owned(),
                        granted_at_ms: now,
                        expired_at_ms: None,
                    });
                    st.current_epoch[worker.0 as usize] = Some(number);
                    epoch = Some(number);
                }
                let kind = EventKind::LeaseGranted {
                    worker,
                    instance,
                    key: key.to_owned(),
                    value: value.to_owned(),
                    ttl_ms,
                    epoch,
                };
                st.record(now, kind);
                w.changed.notify_one();
                Ok(true)
            }
            Reply::Nil => {
                st.record(now, EventKind::LeaseRefused { worker, instance, key: key.to_owned() });
                Ok(false)
            }
            other => Err(BackendError(format!("SET {key} NX PX {ttl_ms}: {other:?}"))),
        })
        .await
    }

    async fn get(&self, key: &str) -> Result<Option<String>, BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| {
            let holder = match w.redis(st, instance, Command::Get { key }) {
                Reply::Bulk(s) => Some(s),
                _ => None,
            };
            st.record(
                now,
                EventKind::LeaseRead { worker, instance, key: key.to_owned(), holder: holder.clone() },
            );
            Ok(holder)
        })
        .await
    }

    async fn del(&self, key: &str) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| {
            let holder = st.redis[instance as usize].value_of(key).map(value_text);
            let deleted = w.redis(st, instance, Command::Del { key }) == Reply::Int(1);
            let holder = holder.filter(|_| deleted);
            if let Some(value) = &holder {
                let own = st.grant_mut(key, value).is_some_and(|g| g.worker == worker);
                st.lose(instance, key, value, now, w.majority, own);
            }
            st.record(now, EventKind::LeaseDeleted { worker, instance, key: key.to_owned(), holder });
            Ok(deleted)
        })
        .await
    }

    async fn incr(&self, key: &str) -> Result<i64, BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| match w.redis(st, instance, Command::Incr { key }) {
            Reply::Int(n) => {
                st.record(now, EventKind::TokenIssued { worker, key: key.to_owned(), token: Token(n) });
                Ok(n)
            }
            other => Err(BackendError(format!("INCR {key}: {other:?}"))),
        })
        .await
    }

    async fn compare_and_delete(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| {
            let deleted = w.redis(st, instance, Command::CompareAndDelete { key, value }) == Reply::Int(1);
            if deleted {
                st.lose(instance, key, value, now, w.majority, true);
            }
            let kind = EventKind::LeaseReleased {
                worker,
                instance,
                key: key.to_owned(),
                value: value.to_owned(),
                deleted,
            };
            st.record(now, kind);
            Ok(deleted)
        })
        .await
    }

    async fn set_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<(), BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| {
            w.redis(st, instance, Command::SetPx { key, value, ttl_ms });
            let kind = EventKind::LeaseSet {
                worker,
                instance,
                key: key.to_owned(),
                value: value.to_owned(),
                ttl_ms,
            };
            st.record(now, kind);
            w.changed.notify_one();
            Ok(())
        })
        .await
    }

    async fn compare_and_extend(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker, self.instance);
        self.call(|w, st, now| {
            let extended =
                w.redis(st, instance, Command::CompareAndExtend { key, value, ttl_ms }) == Reply::Int(1);
            st.record(now, EventKind::LeaseExtended { worker, instance, key: key.to_owned(), extended });
            w.changed.notify_one();
            Ok(extended)
        })
        .await
    }
}

/// A worker's connection to everything else.
#[derive(Clone)]
pub struct Client {
    world: Arc<World>,
    worker: WorkerId,
}

impl Clock for Client {
    fn now_ms(&self) -> u64 {
        self.world.clock.now_ms()
    }

    async fn sleep_ms(&self, ms: u64) {
        self.world.clock.sleep_ms(ms).await
    }
}

impl Client {
    /// Waits out the database latency and any delay a fault armed for this request.
    async fn to_database(&self) {
        let w = &self.world;
        let delay = std::mem::take(&mut w.lock().armed[self.worker.0 as usize].db_delay_ms);
        w.clock.sleep_ms(w.config.db_latency_ms + delay).await;
    }

    async fn store_write(
        &self,
        write: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<WriteOutcome, BackendError> {
        let w = &self.world;
        self.to_database().await;
        let outcome = w.store.write(write, refund, guard).map_err(|e| BackendError(e.to_string()))?;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        let epoch = st.current_epoch[self.worker.0 as usize];
        let kind = EventKind::Write {
            worker: self.worker,
            epoch,
            write,
            refund,
            token: guard.token(),
            rows: outcome.rows_updated,
            after: outcome.after,
        };
        st.record(now, kind);
        Ok(outcome)
    }
}

impl RefundStore for Client {
    async fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, BackendError> {
        self.to_database().await;
        self.world.store.open_refunds(merchant).map_err(|e| BackendError(e.to_string()))
    }

    async fn claim(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.store_write(WriteKind::Claim, refund, guard).await
    }

    async fn confirm(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.store_write(WriteKind::Confirm, refund, guard).await
    }

    async fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        self.to_database().await;
        let w = &self.world;
        let token = w.store.next_sequence_token(merchant).map_err(|e| BackendError(e.to_string()))?;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        st.record(
            now,
            EventKind::TokenIssued { worker: self.worker, key: format!("fence_seq:{merchant}"), token },
        );
        Ok(token)
    }
}

impl Gateway for Client {
    async fn find(&self, reference: RefundId) -> Result<Option<Receipt>, GatewayError> {
        let w = &self.world;
        w.clock.sleep_ms(w.config.lookup_latency_ms).await;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        let found = st.gateway.find(reference);
        st.record(
            now,
            EventKind::Lookup { worker: self.worker, refund: reference, found: found.map(|r| r.gateway_ref) },
        );
        Ok(found)
    }

    async fn refund(&self, key: IdempotencyKey, amount: Cents) -> Result<Receipt, GatewayError> {
        let w = &self.world;
        let (respond_at, reply) = {
            let mut st = w.lock();
            let now = w.clock.now_ms();
            let armed = std::mem::take(&mut st.armed[self.worker.0 as usize].gateway_extra_ms);
            let latency = w.config.refund_latency.of(key.refund) + armed;
            let refuse = now < st.conflicts_until_ms;
            let reply = st.gateway.refund(key, amount, now, latency, refuse);
            let lost = reply.outcome != CallOutcome::Conflict && {
                let a = &mut st.armed[self.worker.0 as usize];
                let lost = a.lost_responses > 0;
                a.lost_responses = a.lost_responses.saturating_sub(1);
                lost
            };
            let epoch = st.current_epoch[self.worker.0 as usize];
            let kind = EventKind::RefundCalled {
                worker: self.worker,
                epoch,
                refund: key.refund,
                amount,
                outcome: reply.outcome,
                gateway_ref: reply.receipt.gateway_ref,
                response_lost: lost,
            };
            st.record(now, kind);
            let result = match (reply.outcome, lost) {
                (CallOutcome::Conflict, _) => Err(GatewayError::Conflict),
                (_, true) => Err(GatewayError::Unavailable("the response was lost".to_owned())),
                _ => Ok(reply.receipt),
            };
            (reply.respond_at_ms, result)
        };
        w.clock.sleep_until_ms(respond_at).await;
        reply
    }
}

impl JobQueue for Client {
    async fn receive(&self) -> Option<Delivery> {
        let w = &self.world;
        loop {
            {
                let mut st = w.lock();
                if st.queue.is_closed() {
                    return None;
                }
                let now = w.clock.now_ms();
                let mut got = None;
                w.with_queue(&mut st, now, |q, out| got = q.receive(self.worker, now, out));
                if got.is_some() {
                    return got;
                }
            }
            w.changed.notify_one();
            w.worker_wake[self.worker.0 as usize].notified().await;
        }
    }

    async fn ack(&self, delivery: Delivery) -> bool {
        let w = &self.world;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        let accepted = st.queue.ack(delivery);
        let kind = EventKind::JobAcked {
            job: delivery.job.id,
            worker: self.worker,
            receipt: delivery.receipt,
            accepted,
        };
        st.record(now, kind);
        w.changed.notify_one();
        accepted
    }
}

impl Probe for Client {
    async fn reached(&self, step: Step) {
        let w = &self.world;
        let mut stop_here = false;
        {
            let mut st = w.lock();
            let now = w.clock.now_ms();
            let kind = step.kind();
            // The per-row rhythm (claimed, paid, confirmed) is already in the store's and
            // the gateway's events; the worker's own marks there would only double the
            // history. They still count, as trigger points.
            if !matches!(kind, StepKind::AfterClaim | StepKind::AfterGatewayCall | StepKind::AfterConfirm) {
                st.record(now, EventKind::Step { worker: self.worker, step });
            }
            let count = {
                let c = &mut st.step_counts[self.worker.0 as usize][kind as usize];
                *c += 1;
                *c
            };
            for fault in &w.config.faults.faults {
                if fault.trigger == (Trigger::Step { worker: self.worker, step: kind, nth: count }) {
                    w.fire(&mut st, fault);
                    stop_here |= matches!(fault.kind,
                        FaultKind::Pause { worker, .. } | FaultKind::Crash { worker, .. } if worker == self.worker);
                }
            }
        }
        if stop_here {
            // The node is marked paused or killed; yielding parks (or drops) this task
            // right here, with every other task of the process.
            madsim::task::yield_now().await;
        }
    }
}

type SimWorker = Worker<
    LeaseClient<RedisClient, Client>,
    TokenClient<RedisClient, Client>,
    Client,
    Client,
    Client,
    Client,
    Client,
>;

fn new_worker(world: &Arc<World>, id: WorkerId, incarnation: u32) -> SimWorker {
    let client = Client { world: world.clone(), worker: id };
    let redis = |instance: u8| RedisClient { world: world.clone(), worker: id, instance };
    let policy = world.config.mechanism.policy();
    let lease = LeaseClient {
        kind: policy.lease,
        instances: (0..world.config.redis_instances() as u8).map(redis).collect(),
        clock: client.clone(),
        recreate_missing: world.config.mutant == Some(Mutant::ExtendRecreates),
    };
    let tokens = match policy.tokens {
        TokenPolicy::DbSequence => TokenClient::Database(client.clone()),
        TokenPolicy::None | TokenPolicy::RedisIncr => TokenClient::Redis(redis(0)),
    };
    let config = WorkerConfig {
        id,
        mechanism: world.config.mechanism,
        ttl_ms: world.config.ttl_ms,
        mutant: world.config.mutant,
    };
    let ports = Ports {
        lease,
        tokens,
        store: client.clone(),
        gateway: client.clone(),
        queue: client.clone(),
        probe: client.clone(),
        clock: client,
    };
    Worker::new(config, ports, incarnation)
}

/// Starts a worker process on a node of its own.
fn spawn_worker(world: &Arc<World>, id: WorkerId, incarnation: u32) -> JoinHandle<()> {
    let name = if incarnation > 1 { format!("worker-{id}.{incarnation}") } else { format!("worker-{id}") };
    let node = Handle::current().create_node().name(name).build();
    world.nodes.lock().unwrap_or_else(|p| p.into_inner())[id.0 as usize] = Some(node.clone());
    node.spawn(new_worker(world, id, incarnation).run())
}

/// Runs one world to its end in a fresh runtime seeded with `seed`.
pub fn run_world(config: &WorldConfig, seed: u64) -> Result<RunRecord, String> {
    config.validate()?;
    settle_process_randomness();
    let store = SqliteRefunds::open_in_memory()
        .map_err(|e| format!("cannot open the refund store: {e}"))?
        .with_mutant(config.mutant);
    store.insert(&config.rows).map_err(|e| format!("cannot load the refund rows: {e}"))?;
    if config.mechanism.policy().tokens == TokenPolicy::DbSequence {
        for &(merchant, value) in &config.counters {
            store
                .set_sequence(merchant, value)
                .map_err(|e| format!("cannot seed the token sequence: {e}"))?;
        }
    }
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let config = config.clone();
    Ok(rt.block_on(drive(config, store, seed)))
}

/// The first hash map the simulator builds in a process draws the process's hashing seed
/// from `getrandom`; inside a run, madsim answers that call from the run's own random
/// stream, so the very first run of a process would draw once more than every later run
/// and schedule differently. Drawing that seed here, outside any run, keeps every run of
/// a seed identical, first or not.
fn settle_process_randomness() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ahash::RandomState::new();
    });
}

async fn drive(config: WorldConfig, store: SqliteRefunds, seed: u64) -> RunRecord {
    let workers = config.workers as usize;
    let mut redis = vec![RedisCore::new(); config.redis_instances()];
    if config.mechanism.policy().tokens == TokenPolicy::RedisIncr {
        for &(merchant, value) in &config.counters {
            redis[0].preset(&format!("fence:settle:{merchant}"), Value::Int(value));
        }
    }
    let timed = config
        .faults
        .faults
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.trigger, Trigger::At { .. }))
        .map(|(i, _)| i)
        .collect();
    let state = State {
        events: Vec::with_capacity(config.rows.len() * 8 + 64),
        redis,
        gateway: GatewayCore::new(config.gateway_mode),
        queue: QueueCore::new(workers, config.visibility_timeout_ms),
        grants: Vec::new(),
        epochs: Vec::new(),
        current_epoch: vec![None; workers],
        step_counts: vec![[0; StepKind::COUNT]; workers],
        armed: vec![Armed::default(); workers],
        conflicts_until_ms: 0,
        resumes: Vec::new(),
        restarts: Vec::new(),
        incarnation: vec![1; workers],
        crashed: vec![false; workers],
        timed,
        last_fault_ms: None,
        scratch_expired: Vec::new(),
        scratch_queue: Vec::new(),
    };
    let majority = (config.redis_instances() / 2 + 1) as u32;
    let world = Arc::new(World {
        clock: SimClock::start(),
        store: store.clone(),
        state: Mutex::new(state),
        changed: Notify::new(),
        worker_wake: (0..workers).map(|_| Notify::new()).collect(),
        nodes: Mutex::new(vec![None; workers]),
        majority,
        config,
    });

    {
        let mut st = world.lock();
        for job in &world.config.jobs {
            st.record(0, EventKind::JobEnqueued { job: job.id, merchant: job.merchant });
            world.with_queue(&mut st, 0, |q, out| q.enqueue(*job, out));
        }
    }

    let mut joins: Vec<Option<JoinHandle<()>>> =
        (0..workers).map(|w| Some(spawn_worker(&world, WorkerId(w as u32), 1))).collect();

    // Keep time for everything that happens on its own, until the run settles or the
    // deadline passes: `settle_ms` after the last fault (timed faults still to come keep
    // the run going).
    let mut settled = false;
    loop {
        let now = world.clock.now_ms();
        for worker in world.tick(now) {
            let incarnation = {
                let mut st = world.lock();
                st.crashed[worker.0 as usize] = false;
                st.incarnation[worker.0 as usize] += 1;
                let n = st.incarnation[worker.0 as usize];
                st.record(now, EventKind::Restarted { worker, incarnation: n });
                n
            };
            joins[worker.0 as usize] = Some(spawn_worker(&world, worker, incarnation));
        }
        if world.settled() {
            settled = true;
            break;
        }
        let deadline = {
            let st = world.lock();
            if st.timed.is_empty() && st.restarts.is_empty() && st.resumes.is_empty() {
                st.last_fault_ms.unwrap_or(0) + world.config.settle_ms
            } else {
                u64::MAX
            }
        };
        if now >= deadline {
            break;
        }
        let next = world.next_deadline().map_or(deadline, |d| d.min(deadline)).max(now + 1);
        let wake = world.clock.instant_of(next);
        let _ = madsim::time::timeout(
            wake.duration_since(madsim::time::Instant::now()),
            world.changed.notified(),
        )
        .await;
    }

    // Wind down: close the queue, stop whoever is still mid-batch, let every task end.
    let ended_at_ms = world.clock.now_ms();
    world.lock().queue.close();
    let handle = Handle::current();
    for w in 0..workers {
        if let Some(node) = world.node_of(WorkerId(w as u32)) {
            if !settled {
                handle.kill(node.id());
            }
        }
        world.worker_wake[w].notify_one();
    }
    if settled {
        for join in joins.iter_mut().filter_map(Option::take) {
            let _ = join.await;
        }
    }
    madsim::time::sleep(std::time::Duration::from_millis(1)).await;
    drop(joins);
    world.nodes.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let leaked_tasks = handle.metrics().num_tasks().saturating_sub(1);

    let final_rows = store.all_rows().expect("the refund store can be read at the end of a run");
    let mut st = world.lock();
    RunRecord {
        seed,
        events: std::mem::take(&mut st.events),
        final_rows,
        ledger: st.gateway.ledger().to_vec(),
        epochs: std::mem::take(&mut st.epochs),
        settled,
        ended_at_ms,
        last_fault_ms: st.last_fault_ms,
        open_jobs: st.queue.open_jobs().collect(),
        leaked_tasks,
    }
}
