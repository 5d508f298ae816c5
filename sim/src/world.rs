//! The world one run happens in: the components' cores under one lock, the clients each
//! worker talks through, and the loop that keeps time for everything that happens on its
//! own (key expiry, visibility timeouts, timed faults, resumes).

use crate::clock::SimClock;
use crate::faults::{FaultKind, FaultPlan, Trigger};
use crate::gateway::{GatewayCore, GatewayMode, LedgerEntry};
use crate::history::{Event, EventKind};
use crate::queue::{QueueCore, QueueEvent};
use crate::redis::{Command, Expired, RedisCore, Reply, Value};
use fencesim_model::{
    BackendError, Cents, Delivery, Gateway, GatewayError, Job, JobQueue, LeaseStore, Mechanism, MerchantId,
    Probe, Receipt, RefundId, RefundRow, RefundStore, SqliteRefunds, Step, StepKind, Token, TokenSource,
    Worker, WorkerConfig, WorkerId, WriteGuard, WriteKind, WriteOutcome,
};
use madsim::runtime::{Handle, Runtime};
use madsim::task::NodeId;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;

/// Gateway latency: per refund where the scenario says, else a default.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Latency {
    pub default_ms: u64,
    /// Indexed by refund number; 0 means "use the default".
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
#[derive(Clone, Debug)]
pub struct WorldConfig {
    pub workers: u32,
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    pub gateway_mode: GatewayMode,
    pub refund_latency: Latency,
    pub lookup_latency_ms: u64,
    pub db_latency_ms: u64,
    pub visibility_timeout_ms: u64,
    pub rows: Vec<RefundRow>,
    pub jobs: Vec<Job>,
    /// Integer keys Redis holds when the run starts (`fence:settle:m_4471 = 32`).
    pub redis_counters: Vec<(String, i64)>,
    pub faults: FaultPlan,
    /// How long after the last fault every job must be done.
    pub settle_ms: u64,
}

/// A lease Redis granted: the truth the checkers judge by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub number: u32,
    pub worker: WorkerId,
    pub key: String,
    pub value: String,
    pub granted_at_ms: u64,
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
    /// When the last fault fired (or was due), if any.
    pub last_fault_ms: Option<u64>,
    /// Jobs still open at the end, with their delivery counts.
    pub open_jobs: Vec<(Job, u32)>,
    /// Tasks still alive in the runtime once the run was wound down (should be none).
    pub leaked_tasks: usize,
}

struct State {
    events: Vec<Event>,
    redis: RedisCore,
    gateway: GatewayCore,
    queue: QueueCore,
    epochs: Vec<Epoch>,
    current_epoch: Vec<Option<u32>>,
    /// How often each worker reached each step: `[worker][step]`.
    step_counts: Vec<[u32; StepKind::COUNT]>,
    /// Workers to resume, with when.
    resumes: Vec<(u64, WorkerId)>,
    /// Timed faults not fired yet (index into the plan).
    timed: Vec<usize>,
    last_fault_ms: Option<u64>,
    scratch_expired: Vec<Expired>,
    scratch_queue: Vec<QueueEvent>,
}

struct World {
    clock: SimClock,
    config: WorldConfig,
    state: Mutex<State>,
    store: SqliteRefunds,
    /// Wakes the time-keeping loop when a new deadline or a completion appears.
    changed: Notify,
    /// Wakes a worker waiting on the queue.
    worker_wake: Vec<Notify>,
    nodes: OnceLock<Vec<NodeId>>,
}

impl State {
    fn record(&mut self, at_ms: u64, kind: EventKind) {
        self.events.push(Event { at_ms, kind });
    }

    fn record_expired(&mut self) {
        let expired = std::mem::take(&mut self.scratch_expired);
        for e in &expired {
            let value = match &e.value {
                Value::Str(s) => s.clone(),
                Value::Int(n) => n.to_string(),
            };
            let epoch = self.epochs.iter_mut().find(|ep| ep.key == e.key && ep.value == value);
            let number = epoch.map(|ep| {
                ep.expired_at_ms = Some(e.at_ms);
                ep.number
            });
            self.record(e.at_ms, EventKind::LeaseExpired { key: e.key.clone(), value, epoch: number });
        }
        self.scratch_expired = expired;
        self.scratch_expired.clear();
    }
}

