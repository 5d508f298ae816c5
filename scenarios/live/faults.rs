//! The faults a worker process takes itself, at its own step or before its own n-th
//! request on a hop, counted in the process as the simulation counts them: a pause stops
//! the process (`SIGSTOP`, the coordinator resumes it), a crash kills it (`SIGKILL`, the
//! coordinator starts a new one), an early lease expiry is set on the server through a
//! connection of its own. What the worker has reached and fired is kept in a file, so
//! that a new process for the worker counts on from where the last one died.

use crate::live::log::EventLog;
use crate::live::plan::Planned;
use fencesim_model::{StepKind, WorkerId};
use fencesim_sim::{EventKind, FaultKind, Hop, Trigger};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strum::EnumCount;

/// What a worker has reached and fired, over all its processes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Progress {
    pub steps: BTreeMap<StepKind, u32>,
    pub calls: BTreeMap<Hop, u32>,
    /// Requests inside an operation (the previous request on the same hop, no step since).
    #[serde(default)]
    pub within: BTreeMap<Hop, u32>,
    /// The faults it fired, by place in the plan, in the order they fired.
    pub fired: Vec<usize>,
}

impl Progress {
    /// What the file says, or nothing reached if there is no file yet.
    pub fn read(path: &Path) -> Result<Progress, String> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display())),
            Err(_) => Ok(Progress::default()),
        }
    }

    fn write(&self, path: &Path) {
        // written whole, then renamed, so that a kill never leaves half a file
        let partial = path.with_extension("partial");
        let bytes = serde_json::to_vec(self).expect("progress is JSON");
        if std::fs::write(&partial, bytes).is_ok() {
            let _ = std::fs::rename(&partial, path);
        }
    }
}

/// The longest latency slept outside the runtime's timer.
const PRECISE: Duration = Duration::from_millis(2);

/// What faults armed for the worker's next requests, in the story's milliseconds: hold-ups
/// by `Hop` for the next request on a hop and for its answer on the way back, and for its
/// next refund call, extra latency, lost answers and a late landing (sent to the gateway
/// service with the call, which does them).
#[derive(Default)]
pub struct Held {
    pub request_ms: [u64; Hop::COUNT],
    pub reply_ms: [u64; Hop::COUNT],
    pub gateway: GatewayArmed,
}

/// What the worker's next refund call carries to the gateway service.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayArmed {
    pub extra_ms: u64,
    pub lost: u32,
    pub late_ms: Option<u64>,
}

impl GatewayArmed {
    /// Both armings at once, as one call carries them.
    pub fn and(self, other: GatewayArmed) -> GatewayArmed {
        GatewayArmed {
            extra_ms: self.extra_ms + other.extra_ms,
            lost: self.lost + other.lost,
            late_ms: self.late_ms.or(other.late_ms),
        }
    }
}

/// Sleeps `story_ms` of the story.
async fn sleep_story(clock: crate::live::clock::LiveClock, story_ms: u64) {
    sleep_real(clock.real(story_ms)).await
}

/// Sleeps `real`: on the runtime's timer until the last millisecond or two (which that
/// timer keeps only to the whole millisecond, late by up to one), then here, to the tens
/// of microseconds, holding up the process's other task (a renewal) that long at most.
async fn sleep_real(real: Duration) {
    let started = std::time::Instant::now();
    let deadline = started + real;
    if real > PRECISE {
        tokio::time::sleep(real - PRECISE).await;
    }
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if !left.is_zero() {
        std::thread::sleep(left);
    }
    crate::live::clock::slept(started.elapsed());
}

/// A worker's last request on a hop: when it left and what the server took, in wall-clock
/// microseconds, and its number on the hop.
#[derive(Clone, Copy, Default)]
pub struct LastRequest {
    sent_us: u64,
    cost_us: u64,
    /// Its number on the hop, counted as a call trigger counts (`live::turns` names it so).
    nth: u32,
}

