//! The run loop: builds the world, starts one node per worker, keeps time for everything
//! that happens on its own (key expiry, visibility timeouts, timed faults, resumes and
//! restarts) until the run settles or its deadline passes, then winds everything down.

use crate::clock::SimClock;
use crate::config::WorldConfig;
use crate::databases;
use crate::history::EventKind;
use crate::port::{
    ClockClient, GatewayClient, Link, ProbeClient, QueueClient, RedisClient, SettlementClient, StoreClient,
};
use crate::record::RunRecord;
use crate::redis::RedisCore;
use crate::wiring::{Connections, Plain, Wired, Wiring};
use crate::world::{CallCounter, FaultState, State, World};
use fencesim_model::{Ports, RefundRow, Worker, WorkerConfig, WorkerId};
use madsim::runtime::{Handle, Runtime};
use madsim::task::JoinHandle;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Runs one world to its end in a fresh runtime seeded with `seed`, wired as written.
pub fn run_world(config: &WorldConfig, seed: u64) -> Result<RunRecord, String> {
    run_wired(config, seed, Plain)
}

/// Runs one world with its workers' ports put together by `wiring`.
pub fn run_wired<W: Wiring>(config: &WorldConfig, seed: u64, wiring: W) -> Result<RunRecord, String> {
    run_keeping(config, seed, wiring, false)
}

/// `run_wired`, keeping the order the world served its requests and fired its timed
/// faults in (`RunRecord::served`); the history is the same as without it.
pub fn run_ordered<W: Wiring>(config: &WorldConfig, seed: u64, wiring: W) -> Result<RunRecord, String> {
    run_keeping(config, seed, wiring, true)
}

fn run_keeping<W: Wiring>(
    config: &WorldConfig,
    seed: u64,
    wiring: W,
    order: bool,
) -> Result<RunRecord, String> {
    config.validate()?;
    settle_process_randomness();
    let fresh = wiring.fresh_schema();
    let store = databases::refund_store(fresh)
        .map_err(|e| format!("cannot open the refund store: {e}"))?
        .with_statements(wiring.statements(config.mechanism.spec().statements));
    let rows = rows_at_start(config);
    crate::sql_watch::timed(|| store.insert(&rows))
        .map_err(|e| format!("cannot load the refund rows: {e}"))?;
    let settlement = match config.settlement {
        Some(_) => Some(
            databases::settlement_ledger(fresh.is_some())
                .map_err(|e| format!("cannot open the settlement ledger: {e}"))?
                .with_statements(wiring.settlement_statements()),
        ),
        None => None,
    };
    let kept = (store.clone(), settlement.clone());
    let mut redis = vec![RedisCore::new(); config.redis_instances()];
    config
        .mechanism
        .place_counters(&config.counters, config.workers, &mut redis[0], &store)
        .map_err(|e| format!("cannot place the token counters: {e}"))?;
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let config = config.clone();
    let budget = config.event_budget();
    let record = rt.block_on(async move {
        // The clock starts inside the runtime, at the simulated instant the run begins.
        let world = World {
            clock: SimClock::start(),
            state: Mutex::new(State::new(&config, redis)),
            store,
            settlement,
            start_routine: wiring.start_routine(),
            calls: CallCounter::new(&config),
            changed: Notify::new(),
            worker_wake: (0..config.workers).map(|_| Notify::new()).collect(),
            nodes: Mutex::new(vec![None; config.workers as usize]),
            arrival_rows: crate::world::arrival_rows(&config),
            order: order.then(Default::default),
            config,
        };
        drive(world, Arc::new(wiring), seed).await
    });
    drop(rt);
    if fresh.is_none() {
        crate::sql_watch::timed(|| databases::hand_back(kept.0, kept.1));
    }
    if record.events.len() >= budget {
        return Err(format!(
            "the run was stopped at {budget} events ({} ms simulated): the world churns without end (a visibility timeout far below the TTL?)",
            record.ended_at_ms
        ));
    }
    Ok(record)
}