impl World {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn redis(&self, st: &mut State, cmd: Command<'_>) -> Reply {
        let now = self.clock.now_ms();
        let mut expired = std::mem::take(&mut st.scratch_expired);
        let reply = st.redis.apply(cmd, now, &mut expired);
        st.scratch_expired = expired;
        st.record_expired();
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

    fn node_of(&self, worker: WorkerId) -> NodeId {
        self.nodes.get().expect("nodes are created before workers run")[worker.0 as usize]
    }

    /// Freezes a worker's whole process now and schedules its resume.
    fn pause(&self, st: &mut State, worker: WorkerId, duration_ms: u64) {
        let now = self.clock.now_ms();
        st.record(now, EventKind::Paused { worker, duration_ms });
        st.last_fault_ms = Some(now);
        st.resumes.push((now + duration_ms, worker));
        Handle::current().pause(self.node_of(worker));
        self.changed.notify_one();
    }

    /// One pass of everything due at `now`.
    fn tick(&self, now: u64) {
        let mut st = self.lock();
        let st = &mut *st;
        // timed faults
        let plan = &self.config.faults.faults;
        let mut i = 0;
        while i < st.timed.len() {
            let fault = &plan[st.timed[i]];
            match (fault.trigger, &fault.kind) {
                (Trigger::At { at_ms }, FaultKind::Pause { worker, duration_ms }) if at_ms <= now => {
                    st.timed.swap_remove(i);
                    self.pause(st, *worker, *duration_ms);
                }
                _ => i += 1,
            }
        }
        // resumes
        let mut j = 0;
        while j < st.resumes.len() {
            let (at, worker) = st.resumes[j];
            if at <= now {
                st.resumes.remove(j);
                Handle::current().resume(self.node_of(worker));
                st.record(at, EventKind::Resumed { worker });
            } else {
                j += 1;
            }
        }
        // key expiry
        let mut expired = std::mem::take(&mut st.scratch_expired);
        st.redis.expire_due(now, &mut expired);
        st.scratch_expired = expired;
        st.record_expired();
        // visibility timeouts and deliveries
        let mut qev = std::mem::take(&mut st.scratch_queue);
        st.queue.tick(now, &mut qev);
        st.scratch_queue = qev;
        self.record_queue(st, now);
    }

    fn next_deadline(&self) -> Option<u64> {
        let st = self.lock();
        let plan = &self.config.faults.faults;
        let timed = st.timed.iter().filter_map(|&i| match plan[i].trigger {
            Trigger::At { at_ms } => Some(at_ms),
            Trigger::Step { .. } => None,
        });
        let resumes = st.resumes.iter().map(|r| r.0);
        timed.chain(resumes).chain(st.redis.next_expiry()).chain(st.queue.next_deadline()).min()
    }

    fn settled(&self) -> bool {
        let st = self.lock();
        st.queue.all_done()
            && st.resumes.is_empty()
            && (0..self.config.workers)
                .all(|w| st.queue.is_idle(WorkerId(w)) && !st.queue.has_assigned(WorkerId(w)))
    }

    /// The latest time a planned fault can fire, if every one fires on time.
    fn planned_fault_horizon(&self) -> u64 {
        self.config
            .faults
            .faults
            .iter()
            .map(|f| match (f.trigger, &f.kind) {
                (Trigger::At { at_ms }, FaultKind::Pause { duration_ms, .. }) => at_ms + duration_ms,
                (Trigger::Step { .. }, FaultKind::Pause { duration_ms, .. }) => *duration_ms,
            })
            .max()
            .unwrap_or(0)
    }
}

/// A worker's connection to the world.
#[derive(Clone)]
pub struct Client {
    world: Arc<World>,
    worker: WorkerId,
}

impl LeaseStore for Client {
    async fn acquire(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let w = &self.world;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        let reply = w.redis(&mut st, Command::SetNxPx { key, value, ttl_ms });
        match reply {
            Reply::Ok => {
                let number = st.epochs.len() as u32 + 1;
                st.epochs.push(Epoch {
                    number,
                    worker: self.worker,
                    key: key.to_owned(),
                    value: value.to_owned(),
                    granted_at_ms: now,
                    expired_at_ms: None,
                });
                st.current_epoch[self.worker.0 as usize] = Some(number);
                let kind = EventKind::LeaseGranted {
                    worker: self.worker,
                    key: key.to_owned(),
                    value: value.to_owned(),
                    ttl_ms,
                    epoch: number,
                };
                st.record(now, kind);
                w.changed.notify_one();
                Ok(true)
            }
            Reply::Nil => {
                st.record(now, EventKind::LeaseRefused { worker: self.worker, key: key.to_owned() });
                Ok(false)
            }
            other => Err(BackendError(format!("SET {key} NX PX {ttl_ms}: {other:?}"))),
        }
    }