/// A worker process's own faults.
pub struct LiveFaults {
    pub worker: WorkerId,
    pub log: Arc<EventLog>,
    /// The faults this worker triggers, by place in the plan.
    pub planned: Vec<Planned>,
    pub progress: Mutex<Progress>,
    pub progress_file: PathBuf,
    /// Whether every count is kept in the file (a worker that may be killed needs it).
    pub keep_counts: bool,
    /// The connection an early lease expiry is set through.
    pub admin: Mutex<Option<redis::Connection>>,
    /// The world's latency on each hop, in the story's milliseconds, by `Hop` (the
    /// gateway's is the gateway service's own).
    pub latency_ms: [u64; Hop::COUNT],
    /// Hold-ups armed for the next request on each hop, and for its answer, by `Hop`.
    pub held: Mutex<Held>,
    pub clock: crate::live::clock::LiveClock,
    /// Per hop, the worker's last request: when it left (after its latency), and how long
    /// the real component took to answer it, in wall-clock microseconds. The next request
    /// on the hop waits that much less of its latency.
    pub last_request: Mutex<[LastRequest; Hop::COUNT]>,
    /// The hop of the worker's last request since its last step, if any: the next request
    /// on the same hop is inside that operation.
    pub last_hop: Mutex<Option<Hop>>,
    /// The mechanism, and how many workers the world has: a fault on a merchant's lease
    /// reaches every key it may be held at.
    pub mechanism: fencesim_model::Mechanism,
    pub workers: u32,
    /// Which of the worker's requests wait for another party's (`live::turns`).
    pub turns: crate::live::turns::Turns,
    /// Where a fault that acts outside the worker is sent: the gateway service (an outage,
    /// conflicts, a stalled lookup copy) and the queue (a redelivery, a duplicate).
    pub outside: Outside,
}

/// The services a worker's fault may act on.
pub struct Outside {
    pub gateway_url: String,
    pub queue: Mutex<Option<redis::Connection>>,
    /// The queue's visibility timeout, in real milliseconds.
    pub visibility_ms: u64,
    /// The lock server's process id, for a restart at the worker's trigger, and its URL.
    pub redis_pid: Option<i32>,
    pub redis_url: String,
    /// The lock server's clock offset file, when the plan jumps its clock.
    pub clock_file: Option<PathBuf>,
}

impl LiveFaults {
    /// The faults of a worker that takes none itself, as a team's program takes none: its
    /// faults are given from outside (`foreign::faults`), so it has no plan, no latency of
    /// its own and no connection of its own to any server.
    pub fn none(
        worker: WorkerId,
        log: Arc<EventLog>,
        clock: crate::live::clock::LiveClock,
        mechanism: fencesim_model::Mechanism,
        workers: u32,
    ) -> LiveFaults {
        LiveFaults {
            worker,
            log,
            planned: Vec::new(),
            progress: Mutex::default(),
            progress_file: PathBuf::new(),
            keep_counts: false,
            admin: Mutex::new(None),
            latency_ms: [0; Hop::COUNT],
            held: Mutex::default(),
            clock,
            last_request: Mutex::default(),
            last_hop: Mutex::default(),
            mechanism,
            workers,
            turns: crate::live::turns::Turns::default(),
            outside: Outside {
                gateway_url: String::new(),
                queue: Mutex::new(None),
                visibility_ms: 0,
                redis_pid: None,
                redis_url: String::new(),
                clock_file: None,
            },
        }
    }

    /// The worker reached `step`: count it and take the faults it triggers.
    pub fn step(&self, step: StepKind) {
        *self.last_hop.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let count = progress.steps.entry(step).or_default();
        *count += 1;
        let trigger = Trigger::Step { worker: self.worker, step, nth: *count };
        drop(self.take(progress, trigger));
    }

    /// A request is about to leave on `hop`: count it and take the faults it triggers,
    /// before it leaves; then it takes the world's latency on the hop, as in the
    /// simulation. The simulation gives a worker's own work no time, so the work done since
    /// the worker's last answer (or the end of its last sleep), and what the real component
    /// took to answer the last request on the hop, are part of the latency: the request
    /// waits only the rest of it, and a story of many requests does not fall behind the
    /// simulated one by a real fraction of a millisecond each.
    pub async fn call(&self, hop: Hop) {
        self.call_paced(hop, true).await
    }

