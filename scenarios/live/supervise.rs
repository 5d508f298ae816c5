//! The coordinator's loop while a live run goes on: it takes the plan's faults that come at
//! a time (a pause, a crash, an early lease expiry), brings in the refunds that arrive,
//! resumes and restarts workers as their faults end, and closes the queue once every job
//! is acked.

use crate::live::clock::LiveClock;
use crate::live::faketime::jump_ms;
use crate::live::faults::expire_lease;
use crate::live::gateway::GatewayService;
use crate::live::interrupt;
use crate::live::log::EventLog;
use crate::live::plan::{LivePlan, Planned};
use crate::live::processes::{instant_of, Children};
use crate::live::queue;
use crate::live::redis::connect;
use crate::live::servers::{restart_now, start_routine, Servers};
use crate::live::store::Refunds;
use crate::live::turns::{Act, Turns};
use fencesim_sim::{EventKind, FaultKind, WorldConfig};
use std::time::{Duration, Instant};

/// Something the coordinator does at a time of the story.
pub enum Due {
    Fault(Planned),
    /// The arrival at this place in the world's list.
    Arrival(usize),
}

/// The timed faults and the world's arrivals, on the wall clock, the next one last (a fault
/// before an arrival of the same time).
pub fn agenda(at_times: &[(u64, Planned)], world: &WorldConfig, clock: LiveClock) -> Vec<(Instant, Due)> {
    let faults = at_times.iter().map(|(at, planned)| (*at, Due::Fault(planned.clone())));
    let arrivals = world.arrivals.iter().enumerate().map(|(index, a)| (a.at_ms, Due::Arrival(index)));
    let mut agenda: Vec<(u64, Due)> = faults.chain(arrivals).collect();
    agenda.sort_by_key(|(at, due)| (*at, matches!(due, Due::Arrival(_))));
    agenda.reverse();
    agenda.into_iter().map(|(at, due)| (instant_of(clock, at), due)).collect()
}

/// What the loop works with.
pub struct Supervision<'a> {
    pub plan: &'a LivePlan,
    pub world: &'a WorldConfig,
    pub clock: LiveClock,
    pub log: &'a EventLog,
    pub store: &'a dyn Refunds,
    pub gateway: &'a GatewayService,
    /// Whether the deployment's start-up routine runs after a restart (a planted bug may
    /// leave it out).
    pub start_routine: bool,
    /// Which timed faults wait for a worker's request in the same story millisecond.
    pub turns: &'a Turns,
    pub deadline: Instant,
}

impl Supervision<'_> {
    /// The timed faults and the arrivals, the next one last.
    fn agenda(&self) -> Vec<(Instant, Due)> {
        agenda(&self.plan.at_times, self.world, self.clock)
    }

    /// Watches the workers until every one has left (`true`) or the deadline passes
    /// (`false`).
    pub fn run(
        &self,
        children: &mut Children,
        servers: &mut Servers,
        queue_con: &mut redis::Connection,
    ) -> Result<bool, String> {
        let mut agenda = self.agenda();
        let jobs = self.world.all_jobs().count() as u64;
        let mut closed = false;
        let mut asked = Instant::now();
        let world = self.world;
        let down = self.clock.real(world.mechanism.restart_down_ms(world.redis_restart_ms, world.ttl_ms));
        while !children.all_exited() {
            interrupt::check()?;
            if Instant::now() > self.deadline {
                return Ok(false);
            }
            while agenda.last().is_some_and(|(at, _)| *at <= Instant::now()) {
                let (_, due) = agenda.pop().expect("a due entry");
                self.take(due, children, servers, queue_con)?;
            }
            children.look(self.plan, self.world, self.clock, self.log)?;
            if servers.watch(down)? && self.start_routine {
                start_routine(world, &servers.lock_url, self.store, self.log)?;
            }
            // The queue is asked every 10 ms, the processes every half millisecond: a resume
            // is due to the millisecond, the end of the run is not.
            if !closed && agenda.is_empty() && asked.elapsed() >= Duration::from_millis(10) {
                asked = Instant::now();
                let to_ack = queue::to_ack(queue_con, jobs).map_err(|e| format!("the queue: {e}"))?;
                if queue::acked(queue_con).map_err(|e| format!("the queue: {e}"))? >= to_ack {
                    queue::close(queue_con).map_err(|e| format!("the queue: {e}"))?;
                    closed = true;
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        Ok(true)
    }

    fn take(
        &self,
        due: Due,
        children: &mut Children,
        servers: &mut Servers,
        queue_con: &mut redis::Connection,
    ) -> Result<(), String> {
        match due {
            Due::Fault((index, fault)) => {
                self.turns.wait_for(Act::Fault(index));
                self.fire(fault, children, servers, queue_con)?;
                self.turns.done(Act::Fault(index));
            }
            Due::Arrival(index) => self.arrive(index, queue_con)?,
        }
        Ok(())
    }

    /// Fires a fault of the plan that comes at a time.
    fn fire(
        &self,
        fault: fencesim_sim::Fault,
        children: &mut Children,
        servers: &mut Servers,
        queue_con: &mut redis::Connection,
    ) -> Result<(), String> {
        self.log.record(EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
        let after = |ms| Instant::now() + self.clock.real(ms);
        match fault.kind {
            FaultKind::Pause { worker, duration_ms } => {
                self.gateway.frozen(worker, self.clock.real(duration_ms));
                children.pause(worker, after(duration_ms))
            }
            FaultKind::Crash { worker, restart_after_ms } => children.crash(worker, after(restart_after_ms)),
            FaultKind::ExpireLease { merchant, .. } => expire_lease(&servers.lock_url, self.world, merchant)?,
            FaultKind::RedisRestart { persistence, .. } => {
                let pid = servers.lock_pid().ok_or("the live run restarts only its own Redis")?;
                restart_now(connect(&servers.lock_url).ok().as_mut(), pid, persistence, self.log);
            }
            FaultKind::RedisClockJump { by_ms, .. } => {
                let file = servers.clock_file().ok_or("the live run jumps only its own Redis's clock")?;
                jump_ms(&file, self.clock.real(by_ms).as_millis() as u64)?;
            }
            FaultKind::GatewayOutage { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::LookupLag { .. } => self.gateway.take(fault.kind),
            FaultKind::Redeliver { worker } | FaultKind::DuplicateDelivery { worker } => {
                let duplicate = matches!(fault.kind, FaultKind::DuplicateDelivery { .. });
                let visibility_ms = self.clock.real(self.world.visibility_timeout_ms).as_millis() as u64;
                queue::hand_on(queue_con, worker, duplicate, visibility_ms)
                    .map_err(|e| format!("the queue: {e}"))?;
            }
            other => return Err(format!("the live run cannot take {} at a time", other.name())),
        }
        Ok(())
    }

    /// The arrival at `index` of the world's list: its rows into the store, its job queued.
    fn arrive(&self, index: usize, queue_con: &mut redis::Connection) -> Result<(), String> {
        let arrival = &self.world.arrivals[index];
        let rows: Vec<_> =
            self.world.rows.iter().filter(|row| arrival.rows.contains(&row.id)).copied().collect();
        self.store.add(&rows).map_err(|e| format!("the refund store: {e}"))?;
        let (job, merchant) = (arrival.job.id, arrival.job.merchant);
        self.log.record(EventKind::RefundsArrived { job, merchant, refunds: rows.len() as u32 });
        self.log.record(EventKind::JobEnqueued { job, merchant });
        queue::add(queue_con, &arrival.job).map_err(|e| format!("the queue: {e}"))
    }
}
