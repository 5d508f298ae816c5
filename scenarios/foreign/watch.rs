//! The supervisor's loop while a team's worker program runs: it gives the plan's faults
//! that come at a time, brings in the refunds that arrive, continues and restarts copies as
//! their faults end, closes the queue once every job is acked, and says what is wrong with
//! a program that cannot be judged (`ready`: it left before it asked for a job, or never asked).

use crate::foreign::faults::{Outside, OutsidePlan};
use crate::foreign::programs::{told, Programs};
use crate::foreign::queue::QueueService;
use crate::live::clock::LiveClock;
use crate::live::faults::expire_lease;
use crate::live::gateway::GatewayService;
use crate::live::interrupt;
use crate::live::log::EventLog;
use crate::live::store::Refunds;
use crate::live::supervise::{agenda, Due};
use fencesim_model::WorkerId;
use fencesim_sim::{EventKind, FaultKind, WorldConfig};
use std::time::{Duration, Instant};

/// What the loop works with.
pub struct Watch<'a> {
    pub world: &'a WorldConfig,
    pub plan: &'a OutsidePlan,
    pub clock: LiveClock,
    pub log: &'a EventLog,
    pub gateway: &'a GatewayService,
    pub queue: &'a QueueService,
    pub store: &'a dyn Refunds,
    pub redis_url: &'a str,
    /// The faults the proxies fire, which also act for the supervisor (a delay, a restart).
    pub outside: &'a crate::foreign::faults::Outside,
    /// The lock server, started again after a restart's down time.
    pub servers: &'a std::cell::RefCell<crate::live::servers::Servers>,
    /// How long a copy may stay once the queue said the run is over.
    pub leave_within: Duration,
    pub deadline: Instant,
}

/// A copy that left while jobs were still to be done.
#[derive(Clone, Debug)]
pub struct LeftEarly {
    pub worker: WorkerId,
    /// When, in the story's milliseconds.
    pub at_ms: u64,
    /// Its exit status (a signal's number, negated).
    pub status: i32,
    /// Its last lines of output.
    pub said: String,
}

/// When and how it left, in one line; `{:#}` adds its last lines.
impl std::fmt::Display for LeftEarly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self.status {
            signal if signal < 0 => format!("signal {}", -signal),
            code => format!("exit code {code}"),
        };
        let (worker, at) = (self.worker, self.at_ms);
        write!(f, "{worker} left {at} ms into the story ({how}), before the queue said the run was over")?;
        if f.alternate() {
            write!(f, "; its last lines:")?;
            for line in self.said.lines() {
                write!(f, "\n  {line}")?;
            }
        }
        Ok(())
    }
}

/// How a watch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every copy left.
    Left,
    /// The queue closed and these copies had not left `leave_within` later: they were stopped.
    Stayed(Vec<WorkerId>),
    /// The story's deadline passed first.
    OutOfTime,
}