/// The rows in the store when the run starts: all but those that arrive later.
fn rows_at_start(config: &WorldConfig) -> std::borrow::Cow<'_, [RefundRow]> {
    if config.arrivals.is_empty() {
        return std::borrow::Cow::Borrowed(&config.rows);
    }
    let arriving = config.arriving_rows();
    config.rows.iter().filter(|row| !arriving.contains(&row.id)).cloned().collect()
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

type SimWorker<W> = Worker<
    <W as Wiring>::Lease,
    <W as Wiring>::Tokens,
    <W as Wiring>::Store,
    <W as Wiring>::Gateway,
    <W as Wiring>::Queue,
    ProbeClient,
    ClockClient,
    <W as Wiring>::Settlement,
>;

fn new_worker<W: Wiring>(world: &Arc<World>, wiring: &W, id: WorkerId, incarnation: u32) -> SimWorker<W> {
    let link = Link { world: world.clone(), worker: id };
    let instances = world.config.redis_instances() as u8;
    let connections = Connections {
        mechanism: world.config.mechanism,
        worker: id,
        incarnation,
        ttl_ms: world.config.ttl_ms,
        redis: (0..instances).map(|instance| RedisClient { link: link.clone(), instance }).collect(),
        store: StoreClient(link.clone()),
        settlement: SettlementClient(link.clone()),
        gateway: GatewayClient(link.clone()),
        queue: QueueClient(link.clone()),
        clock: ClockClient(link.clone()),
    };
    let Wired { lease, tokens, store, gateway, queue, settlement } = wiring.wire(connections);
    let config = WorkerConfig {
        id,
        mechanism: world.config.mechanism,
        ttl_ms: world.config.ttl_ms,
        settlement: world.config.settlement.is_some(),
    };
    let probe = ProbeClient(link.clone());
    let ports = Ports { lease, tokens, store, gateway, queue, probe, clock: ClockClient(link), settlement };
    Worker::new(config, ports, incarnation)
}

/// Starts a worker process on a node of its own.
fn spawn_worker<W: Wiring>(world: &Arc<World>, wiring: &W, id: WorkerId, incarnation: u32) -> JoinHandle<()> {
    let name = if incarnation > 1 { format!("worker-{id}.{incarnation}") } else { format!("worker-{id}") };
    let node = Handle::current().create_node().name(name).build();
    world.nodes.lock().unwrap_or_else(|p| p.into_inner())[id.0 as usize] = Some(node.clone());
    node.spawn(new_worker(world, wiring, id, incarnation).run())
}

async fn drive<W: Wiring>(world: World, wiring: Arc<W>, seed: u64) -> RunRecord {
    let world = Arc::new(world);
    let workers = world.config.workers as usize;
    {
        let mut state = world.lock();
        for job in &world.config.jobs {
            state.record(0, EventKind::JobEnqueued { job: job.id, merchant: job.merchant });
            world.with_queue(&mut state, 0, |queue, out| queue.enqueue(*job, out));
        }
    }
    let mut joins: Vec<Option<JoinHandle<()>>> =
        (0..workers).map(|w| Some(spawn_worker(&world, &*wiring, WorkerId(w as u32), 1))).collect();
    let settled = keep_time(&world, &*wiring, &mut joins).await;
    let ended_at_ms = world.clock.now_ms();
    let leaked_tasks = wind_down(&world, settled, joins).await;
    let final_rows = crate::sql_watch::timed(|| world.store.all_rows())
        .expect("the refund store can be read at the end of a run");
    let (settlement_entries, settlement_balances) = match &world.settlement {
        Some(ledger) => crate::sql_watch::timed(|| {
            (
                ledger.entries().expect("the settlement ledger can be read at the end of a run"),
                ledger.balances().expect("the settlement balances can be read at the end of a run"),
            )
        }),
        None => (Vec::new(), Vec::new()),
    };
    let mut state = world.lock();
    RunRecord {
        seed,
        events: std::mem::take(&mut state.events),
        final_rows,
        ledger: state.gateway.ledger().to_vec(),
        settlement_entries,
        settlement_balances,
        epochs: state.ledger.take_epochs(),
        settled,
        ended_at_ms,
        last_fault_ms: state.faults.last_fault_ms,
        open_jobs: state.queue.open_jobs().collect(),
        leaked_tasks,
        sleeps: world.clock.sleeps(),
        served: world
            .order
            .as_ref()
            .map(|log| std::mem::take(&mut log.lock().unwrap_or_else(|p| p.into_inner()).served))
            .unwrap_or_default(),
    }
}

