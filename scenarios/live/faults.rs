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

/// Hold-ups a fault armed, in the story's milliseconds, by `Hop`: for the worker's next
/// request on a hop, and for its answer on the way back.
#[derive(Default)]
pub struct Held {
    pub request_ms: [u64; Hop::COUNT],
    pub reply_ms: [u64; Hop::COUNT],
}

/// Sleeps `story_ms` of the story: on the runtime's timer, or, for a millisecond or two
/// (which that timer keeps only to the whole millisecond, late by up to one), here, to the
/// tens of microseconds, holding up the process's other task (a renewal) that long at most.
async fn sleep_story(clock: crate::live::clock::LiveClock, story_ms: u64) {
    let real = clock.real(story_ms);
    if real > PRECISE {
        tokio::time::sleep(real).await;
    } else if !real.is_zero() {
        std::thread::sleep(real);
    }
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
}

impl LiveFaults {
    /// The worker reached `step`: count it and take the faults it triggers.
    pub fn step(&self, step: StepKind) {
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let count = progress.steps.entry(step).or_default();
        *count += 1;
        let trigger = Trigger::Step { worker: self.worker, step, nth: *count };
        self.take(progress, trigger);
    }

    /// A request is about to leave on `hop`: count it and take the faults it triggers,
    /// before it leaves; then it takes the world's latency on the hop, as in the
    /// simulation (the real component's own comes on top, tens of microseconds).
    pub async fn call(&self, hop: Hop) {
        {
            let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
            let count = progress.calls.entry(hop).or_default();
            *count += 1;
            let trigger = Trigger::Call { worker: self.worker, hop, nth: *count };
            self.take(progress, trigger);
        }
        let held =
            std::mem::take(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).request_ms[hop as usize]);
        sleep_story(self.clock, self.latency_ms[hop as usize] + held).await;
    }

    /// The answer to the request on `hop` is back: it takes the hold-up armed for it.
    pub async fn answered(&self, hop: Hop) {
        let held =
            std::mem::take(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).reply_ms[hop as usize]);
        sleep_story(self.clock, held).await;
    }
    /// Takes every fault of `trigger` not yet fired, in plan order.
    fn take(&self, mut progress: std::sync::MutexGuard<'_, Progress>, trigger: Trigger) {
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
            return;
        }
        for (index, fault) in due {
            progress.fired.push(index);
            progress.write(&self.progress_file);
            self.log.record(EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
            let signal = match fault.kind {
                FaultKind::Pause { .. } => libc::SIGSTOP,
                FaultKind::Crash { .. } => libc::SIGKILL,
                FaultKind::DbDelay { delay_ms, .. } => {
                    self.hold(Hop::Database, delay_ms, false);
                    continue;
                }
                FaultKind::RedisDelay { delay_ms, .. } => {
                    self.hold(Hop::Redis, delay_ms, false);
                    continue;
                }
                FaultKind::DbReplyDelay { delay_ms, .. } => {
                    self.hold(Hop::Database, delay_ms, true);
                    continue;
                }
                FaultKind::RedisReplyDelay { delay_ms, .. } => {
                    self.hold(Hop::Redis, delay_ms, true);
                    continue;
                }
                FaultKind::ExpireLease { merchant, .. } => {
                    let mut admin = self.admin.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(con) = admin.as_mut() {
                        // a failure shows in the history as a lease that did not end
                        let _ = expire_now(con, &merchant.lock_key());
                    }
                    continue;
                }
                _ => continue,
            };
            // SAFETY: raising a signal at the calling process has no memory effects; the
            // progress lock is held, and no other task of this process runs while it is
            // stopped or after it is killed.
            unsafe { libc::raise(signal) };
        }
    }
}

impl LiveFaults {
    /// Arms `delay_ms` more for the next request on `hop`, or for its answer.
    fn hold(&self, hop: Hop, delay_ms: u64, reply: bool) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let slot = if reply { &mut held.reply_ms } else { &mut held.request_ms };
        slot[hop as usize] += delay_ms;
    }
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
