//! The fault engine's part of the world's state: faults armed for a worker's next
//! request, the timed faults still to come, and the bookkeeping of paused and crashed
//! workers. Plain data, so that the world can hold it without knowing the engine.

use crate::config::WorldConfig;
use crate::fault::{Hop, Trigger};
use fencesim_model::{Cents, IdempotencyKey, RefundId, StepKind, WorkerId};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use strum::EnumCount;

/// Faults armed for a worker's next action.
#[derive(Default, Clone, Copy)]
pub struct Armed {
    /// Extra delay for the next request on each hop (the gateway's: for its answer).
    pub delay_ms: [u64; Hop::COUNT],
    /// Extra delay for the answer to the next request on each hop, on its way back.
    pub reply_delay_ms: [u64; Hop::COUNT],
    pub lost_responses: u32,
    /// How late the next refund call lands, if it is to time out.
    pub late_ms: Option<u64>,
}

/// A refund call on its way to the gateway: it lands at `lands_at_ms` (now, or later when
/// it timed out and is held up).
#[derive(Clone, Debug)]
pub struct RefundCall {
    pub lands_at_ms: u64,
    pub worker: WorkerId,
    pub epoch: Option<u32>,
    pub reference: RefundId,
    pub key: IdempotencyKey,
    pub amount: Cents,
    pub latency_ms: u64,
}

/// The fault engine's part of the world's state.
pub(crate) struct FaultState {
    pub armed: Vec<Armed>,
    pub conflicts_until_ms: u64,
    /// The gateway refuses every request until then.
    pub outage_until_ms: u64,
    /// The copy lookups are answered from (stalled by a lookup-lag fault).
    pub lookup: crate::gateway::LookupCopy,
    /// Redis instances restarting, with when each answers again.
    pub redis_down_until_ms: Vec<(u8, u64)>,
    /// Refund calls that timed out and have not landed yet, in the order they were sent.
    pub late_calls: Vec<RefundCall>,
    /// Workers to resume, with when.
    pub resumes: Vec<(u64, WorkerId)>,
    /// Crashed workers to start again, with when.
    pub restarts: Vec<(u64, WorkerId)>,
    pub incarnation: Vec<u32>,
    pub crashed: Vec<bool>,
    /// Timed faults not fired yet (index into the plan).
    pub timed: Vec<usize>,
    /// How often each worker reached each step: `[worker][step]`.
    step_counts: Vec<[u32; StepKind::COUNT]>,
    pub last_fault_ms: Option<u64>,
}

impl FaultState {
    pub fn new(config: &WorldConfig) -> FaultState {
        let workers = config.workers as usize;
        let faults = &config.faults.faults;
        let timed = (0..faults.len()).filter(|&i| matches!(faults[i].trigger, Trigger::At { .. })).collect();
        FaultState {
            armed: vec![Armed::default(); workers],
            conflicts_until_ms: 0,
            outage_until_ms: 0,
            lookup: Default::default(),
            redis_down_until_ms: Vec::new(),
            late_calls: Vec::new(),
            resumes: Vec::new(),
            restarts: Vec::new(),
            incarnation: vec![1; workers],
            crashed: vec![false; workers],
            timed,
            step_counts: vec![[0; StepKind::COUNT]; workers],
            last_fault_ms: None,
        }
    }

    /// Whether `instance` is down (restarting) at `now`.
    pub fn redis_down(&self, instance: u8, now_ms: u64) -> bool {
        self.redis_down_until_ms.iter().any(|&(down, until)| down == instance && now_ms < until)
    }

    /// Arms `delay_ms` more for `worker`'s next request on `hop`.
    pub fn hold_up(&mut self, worker: WorkerId, hop: Hop, delay_ms: u64) {
        self.armed[worker.0 as usize].delay_ms[hop as usize] += delay_ms;
    }

    /// Arms `delay_ms` more for the answer to `worker`'s next request on `hop`.
    pub fn hold_up_reply(&mut self, worker: WorkerId, hop: Hop, delay_ms: u64) {
        self.armed[worker.0 as usize].reply_delay_ms[hop as usize] += delay_ms;
    }

    /// Takes the delay armed for the answer to `worker`'s next request on `hop` (0 if none).
    pub fn take_reply_delay(&mut self, worker: WorkerId, hop: Hop) -> u64 {
        std::mem::take(&mut self.armed[worker.0 as usize].reply_delay_ms[hop as usize])
    }

    /// Takes the delay armed for `worker`'s next request on `hop` (0 if none).
    pub fn take_delay(&mut self, worker: WorkerId, hop: Hop) -> u64 {
        std::mem::take(&mut self.armed[worker.0 as usize].delay_ms[hop as usize])
    }

    /// Counts `worker` reaching `step` and returns how often it has now.
    pub fn count_step(&mut self, worker: WorkerId, step: StepKind) -> u32 {
        let count = &mut self.step_counts[worker.0 as usize][step as usize];
        *count += 1;
        *count
    }