    async fn release(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let w = &self.world;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        let deleted = w.redis(&mut st, Command::CompareAndDelete { key, value }) == Reply::Int(1);
        let kind = EventKind::LeaseReleased {
            worker: self.worker,
            key: key.to_owned(),
            value: value.to_owned(),
            deleted,
        };
        st.record(now, kind);
        Ok(deleted)
    }
}

impl TokenSource for Client {
    async fn next_token(&self, key: &str) -> Result<Token, BackendError> {
        let w = &self.world;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        match w.redis(&mut st, Command::Incr { key }) {
            Reply::Int(n) => {
                st.record(
                    now,
                    EventKind::TokenIssued { worker: self.worker, key: key.to_owned(), token: Token(n) },
                );
                Ok(Token(n))
            }
            other => Err(BackendError(format!("INCR {key}: {other:?}"))),
        }
    }
}

impl Client {
    async fn store_write(
        &self,
        write: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<WriteOutcome, BackendError> {
        let w = &self.world;
        w.clock.sleep_ms(w.config.db_latency_ms).await;
        let outcome = w.store.write(write, refund, guard).map_err(|e| BackendError(e.to_string()))?;
        let mut st = w.lock();
        let now = w.clock.now_ms();
        let epoch = st.current_epoch[self.worker.0 as usize];
        st.record(
            now,
            EventKind::Write {
                worker: self.worker,
                epoch,
                write,
                refund,
                token: guard.token(),
                rows: outcome.rows_updated,
                after: outcome.after,
            },
        );
        Ok(outcome)
    }
}

impl RefundStore for Client {
    async fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, BackendError> {
        let w = &self.world;
        w.clock.sleep_ms(w.config.db_latency_ms).await;
        w.store.open_refunds(merchant).map_err(|e| BackendError(e.to_string()))
    }

    async fn claim(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.store_write(WriteKind::Claim, refund, guard).await
    }

