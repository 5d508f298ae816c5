//! A controlled run's driver: the supervisor's loop of `foreign::watch` on the run's clock.
//! Each turn it notes which copies left, waits until every live copy waits (or names the
//! ones working past the grace), and then does the earliest of what is due: the plan's
//! fault at its time, a refund's arrival, a killed copy or the lock server started again,
//! or the conductor's next ticket. Before the clock moves, each lease the move passes the
//! end of is recorded as expired at that end, to the microsecond (Redis, on the run's
//! clock, expires it the same way; its own notifications come at moments the machine
//! chooses, so they are not read).

use crate::foreign::conductor::{Conductor, EPOCH_US};
use crate::foreign::faults::{Outside, OutsidePlan};
use crate::foreign::programs::Programs;
use crate::foreign::queue::QueueService;
use crate::foreign::redis_seen::Keys;
use crate::foreign::watch::{arrive, at_the_services, Ended, LeftEarly};
use crate::live::clock::RunClock;
use crate::live::faketime::FakeClock;
use crate::live::faults::expire_lease;
use crate::live::gateway::GatewayService;
use crate::live::interrupt;
use crate::live::log::EventLog;
use crate::live::store::Refunds;
use fencesim_model::WorkerId;
use fencesim_sim::{EventKind, Fault, FaultKind, WorldConfig};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a controlled run is asked for.
#[derive(Clone, Copy, Debug)]
pub struct Control {
    /// Draws the hops' latencies and breaks ties between requests due at one time.
    pub seed: u64,
    /// How long a copy may work (neither wait nor send) before the run goes on without it.
    pub grace: Duration,
    /// Whether each copy's wall clock is the run's too (`--program-clock run`): its
    /// realtime clock stands at the run's time, its monotonic clock stays the machine's.
    pub program_clock: bool,
}

impl Control {
    /// What a replay file's program asks: its seed (else `seed`), on the clock it names.
    pub fn of_program(program: &crate::files::replay_file::WorkerProgram, seed: u64) -> Control {
        Control {
            seed: program.controlled.unwrap_or(seed),
            grace: Duration::from_millis(2000),
            program_clock: program.run_clock,
        }
    }
}

/// What is due on the run's clock besides the conductor's tickets.
#[derive(Clone, Debug)]
enum Due {
    Fault(Fault),
    Arrival(usize),
    Restart(WorkerId),
    RedisBack,
}

/// What the driver works with.
pub struct Drive<'a> {
    pub world: &'a WorldConfig,
    pub plan: &'a OutsidePlan,
    pub log: &'a EventLog,
    pub gateway: &'a GatewayService,
    pub queue: &'a QueueService,
    pub store: &'a dyn Refunds,
    pub redis_url: &'a str,
    pub outside: &'a Outside,
    pub servers: &'a RefCell<crate::live::servers::Servers>,
    pub conductor: &'a Conductor,
    pub control: Control,
}

/// A controlled run's clock in place: Redis and PostgreSQL started with `env` read the
/// conductor's time; this process's time is the conductor's until this is dropped.
pub struct Conducted {
    pub conductor: Arc<Conductor>,
    pub env: Vec<(String, String)>,
}

impl Conducted {
    /// The conductor on `clock`, the file the servers read their time from.
    pub fn start(control: Control, clock: &FakeClock) -> Result<Conducted, String> {
        let conductor = Arc::new(Conductor::new(control.seed, clock.offset.clone())?);
        crate::live::clock::take_over(Some(conductor.clone()));
        Ok(Conducted { conductor, env: clock.env.clone() })
    }
}

impl Drop for Conducted {
    fn drop(&mut self) {
        crate::live::clock::take_over(None);
    }
}

/// The leases seen ending, so that each end is recorded once.
struct Expiries {
    keys: Vec<String>,
    con: Option<redis::Connection>,
    told: BTreeSet<(String, u64)>,
}