    /// Nothing is still to come: no timed fault, no resume, no restart, no late call.
    pub fn quiet(&self) -> bool {
        self.timed.is_empty()
            && self.restarts.is_empty()
            && self.resumes.is_empty()
            && self.late_calls.is_empty()
    }

    /// Takes the late calls that land by `now`, in the order they land (then were sent).
    pub fn take_landed(&mut self, now: u64) -> Vec<RefundCall> {
        let (mut landed, waiting): (Vec<RefundCall>, Vec<RefundCall>) =
            std::mem::take(&mut self.late_calls).into_iter().partition(|c| c.lands_at_ms <= now);
        self.late_calls = waiting;
        landed.sort_by_key(|c| c.lands_at_ms);
        landed
    }

    /// Takes the entries of `list` due at `now`, in the order they were added.
    pub fn take_due(list: &mut Vec<(u64, WorkerId)>, now: u64) -> Vec<(u64, WorkerId)> {
        let mut due = Vec::new();
        list.retain(|&(at, worker)| {
            let is_due = at <= now;
            if is_due {
                due.push((at, worker));
            }
            !is_due
        });
        due
    }
}

/// What one request counted, where that fires a trigger of the plan: its number on its
/// hop (for a call trigger), and its number among the hop's requests inside an operation
/// (for a within trigger).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counted {
    pub nth: Option<u32>,
    pub within: Option<u32>,
}

impl Counted {
    pub fn fires(&self) -> bool {
        self.nth.is_some() || self.within.is_some()
    }
}

/// The request numbers that fire a trigger, per worker and hop, sorted.
type Firing = Vec<[Vec<u32>; Hop::COUNT]>;

fn firing_for(config: &WorldConfig, wanted: impl Fn(&Trigger) -> Option<(WorkerId, Hop, u32)>) -> Firing {
    let mut firing: Firing = (0..config.workers).map(|_| Default::default()).collect();
    for (worker, hop, nth) in config.faults.faults.iter().filter_map(|fault| wanted(&fault.trigger)) {
        if let Some(counts) = firing.get_mut(worker.0 as usize) {
            counts[hop as usize].push(nth);
        }
    }
    for nths in firing.iter_mut().flatten() {
        nths.sort_unstable();
    }
    firing
}

/// Counts each worker's requests per hop, without the world's lock, and says which counts
/// fire a call or within trigger of the plan: the request path stays cheap whatever the
/// plan holds. A request is inside an operation when the worker's previous request was on
/// the same hop and no protocol step came between; only the workers a within trigger names
/// are followed that closely.
pub(crate) struct CallCounter {
    counts: Vec<[AtomicU32; Hop::COUNT]>,
    firing: Firing,
    within_counts: Vec<[AtomicU32; Hop::COUNT]>,
    within_firing: Firing,
    /// Per followed worker: 1 + the hop of its last request since its last step, or 0.
    last: Vec<AtomicU8>,
    followed: Vec<bool>,
}

impl CallCounter {
    pub fn new(config: &WorldConfig) -> CallCounter {
        let workers = config.workers as usize;
        let firing = firing_for(config, |trigger| match *trigger {
            Trigger::Call { worker, hop, nth } => Some((worker, hop, nth)),
            Trigger::At { .. } | Trigger::Step { .. } | Trigger::Within { .. } => None,
        });
        let within_firing = firing_for(config, |trigger| match *trigger {
            Trigger::Within { worker, hop, nth } => Some((worker, hop, nth)),
            Trigger::At { .. } | Trigger::Step { .. } | Trigger::Call { .. } => None,
        });
        let followed = within_firing.iter().map(|hops| hops.iter().any(|nths| !nths.is_empty())).collect();
        CallCounter {
            counts: (0..workers).map(|_| Default::default()).collect(),
            firing,
            within_counts: (0..workers).map(|_| Default::default()).collect(),
            within_firing,
            last: (0..workers).map(|_| AtomicU8::new(0)).collect(),
            followed,
        }
    }

    /// Counts a request of `worker` on `hop`, and says which triggers its numbers fire.
    pub fn count(&self, worker: WorkerId, hop: Hop) -> Counted {
        let (w, h) = (worker.0 as usize, hop as usize);
        let mut counted = Counted::default();
        if self.followed[w] && self.last[w].swap(h as u8 + 1, Ordering::Relaxed) == h as u8 + 1 {
            let firing = &self.within_firing[w][h];
            let nth = self.within_counts[w][h].fetch_add(1, Ordering::Relaxed) + 1;
            counted.within = firing.binary_search(&nth).is_ok().then_some(nth);
        }
        let firing = &self.firing[w][h];
        if !firing.is_empty() {
            let nth = self.counts[w][h].fetch_add(1, Ordering::Relaxed) + 1;
            counted.nth = firing.binary_search(&nth).is_ok().then_some(nth);
        }
        counted
    }

    /// `worker` reached a protocol step: its next request begins a new operation.
    pub fn stepped(&self, worker: WorkerId) {
        if self.followed[worker.0 as usize] {
            self.last[worker.0 as usize].store(0, Ordering::Relaxed);
        }
    }
}