impl Watch<'_> {
    /// Watches the copies until every one has left, the queue's end has been told long
    /// enough, or the deadline passes; an error names a program that cannot be judged.
    /// Also tells each copy that left before the queue said the run was over.
    pub fn run(&self, programs: &mut Programs) -> Result<(Ended, Vec<LeftEarly>), String> {
        let mut early = Vec::new();
        let ended = self.watch(programs, &mut early)?;
        Ok((ended, early))
    }

    fn watch(&self, programs: &mut Programs, early: &mut Vec<LeftEarly>) -> Result<Ended, String> {
        let mut agenda = agenda(&self.plan.at_times, self.world, self.clock);
        let mut closed_at: Option<Instant> = None;
        let mut noticed = std::collections::BTreeSet::new();
        loop {
            interrupt::check()?;
            programs.look(self.log)?;
            for (worker, status) in programs.exited() {
                if closed_at.is_none() && noticed.insert(worker) {
                    let at_ms = self.clock.story_ms(crate::live::clock::wall_us());
                    early.push(LeftEarly { worker, at_ms, status, said: programs.said(worker) });
                }
            }
            if programs.all_exited() {
                return Ok(Ended::Left);
            }
            if Instant::now() > self.deadline {
                return Ok(Ended::OutOfTime);
            }
            while agenda.last().is_some_and(|(at, _)| *at <= Instant::now()) {
                let (_, due) = agenda.pop().expect("a due entry");
                self.take(due, programs)?;
            }
            self.queue.tick();
            self.restarted()?;
            if closed_at.is_none() && agenda.is_empty() && self.queue.all_done() {
                self.queue.close();
                closed_at = Some(Instant::now());
            }
            if closed_at.is_some_and(|at| at.elapsed() >= self.leave_within) {
                return Ok(Ended::Stayed(programs.running()));
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }

    fn take(&self, due: Due, programs: &mut Programs) -> Result<(), String> {
        match due {
            Due::Fault((_, fault)) => self.fire(fault, programs),
            Due::Arrival(index) => self.arrive(index),
        }
    }

    fn fire(&self, fault: fencesim_sim::Fault, programs: &mut Programs) -> Result<(), String> {
        self.log.record(EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
        let after = |ms| Instant::now() + self.clock.real(ms);
        match fault.kind {
            FaultKind::Pause { worker, duration_ms } => {
                self.gateway.frozen(worker, self.clock.real(duration_ms));
                programs.pause(worker, after(duration_ms))
            }
            FaultKind::Crash { worker, restart_after_ms } => programs.crash(worker, after(restart_after_ms)),
            FaultKind::ExpireLease { merchant, .. } => {
                let restarts =
                    self.world.faults.faults.iter().any(|f| matches!(f.kind, FaultKind::RedisRestart { .. }));
                match expire_lease(self.redis_url, self.world, merchant) {
                    // a server that is down or going down (a restart) holds no lease to expire now
                    Err(_) if restarts => {}
                    other => other?,
                }
            }
            other => at_the_services(other, self.gateway, self.queue, self.outside),
        }
        Ok(())
    }

    /// Starts the lock server again once a restart's down time has passed, runs the
    /// deployment's start-up routine (the counters seeded as the world's mechanism seeds
    /// them), and tells the faults its new process.
    fn restarted(&self) -> Result<(), String> {
        let world = self.world;
        let down = self.clock.real(world.mechanism.restart_down_ms(world.redis_restart_ms, world.ttl_ms));
        let mut servers = self.servers.borrow_mut();
        if servers.watch(down)? {
            crate::live::servers::start_routine(world, self.redis_url, self.store, self.log)?;
            self.outside.redis_started(servers.lock_pid());
        }
        Ok(())
    }

    fn arrive(&self, index: usize) -> Result<(), String> {
        arrive(self.world, index, self.store, self.log, self.queue)
    }
}

/// A fault given at a time that acts on the gateway, the queue, or as the proxies fire it
/// (a delay, a restart, a fault of one worker's gateway call): the supervisor's and a
/// controlled run's driver's.
pub fn at_the_services(kind: FaultKind, gateway: &GatewayService, queue: &QueueService, outside: &Outside) {
    match kind {
        FaultKind::GatewayOutage { .. }
        | FaultKind::GatewayConflicts { .. }
        | FaultKind::LookupLag { .. } => gateway.take(kind),
        FaultKind::Redeliver { worker } => drop(queue.hand_on(worker, false)),
        FaultKind::DuplicateDelivery { worker } => drop(queue.hand_on(worker, true)),
        other => drop(outside.act(other)),
    }
}

/// The arrival at `index` of the world's list: its rows into the store, its job queued
/// (the supervisor's, and a controlled run's driver's).
pub fn arrive(
    world: &WorldConfig,
    index: usize,
    store: &dyn Refunds,
    log: &EventLog,
    queue: &QueueService,
) -> Result<(), String> {
    let arrival = &world.arrivals[index];
    let rows: Vec<_> = world.rows.iter().filter(|row| arrival.rows.contains(&row.id)).copied().collect();
    store.add(&rows).map_err(|e| format!("the refund store: {e}"))?;
    let (job, merchant) = (arrival.job.id, arrival.job.merchant);
    log.record(EventKind::RefundsArrived { job, merchant, refunds: rows.len() as u32 });
    log.record(EventKind::JobEnqueued { job, merchant });
    queue.add(arrival.job);
    Ok(())
}

/// Waits until every copy has asked the queue for a job once (its connections made, its
/// start-up done, whatever its language takes): the story begins then, for all alike.
pub fn ready(
    queue: &QueueService,
    programs: &mut Programs,
    command: &[String],
    within: Duration,
    log: &EventLog,
) -> Result<(), String> {
    let started = Instant::now();
    while !queue.all_asked() {
        interrupt::check()?;
        programs.look(log)?;
        unjudgeable(queue, programs, command, within, started.elapsed() < within)?;
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// A copy that left before it asked for a job, or, unless `left_only`, any copy that has
/// not asked yet: the program cannot be judged.
fn unjudgeable(
    queue: &QueueService,
    programs: &Programs,
    command: &[String],
    within: Duration,
    left_only: bool,
) -> Result<(), String> {
    let command = told(command);
    for (worker, status) in programs.exited() {
        if !queue.asked(worker) {
            return Err(format!(
                "the worker program `{command}` (worker {worker}) {} before it asked the queue for a job \
                 (POST $FENCESIM_QUEUE_URL/take); it said:\n{}",
                ended_words(status),
                programs.said(worker)
            ));
        }
    }
    if left_only {
        return Ok(());
    }
    let silent: Vec<String> =
        (0..queue.workers()).map(WorkerId).filter(|&w| !queue.asked(w)).map(|w| w.to_string()).collect();
    match silent.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "the worker program `{command}` never asked the queue for a job in {} s ({} {}): it must \
             POST $FENCESIM_QUEUE_URL/take (docs/worker.md); worker {} said:\n{}",
            within.as_secs(),
            if silent.len() == 1 { "worker" } else { "workers" },
            silent.join(", "),
            WorkerId(0),
            programs.said(WorkerId(0))
        )),
    }
}

/// A copy's end in words.
fn ended_words(status: i32) -> String {
    match status {
        0 => "exited with status 0".to_owned(),
        s if s < 0 => format!("was ended by signal {}", -s),
        s => format!("exited with status {s}"),
    }
}