/// Keeps time for everything that happens on its own, until the run settles (true) or
/// the deadline passes: `settle_ms` after the last fault (timed faults, resumes and
/// restarts still to come keep the run going).
async fn keep_time<W: Wiring>(world: &Arc<World>, wiring: &W, joins: &mut [Option<JoinHandle<()>>]) -> bool {
    loop {
        let now = world.clock.now_ms();
        if world.lock().events.len() >= world.config.event_budget() {
            return false;
        }
        for worker in tick(world, now) {
            let incarnation = {
                let mut state = world.lock();
                state.faults.crashed[worker.0 as usize] = false;
                state.faults.incarnation[worker.0 as usize] += 1;
                let incarnation = state.faults.incarnation[worker.0 as usize];
                state.record(now, EventKind::Restarted { worker, incarnation });
                incarnation
            };
            joins[worker.0 as usize] = Some(spawn_worker(world, wiring, worker, incarnation));
        }
        if settled(world) {
            return true;
        }
        let (deadline, next) = {
            let state = world.lock();
            let deadline = match state.faults.quiet() && state.arrivals_due.is_empty() {
                true => {
                    let last = state.faults.last_fault_ms.unwrap_or(0);
                    last.max(world.config.last_arrival_ms().unwrap_or(0)) + world.config.settle_ms
                }
                false => u64::MAX,
            };
            (deadline, next_deadline(world, &state))
        };
        if now >= deadline {
            return false;
        }
        let next = next.map_or(deadline, |d| d.min(deadline)).max(now + 1);
        let wake = world.clock.instant_of(next);
        let _ = madsim::time::timeout(
            wake.duration_since(madsim::time::Instant::now()),
            world.changed.notified(),
        )
        .await;
    }
}

/// One pass of everything due at `now`; returns the workers to start again.
fn tick(world: &World, now: u64) -> Vec<WorkerId> {
    let mut state = world.lock();
    let state = &mut *state;
    world.fire_timed(state, now);
    for call in state.faults.take_landed(now) {
        world.reach(state, &call, true);
    }
    let handle = Handle::current();
    for (at, worker) in FaultState::take_due(&mut state.faults.resumes, now) {
        if let Some(node) = world.node_of(worker) {
            handle.resume(node.id());
        }
        state.record(at, EventKind::Resumed { worker });
    }
    let restart = FaultState::take_due(&mut state.faults.restarts, now).into_iter().map(|r| r.1).collect();
    world.arrive(state, now);
    for instance in 0..state.redis.len() as u8 {
        state.expiring(instance, |core, out| core.expire_due(now, out));
    }
    world.with_queue(state, now, |queue, out| queue.tick(now, out));
    restart
}

fn next_deadline(world: &World, state: &State) -> Option<u64> {
    let faults = world.next_fault_deadline(state);
    let expiries = state.redis.iter().filter_map(RedisCore::next_expiry);
    let arrival = state.arrivals_due.last().map(|&index| world.config.arrivals[index].at_ms);
    faults.into_iter().chain(expiries).chain(state.queue.next_deadline()).chain(arrival).min()
}

fn settled(world: &World) -> bool {
    let state = world.lock();
    let idle = |w: u32| state.queue.is_idle(WorkerId(w)) && !state.queue.has_assigned(WorkerId(w));
    state.queue.all_done()
        && state.arrivals_due.is_empty()
        && state.faults.resumes.is_empty()
        && state.faults.restarts.is_empty()
        && state.faults.late_calls.is_empty()
        && (0..world.config.workers).all(idle)
}

/// Closes the queue, stops whoever is still mid-batch, lets every task end. Returns how
/// many tasks are still alive (should be none).
async fn wind_down(world: &Arc<World>, settled: bool, mut joins: Vec<Option<JoinHandle<()>>>) -> usize {
    world.lock().queue.close();
    let handle = Handle::current();
    for w in 0..world.config.workers as usize {
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
    handle.metrics().num_tasks().saturating_sub(1)
}
