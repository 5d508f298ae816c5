//! The fault plan: an explicit, serializable list of faults, each with a kind, a target
//! and a trigger. A replay file stores the plan itself, so it keeps its meaning when the
//! generator that made it changes.

use crate::redis::Persistence;
use fencesim_model::{MerchantId, StepKind, WorkerId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FaultKind {
    /// Stop the whole worker process, background tasks included, for a while.
    Pause { worker: WorkerId, duration_ms: u64 },
    /// Kill the worker process; a new one starts after `restart_after_ms`. Its job comes
    /// back by the queue.
    Crash { worker: WorkerId, restart_after_ms: u64 },
    /// The merchant's lease key on this Redis instance expires now.
    ExpireLease { instance: u8, merchant: MerchantId },
    /// This Redis instance's clock jumps forward.
    RedisClockJump { instance: u8, by_ms: u64 },
    /// This Redis instance restarts, keeping what its persistence mode keeps.
    RedisRestart { instance: u8, persistence: Persistence },
    /// The queue gives up on the worker's delivery now: another worker gets the job.
    Redeliver { worker: WorkerId },
    /// The queue delivers the worker's job once more, to another worker.
    DuplicateDelivery { worker: WorkerId },
    /// The worker's next request to the database is held up on its way there.
    DbDelay { worker: WorkerId, delay_ms: u64 },
    /// The worker's next gateway call takes this much longer.
    GatewayLatency { worker: WorkerId, extra_ms: u64 },
    /// The worker's next refund call moves the money, and the answer never arrives.
    LostResponse { worker: WorkerId },
    /// For a while, a call whose idempotency key is still in flight gets a conflict.
    GatewayConflicts { for_ms: u64 },
}

impl FaultKind {
    /// The kinds by name, for coverage and swarm choices.
    pub const NAMES: [&'static str; 11] = [
        "pause",
        "crash",
        "expire-lease",
        "redis-clock-jump",
        "redis-restart",
        "redeliver",
        "duplicate-delivery",
        "db-delay",
        "gateway-latency",
        "lost-response",
        "gateway-conflicts",
    ];

    pub fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }

    pub fn index(&self) -> usize {
        match self {
            FaultKind::Pause { .. } => 0,
            FaultKind::Crash { .. } => 1,
            FaultKind::ExpireLease { .. } => 2,
            FaultKind::RedisClockJump { .. } => 3,
            FaultKind::RedisRestart { .. } => 4,
            FaultKind::Redeliver { .. } => 5,
            FaultKind::DuplicateDelivery { .. } => 6,
            FaultKind::DbDelay { .. } => 7,
            FaultKind::GatewayLatency { .. } => 8,
            FaultKind::LostResponse { .. } => 9,
            FaultKind::GatewayConflicts { .. } => 10,
        }
    }
}

/// When a fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// At this many milliseconds after the start of the run.
    At { at_ms: u64 },
    /// The `nth` time (from 1) `worker` reaches `step`: the fault fires right there.
    Step { worker: WorkerId, step: StepKind, nth: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fault {
    #[serde(flatten)]
    pub kind: FaultKind,
    pub trigger: Trigger,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    pub faults: Vec<Fault>,
}

impl FaultPlan {
    pub fn none() -> FaultPlan {
        FaultPlan::default()
    }

    pub fn with(mut self, kind: FaultKind, trigger: Trigger) -> FaultPlan {
        self.faults.push(Fault { kind, trigger });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_through_json_and_refuses_unknown_fields() {
        let plan = FaultPlan::none()
            .with(
                FaultKind::Pause { worker: WorkerId(0), duration_ms: 8_000 },
                Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: 815 },
            )
            .with(
                FaultKind::RedisRestart { instance: 0, persistence: Persistence::None },
                Trigger::At { at_ms: 5 },
            );
        let text = serde_json::to_string(&plan).unwrap();
        assert!(text.contains(r#""kind":"pause","worker":"A","duration_ms":8000"#), "{text}");
        assert_eq!(serde_json::from_str::<FaultPlan>(&text).unwrap(), plan);
        let bad = r#"{"faults":[{"kind":"pause","worker":"A","duration_ms":1,"trigger":{"on":"at","at_ms":1,"extra":2}}]}"#;
        assert!(serde_json::from_str::<FaultPlan>(bad).is_err());
    }
}