    /// `call`, for a request the batch makes (`paced`: it stands for its latency between
    /// two refund calls, as `live::clock::due` counts) or one made beside it (a renewal).
    pub async fn call_paced(&self, hop: Hop, paced: bool) {
        self.take_due_by_time();
        {
            let inside = self.last_hop.lock().unwrap_or_else(|p| p.into_inner()).replace(hop) == Some(hop);
            let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
            let count = progress.calls.entry(hop).or_default();
            *count += 1;
            let call = Trigger::Call { worker: self.worker, hop, nth: *count };
            self.last_request.lock().unwrap_or_else(|p| p.into_inner())[hop as usize].nth = *count;
            let within = inside.then(|| {
                let count = progress.within.entry(hop).or_default();
                *count += 1;
                Trigger::Within { worker: self.worker, hop, nth: *count }
            });
            progress = self.take(progress, call);
            if let Some(within) = within {
                drop(self.take(progress, within));
            }
        }
        let held =
            std::mem::take(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).request_ms[hop as usize]);
        let latency = self.clock.real(self.latency_ms[hop as usize]);
        let last = &self.last_request;
        let cost =
            Duration::from_micros(last.lock().unwrap_or_else(|p| p.into_inner())[hop as usize].cost_us);
        // a longer gap is not work but a wait (for a job, or stopped in a pause): the
        // request then takes its whole latency, as in the simulation
        let rest = match crate::live::clock::since_woke() {
            Some(worked) if worked < latency => latency.saturating_sub(worked + cost),
            _ => latency.saturating_sub(cost),
        };
        if paced {
            crate::live::clock::due(latency + self.clock.real(held));
        }
        sleep_real(rest + self.clock.real(held)).await;
        self.turns.wait_for(self.last_act(hop));
        last.lock().unwrap_or_else(|p| p.into_inner())[hop as usize].sent_us = crate::live::clock::wall_us();
    }

    /// The worker's last request on `hop`, as `live::turns` names it.
    fn last_act(&self, hop: Hop) -> crate::live::turns::Act {
        let nth = self.last_request.lock().unwrap_or_else(|p| p.into_inner())[hop as usize].nth;
        crate::live::turns::Act::Request { worker: self.worker.0, hop, nth }
    }

    /// The answer to the request on `hop` is back: it takes the hold-up armed for it.
    pub async fn answered(&self, hop: Hop) {
        self.turns.done(self.last_act(hop));
        {
            let mut last = self.last_request.lock().unwrap_or_else(|p| p.into_inner());
            let request = &mut last[hop as usize];
            request.cost_us = crate::live::clock::wall_us().saturating_sub(request.sent_us);
        }
        self.take_due_by_time();
        let held =
            std::mem::take(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).reply_ms[hop as usize]);
        if hop != Hop::Redis {
            // a renewal's answer may be held too: only the batch's hops are counted
            crate::live::clock::due(self.clock.real(held));
        }
        sleep_story(self.clock, held).await;
        crate::live::clock::woke();
    }
    /// Takes this worker's faults whose time has come (those that arm its next requests):
    /// the simulation arms them at their time, and the next request after it takes them.
    fn take_due_by_time(&self) {
        let now = fencesim_model::Clock::now_ms(&self.clock);
        let due =
            self.planned.iter().any(|(_, f)| matches!(f.trigger, Trigger::At { at_ms } if at_ms <= now));
        if !due {
            return;
        }
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let mut times: Vec<u64> = self
            .planned
            .iter()
            .filter_map(|(index, f)| match f.trigger {
                Trigger::At { at_ms } if at_ms <= now && !progress.fired.contains(index) => Some(at_ms),
                _ => None,
            })
            .collect();
        times.sort_unstable();
        times.dedup();
        for at_ms in times {
            progress = self.take(progress, Trigger::At { at_ms });
        }
    }

    /// Takes every fault of `trigger` not yet fired, in plan order.
    fn take<'a>(
        &self,
        mut progress: std::sync::MutexGuard<'a, Progress>,
        trigger: Trigger,
    ) -> std::sync::MutexGuard<'a, Progress> {
        let due: Vec<Planned> = self
            .planned
            .iter()
            .filter(|(index, fault)| fault.trigger == trigger && !progress.fired.contains(index))
            .cloned()
            .collect();
        if due.is_empty() {
            if self.keep_counts {
                progress.write(&self.progress_file);
            }
            return progress;
        }
        for (index, fault) in due {
            // a fault another party's act came before in the simulation waits for it
            self.turns.wait_for(crate::live::turns::Act::Fault(index));
            progress.fired.push(index);
            progress.write(&self.progress_file);
            self.log.record(EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
            let signal = self.act(fault.kind);
            // it has acted (a stop or a kill acts as the signal is raised)
            self.turns.done(crate::live::turns::Act::Fault(index));
            if let Some(signal) = signal {
                let stopped = std::time::Instant::now();
                // SAFETY: raising a signal at the calling process has no memory effects; the
                // progress lock is held, and no other task of this process runs while it is
                // stopped or after it is killed.
                unsafe { libc::raise(signal) };
                // resumed: the freeze was a wait, not this worker's work, and the
                // simulated worker spends it between its calls too (`live::pace`)
                crate::live::clock::slept(stopped.elapsed());
                crate::live::clock::due(stopped.elapsed());
            }
        }
        progress
    }

    /// Does what `kind` does; the signal that stops or kills the process, if it is one.
    fn act(&self, kind: FaultKind) -> Option<libc::c_int> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        match kind {
            FaultKind::Pause { .. } => return Some(libc::SIGSTOP),
            FaultKind::Crash { .. } => return Some(libc::SIGKILL),
            FaultKind::DbDelay { delay_ms, .. } => held.request_ms[Hop::Database as usize] += delay_ms,
            FaultKind::RedisDelay { delay_ms, .. } => held.request_ms[Hop::Redis as usize] += delay_ms,
            FaultKind::DbReplyDelay { delay_ms, .. } => held.reply_ms[Hop::Database as usize] += delay_ms,
            FaultKind::RedisReplyDelay { delay_ms, .. } => held.reply_ms[Hop::Redis as usize] += delay_ms,
            FaultKind::GatewayLatency { extra_ms, .. } => held.gateway.extra_ms += extra_ms,
            FaultKind::LostResponse { .. } => held.gateway.lost += 1,
            FaultKind::GatewayTimeout { late_ms, .. } => held.gateway.late_ms = Some(late_ms),
            FaultKind::ExpireLease { merchant, .. } => {
                // a failure shows in the history as a lease that did not end
                let keys = self.mechanism.spec().lease_keys(merchant, self.workers);
                self.with_admin(|con| keys.iter().for_each(|key| drop(expire_now(con, key))));
            }
            FaultKind::GatewayOutage { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::LookupLag { .. } => {
                // a failure shows in the history as a gateway that went on answering
                let _ = crate::live::gateway::send_fault(&self.outside.gateway_url, kind);
            }
            FaultKind::Redeliver { worker } | FaultKind::DuplicateDelivery { worker } => {
                let mut queue = self.outside.queue.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(con) = queue.as_mut() {
                    let duplicate = matches!(kind, FaultKind::DuplicateDelivery { .. });
                    let _ = crate::live::queue::hand_on(con, worker, duplicate, self.outside.visibility_ms);
                }
            }
            FaultKind::RedisRestart { persistence, .. } => {
                if let Some(pid) = self.outside.redis_pid {
                    self.with_admin(|con| {
                        crate::live::servers::restart_now(Some(con), pid, persistence, &self.log)
                    });
                    // the connection is gone with the server: a new one is made when needed
                    *self.admin.lock().unwrap_or_else(|p| p.into_inner()) = None;
                }
            }
            FaultKind::RedisClockJump { by_ms, .. } => {
                if let Some(file) = &self.outside.clock_file {
                    // a failure shows in the history as leases that did not expire
                    let _ = crate::live::faketime::jump_ms(file, self.clock.real(by_ms).as_millis() as u64);
                }
            }
            // the live plan refuses these before any process starts
            FaultKind::RedisFailover { .. }
            | FaultKind::SettlementDelay { .. }
            | FaultKind::SettlementReplyDelay { .. } => {}
        }
        None
    }

    /// Runs `f` on the worker's own connection to the lock server, made again if a restart
    /// took the last one (nothing is run when the server cannot be reached).
    fn with_admin(&self, f: impl FnOnce(&mut redis::Connection)) {
        let mut admin = self.admin.lock().unwrap_or_else(|p| p.into_inner());
        if admin.is_none() {
            *admin = crate::live::redis::connect(&self.outside.redis_url).ok();
        }
        if let Some(con) = admin.as_mut() {
            f(con);
        }
    }

    /// Takes what faults armed for the worker's next refund call.
    pub fn take_gateway(&self) -> GatewayArmed {
        std::mem::take(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).gateway)
    }

    /// Puts back lost answers a call did not take (a conflict is always heard).
    pub fn keep_lost(&self, lost: u32) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).gateway.lost += lost;
    }
}

/// Every key `merchant`'s lease may be held at expires now, on the server at `url`.
pub fn expire_lease(
    url: &str,
    world: &fencesim_sim::WorldConfig,
    merchant: fencesim_model::MerchantId,
) -> Result<(), String> {
    let mut con = crate::live::redis::connect(url)?;
    for key in world.mechanism.spec().lease_keys(merchant, world.workers) {
        expire_now(&mut con, &key)?
    }
    Ok(())
}

/// The lease key expires now, as the server expires a key whose time is up (so that the
/// expiry watch hears of it): its time is set to a millisecond from now, and the key is
/// read a little after, which makes the server expire it then.
pub fn expire_now(con: &mut redis::Connection, key: &str) -> Result<(), String> {
    let failed = |e: redis::RedisError| format!("Redis: cannot expire {key}: {e}");
    redis::cmd("PEXPIRE").arg(key).arg(1).query::<i64>(con).map_err(failed)?;
    std::thread::sleep(Duration::from_micros(1_200));
    redis::cmd("EXISTS").arg(key).query::<i64>(con).map_err(failed)?;
    Ok(())
}
