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
    None
}

/// Who takes a fault of this kind live.
enum Taker {
    /// The process of the worker it is about, at that worker's own trigger; the
    /// coordinator at a time (a pause, a crash).
    Itself,
    /// The process of the worker it is about, at that worker's own trigger or at a time
    /// (it arms the worker's next request: a hold-up, a gateway call's fault).
    Armed,
    /// The process whose trigger it is, or the coordinator at a time (it acts on a
    /// service: an early expiry, the gateway, the queue).
    Anyone,
}

fn taker(kind: FaultKind) -> Option<Taker> {
    match kind {
        FaultKind::Pause { .. } | FaultKind::Crash { .. } => Some(Taker::Itself),
        FaultKind::DbDelay { .. }
        | FaultKind::RedisDelay { .. }
        | FaultKind::DbReplyDelay { .. }
        | FaultKind::RedisReplyDelay { .. }
        | FaultKind::GatewayLatency { .. }
        | FaultKind::LostResponse { .. }
        | FaultKind::GatewayTimeout { .. } => Some(Taker::Armed),
        FaultKind::ExpireLease { .. }
        | FaultKind::GatewayOutage { .. }
        | FaultKind::GatewayConflicts { .. }
        | FaultKind::LookupLag { .. }
        | FaultKind::Redeliver { .. }
        | FaultKind::DuplicateDelivery { .. }
        | FaultKind::RedisRestart { .. }
        | FaultKind::RedisClockJump { .. } => Some(Taker::Anyone),
        FaultKind::RedisFailover { .. }
        | FaultKind::SettlementDelay { .. }
        | FaultKind::SettlementReplyDelay { .. } => None,
    }
}

/// The plan as the live run takes it, or the first fault it cannot take, named.
pub fn live_plan(world: &WorldConfig) -> Result<LivePlan, String> {
    let mut plan = LivePlan { at_steps: vec![Vec::new(); world.workers as usize], at_times: Vec::new() };
    for (index, fault) in world.faults.faults.iter().enumerate() {
        let planned = (index, fault.clone());
        let about = fault.kind.worker();
        match (taker(fault.kind), fault.trigger.worker()) {
            (None, _) => return Err(cannot(index, fault)),
            (Some(Taker::Anyone), Some(by)) => plan.at_steps[by.0 as usize].push(planned),
            (Some(Taker::Itself | Taker::Armed), Some(by)) if about == Some(by) => {
                plan.at_steps[by.0 as usize].push(planned)
            }
            (Some(Taker::Itself | Taker::Armed), Some(by)) => return Err(elsewhere(index, fault, by)),
            (Some(Taker::Armed), None) => match about {
                Some(worker) => plan.at_steps[worker.0 as usize].push(planned),
                None => return Err(cannot(index, fault)),
            },
            (Some(Taker::Itself | Taker::Anyone), None) => match fault.trigger {
                Trigger::At { at_ms } => plan.at_times.push((at_ms, planned)),
                _ => return Err(cannot(index, fault)),
            },
        }
    }
    plan.at_times.sort_by_key(|(at_ms, (index, _))| (*at_ms, *index));
    Ok(plan)
}

fn cannot(index: usize, fault: &Fault) -> String {
    format!(
        "fault {} ({} at {}) cannot be done live: {}",
        index + 1,
        fault.kind.name(),
        fault.trigger.describe(),
        why_not(fault.kind)
    )
}

/// Why the live run cannot do a kind it refuses.
fn why_not(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::RedisFailover { .. } => "the live run's Redis has no replica",
        FaultKind::SettlementDelay { .. } | FaultKind::SettlementReplyDelay { .. } => {
            "the live run has no settlement ledger"
        }
        FaultKind::Pause { .. }
        | FaultKind::Crash { .. }
        | FaultKind::ExpireLease { .. }
        | FaultKind::Redeliver { .. }
        | FaultKind::DuplicateDelivery { .. }
        | FaultKind::DbDelay { .. }
        | FaultKind::GatewayLatency { .. }
        | FaultKind::LostResponse { .. }
        | FaultKind::GatewayConflicts { .. }
        | FaultKind::RedisDelay { .. }
        | FaultKind::GatewayTimeout { .. }
        | FaultKind::GatewayOutage { .. }
        | FaultKind::RedisReplyDelay { .. }
        | FaultKind::DbReplyDelay { .. }
        | FaultKind::LookupLag { .. }
        | FaultKind::RedisRestart { .. }
        | FaultKind::RedisClockJump { .. } => "not with this trigger",
    }
}

fn elsewhere(index: usize, fault: &Fault, by: WorkerId) -> String {
    format!(
        "fault {} ({} at {}) cannot be done live: it is about another worker than {by}, whose trigger it is, and a worker's process takes only its own",
        index + 1,
        fault.kind.name(),
        fault.trigger.describe()
    )
}