impl Drive<'_> {
    /// Drives the copies until every one has left and nothing is left to land, or the
    /// story's time is up; says which copies left before the queue said the run was over.
    pub fn run(&self, programs: &mut Programs) -> Result<(Ended, Vec<LeftEarly>), String> {
        let mut agenda = self.agenda();
        let horizon_us = crate::live::coordinator::horizon_ms(self.world) * 1_000;
        let keys = Keys::of(self.world).lease_keys().cloned().collect();
        let mut expiries = Expiries { keys, con: None, told: BTreeSet::new() };
        let (mut early, mut noticed, mut closed) = (Vec::new(), BTreeSet::new(), false);
        let mut working: (Vec<Option<WorkerId>>, Instant) = (Vec::new(), Instant::now());
        loop {
            interrupt::check()?;
            programs.look(self.log)?;
            for (worker, status) in programs.exited() {
                if !closed && noticed.insert(worker) {
                    let at_ms = self.conductor.story_us() / 1_000;
                    early.push(LeftEarly { worker, at_ms, status, said: programs.said(worker) });
                }
            }
            self.conductor.set_live(programs.running().into_iter().collect());
            if let Err(now) = self.conductor.wait_quiet(Duration::from_millis(2)) {
                if now != working.0 {
                    working = (now, Instant::now());
                } else if working.1.elapsed() >= self.control.grace && !now.contains(&None) {
                    self.conductor.leave_out(&now.iter().flatten().copied().collect::<Vec<_>>());
                }
                continue;
            }
            // the grace is counted from the last thing the run did
            working = (Vec::new(), Instant::now());
            self.take_news(&mut agenda);
            if !closed
                && agenda.iter().all(|(_, due)| matches!(due, Due::Restart(_) | Due::RedisBack))
                && self.queue.all_done()
            {
                self.queue.close();
                closed = true;
                continue;
            }
            let ticket = self.conductor.next_wake();
            if programs.all_exited() && ticket.is_none() {
                return Ok((Ended::Left, early));
            }
            let due = agenda.first().map(|(at, _)| *at);
            let Some(next) = [ticket, due].into_iter().flatten().min() else {
                // every copy waits for what nothing will bring
                return Ok((Ended::OutOfTime, early));
            };
            if next > horizon_us {
                return Ok((Ended::OutOfTime, early));
            }
            self.expire_up_to(&mut expiries, next);
            match due.filter(|at| ticket.is_none_or(|t| *at <= t)) {
                Some(at) => {
                    self.conductor.advance_to(at)?;
                    let (_, due) = agenda.remove(0);
                    self.take(due, programs)?;
                    self.conductor.changed();
                }
                None => drop(self.conductor.fire_next()?),
            }
        }
    }

    /// The plan's faults at their times and the world's arrivals, the earliest first (a
    /// fault before an arrival of the same time).
    fn agenda(&self) -> Vec<(u64, Due)> {
        let faults =
            self.plan.at_times.iter().map(|(at, (_, fault))| (*at * 1_000, Due::Fault(fault.clone())));
        let arrivals =
            self.world.arrivals.iter().enumerate().map(|(i, a)| (a.at_ms * 1_000, Due::Arrival(i)));
        let mut agenda: Vec<(u64, Due)> = faults.chain(arrivals).collect();
        agenda.sort_by_key(|(at, due)| (*at, matches!(due, Due::Arrival(_))));
        agenda
    }

    /// What the faults did meanwhile that comes due later: a killed copy's restart, the
    /// lock server's return after a restart's down time.
    fn take_news(&self, agenda: &mut Vec<(u64, Due)>) {
        let world = self.world;
        for (worker, at) in self.conductor.take_restarts() {
            agenda.push((at, Due::Restart(worker)));
        }
        if let Some(at) = self.conductor.take_redis_down() {
            let down_ms = world.mechanism.restart_down_ms(world.redis_restart_ms, world.ttl_ms);
            agenda.push((at + down_ms * 1_000, Due::RedisBack));
        }
        agenda.sort_by_key(|(at, due)| (*at, matches!(due, Due::Arrival(_))));
    }

    fn take(&self, due: Due, programs: &mut Programs) -> Result<(), String> {
        match due {
            Due::Fault(fault) => self.fire(fault),
            Due::Arrival(index) => arrive(self.world, index, self.store, self.log, self.queue),
            Due::Restart(worker) => {
                // a copy a later crash already started again is not started (nor treated
                // as starting up) a second time: treated so, its requests went on without
                // turns at one story microsecond, and their rows' changes were misread
                if programs.restart_now(worker, self.log)? {
                    self.conductor.revived(worker);
                }
                Ok(())
            }
            Due::RedisBack => {
                let mut servers = self.servers.borrow_mut();
                servers.lock_start_again()?;
                crate::live::servers::start_routine(self.world, self.redis_url, self.store, self.log)?;
                self.outside.redis_started(servers.lock_pid());
                self.conductor.redis_back();
                Ok(())
            }
        }
    }

    fn fire(&self, fault: Fault) -> Result<(), String> {
        self.log.record(EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
        self.conductor.note(format!("the plan's {} fires", fault.kind.name()));
        match fault.kind {
            FaultKind::ExpireLease { merchant, .. } => {
                // a server that is away (a restart) holds no lease to expire now
                if !self.conductor.redis_away() {
                    expire_lease(self.redis_url, self.world, merchant)?;
                }
            }
            // a pause or a crash acts through the conductor (`Outside::act`)
            other => at_the_services(other, self.gateway, self.queue, self.outside),
        }
        Ok(())
    }

    /// Records each lease whose end the clock's move to `to_us` passes, at that end.
    fn expire_up_to(&self, expiries: &mut Expiries, to_us: u64) {
        if self.conductor.redis_away() || expiries.keys.is_empty() {
            return;
        }
        if expiries.con.is_none() {
            expiries.con = crate::live::redis::connect(self.redis_url).ok();
        }
        let Some(con) = expiries.con.as_mut() else { return };
        let mut pipe = redis::pipe();
        for key in &expiries.keys {
            pipe.cmd("PEXPIRETIME").arg(key);
        }
        let Ok(ends) = pipe.query::<Vec<i64>>(con) else {
            expiries.con = None;
            return;
        };
        for (key, end_ms) in expiries.keys.iter().zip(ends) {
            let Ok(end_ms) = u64::try_from(end_ms) else { continue };
            let end_us = end_ms * 1_000;
            if end_us <= EPOCH_US + to_us && expiries.told.insert((key.clone(), end_us)) {
                let expired = EventKind::LeaseExpired {
                    instance: 0,
                    key: key.clone(),
                    value: String::new(),
                    epoch: None,
                };
                self.log.record_at(end_us, expired);
            }
        }
    }
}