    async fn confirm(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.store_write(WriteKind::Confirm, refund, guard).await
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

    async fn refund(&self, key: RefundId, amount: Cents) -> Result<Receipt, GatewayError> {
        let w = &self.world;
        let respond_at = {
            let mut st = w.lock();
            let now = w.clock.now_ms();
            let reply = st.gateway.refund(key, amount, now, w.config.refund_latency.of(key));
            let epoch = st.current_epoch[self.worker.0 as usize];
            let kind = EventKind::RefundCalled {
                worker: self.worker,
                epoch,
                refund: key,
                amount,
                outcome: reply.outcome,
                gateway_ref: reply.receipt.gateway_ref,
            };
            st.record(now, kind);
            (reply.respond_at_ms, reply.receipt)
        };
        w.clock.sleep_until_ms(respond_at.0).await;
        Ok(respond_at.1)
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
                let mut qev = std::mem::take(&mut st.scratch_queue);
                let got = st.queue.receive(self.worker, now, &mut qev);
                st.scratch_queue = qev;
                w.record_queue(&mut st, now);
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
        let mut pause = None;
        {
            let mut st = w.lock();
            let now = w.clock.now_ms();
            st.record(now, EventKind::Step { worker: self.worker, step });
            let kind = step.kind();
            let count = {
                let c = &mut st.step_counts[self.worker.0 as usize][kind as usize];
                *c += 1;
                *c
            };
            for fault in &w.config.faults.faults {
                if let (Trigger::Step { step: s, nth }, FaultKind::Pause { worker, duration_ms }) =
                    (fault.trigger, &fault.kind)
                {
                    if s == kind && nth == count && *worker == self.worker {
                        pause = Some(*duration_ms);
                    }
                }
            }
            if let Some(duration_ms) = pause {
                w.pause(&mut st, self.worker, duration_ms);
            }
        }
        if pause.is_some() {
            // The node is marked paused; yielding parks this task right here until the
            // resume, with every other task of the process.
            madsim::task::yield_now().await;
        }
    }
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

/// Runs one world to its end in a fresh runtime seeded with `seed`.
pub fn run_world(config: &WorldConfig, seed: u64) -> Result<RunRecord, String> {
    settle_process_randomness();
    let store = SqliteRefunds::open_in_memory().map_err(|e| format!("cannot open the refund store: {e}"))?;
    store.insert(&config.rows).map_err(|e| format!("cannot load the refund rows: {e}"))?;
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let config = config.clone();
    Ok(rt.block_on(drive(config, store, seed)))
}

async fn drive(config: WorldConfig, store: SqliteRefunds, seed: u64) -> RunRecord {
    let workers = config.workers as usize;
    let mut redis = RedisCore::new();
    for (key, value) in &config.redis_counters {
        redis.preset(key, Value::Int(*value));
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
        epochs: Vec::new(),
        current_epoch: vec![None; workers],
        step_counts: vec![[0; StepKind::COUNT]; workers],
        resumes: Vec::new(),
        timed,
        last_fault_ms: None,
        scratch_expired: Vec::new(),
        scratch_queue: Vec::new(),
    };
    let world = Arc::new(World {
        clock: SimClock::start(),
        store: store.clone(),
        state: Mutex::new(state),
        changed: Notify::new(),
        worker_wake: (0..workers).map(|_| Notify::new()).collect(),
        nodes: OnceLock::new(),
        config,
    });

    {
        let mut st = world.lock();
        for job in &world.config.jobs {
            st.record(0, EventKind::JobEnqueued { job: job.id, merchant: job.merchant });
            let mut qev = std::mem::take(&mut st.scratch_queue);
            st.queue.enqueue(*job, &mut qev);
            st.scratch_queue = qev;
            world.record_queue(&mut st, 0);
        }
    }

    let handle = Handle::current();
    let nodes: Vec<_> = (0..workers)
        .map(|w| handle.create_node().name(format!("worker-{}", WorkerId(w as u32))).build())
        .collect();
    world.nodes.set(nodes.iter().map(|n| n.id()).collect()).expect("nodes are set once");
    let mut joins = Vec::with_capacity(workers);
    for (i, node) in nodes.iter().enumerate() {
        let id = WorkerId(i as u32);
        let client = Client { world: world.clone(), worker: id };
        let config = WorkerConfig { id, mechanism: world.config.mechanism, ttl_ms: world.config.ttl_ms };
        let worker = Worker::new(
            config,
            client.clone(),
            client.clone(),
            client.clone(),
            client.clone(),
            client.clone(),
            client,
        );
        joins.push(node.spawn(worker.run()));
    }

    // Keep time for everything that happens on its own, until the run settles or the
    // deadline passes: the last planned fault, then `settle_ms` to finish.
    let mut settled = false;
    loop {
        let now = world.clock.now_ms();
        world.tick(now);
        if world.settled() {
            settled = true;
            break;
        }
        let last_fault = world.lock().last_fault_ms.unwrap_or(0).max(world.planned_fault_horizon());
        let deadline = last_fault + world.config.settle_ms;
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
    {
        let mut st = world.lock();
        st.queue.close();
    }
    for (i, node) in nodes.iter().enumerate() {
        if !settled {
            handle.kill(node.id());
        }
        world.worker_wake[i].notify_one();
    }
    for join in joins {
        if settled {
            let _ = join.await;
        }
    }
    madsim::time::sleep(std::time::Duration::from_millis(1)).await;
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
