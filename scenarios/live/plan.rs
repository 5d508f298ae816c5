//! What of a world and its fault plan a live run can do, and how. A fault a worker fires
//! at one of its own steps, or before its own n-th request on a hop, is taken by the
//! worker process itself at that exact moment (`faults`); a fault at a time is taken by
//! the coordinator when the story's clock reaches it (`supervise`). Anything else is
//! refused with its name: never run as something it is not.

use fencesim_model::WorkerId;
use fencesim_sim::{Fault, FaultKind, Trigger, WorldConfig};

/// A fault of the plan, by its place in the plan (a fault fires once).
pub type Planned = (usize, Fault);

/// The plan split by who takes each fault.
#[derive(Clone, Debug, Default)]
pub struct LivePlan {
    /// The faults each worker takes itself (at its steps, before its requests), by worker.
    pub at_steps: Vec<Vec<Planned>>,
    /// Faults the coordinator takes when the story reaches their time, earliest first.
    pub at_times: Vec<(u64, Planned)>,
}

impl LivePlan {
    /// How long the pause at `index` lasts, in the story's milliseconds (0 if it is none).
    pub fn pause_ms(&self, index: usize, world: &WorldConfig) -> u64 {
        match world.faults.faults.get(index).map(|fault| fault.kind) {
            Some(FaultKind::Pause { duration_ms, .. }) => duration_ms,
            _ => 0,
        }
    }

    /// Whether `worker` may crash in this plan: its step counts then outlive its process.
    pub fn may_crash(&self, worker: WorkerId, world: &WorldConfig) -> bool {
        world
            .faults
            .faults
            .iter()
            .any(|fault| matches!(fault.kind, FaultKind::Crash { worker: w, .. } if w == worker))
    }
}

/// Why a world cannot be run live, if it cannot: the first thing the live arm lacks.
pub fn world_refusal(world: &WorldConfig) -> Option<String> {
    let instances = world.mechanism.redis_instances();
    if instances != 1 {
        return Some(format!(
            "{} holds its lease on {instances} Redis instances; the live run has one",
            world.mechanism
        ));
    }
    if world.settlement.is_some() {
        return Some(
            "the world has the second store (the settlement ledger); the live run has one store".into(),
        );
    }
    if world.replica.is_some() {
        return Some("the world's Redis has a replica; the live run has one server".into());
    }
    if world.lookup_lag_ms > 0 {
        return Some(format!(
            "the world's gateway answers lookups from a copy {} ms behind; the live gateway answers from its ledger",
            world.lookup_lag_ms
        ));
    }
    None
}

/// The plan as the live run takes it, or the first fault it cannot take, named.
pub fn live_plan(world: &WorldConfig) -> Result<LivePlan, String> {
    let mut plan = LivePlan { at_steps: vec![Vec::new(); world.workers as usize], at_times: Vec::new() };
    for (index, fault) in world.faults.faults.iter().enumerate() {
        let own = matches!(fault.kind, FaultKind::Pause { .. } | FaultKind::Crash { .. });
        let held = matches!(
            fault.kind,
            FaultKind::DbDelay { .. }
                | FaultKind::RedisDelay { .. }
                | FaultKind::DbReplyDelay { .. }
                | FaultKind::RedisReplyDelay { .. }
        );
        let expiry = matches!(fault.kind, FaultKind::ExpireLease { .. });
        match fault.trigger {
            Trigger::Step { worker, .. } | Trigger::Call { worker, .. }
                if expiry || ((own || held) && fault.kind.worker() == Some(worker)) =>
            {
                plan.at_steps[worker.0 as usize].push((index, fault.clone()));
            }
            Trigger::At { at_ms } if own || expiry => plan.at_times.push((at_ms, (index, fault.clone()))),
            _ => return Err(cannot(index, fault)),
        }
    }
    plan.at_times.sort_by_key(|(at_ms, (index, _))| (*at_ms, *index));
    Ok(plan)
}

fn cannot(index: usize, fault: &Fault) -> String {
    format!(
        "fault {} ({} at {}) cannot be done live yet: the live run takes pauses and crashes of a worker at its own step, before its own n-th request on a hop or at a time, held-up Redis and database requests and replies at the worker's own step or request, and early lease expiries at any of those",
        index + 1,
        fault.kind.name(),
        fault.trigger.describe()
    )
}
