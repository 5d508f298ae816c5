//! The fault plan: an explicit, serializable list of faults, each with a kind, a target
//! and a trigger.

use fencesim_model::{StepKind, WorkerId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultKind {
    /// Stop the whole worker process (every task of it, background ones included) for a while.
    Pause { worker: WorkerId, duration_ms: u64 },
}

impl FaultKind {
    pub fn worker(&self) -> WorkerId {
        match self {
            FaultKind::Pause { worker, .. } => *worker,
        }
    }
}

/// When a fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// At this many milliseconds after the start of the run.
    At { at_ms: u64 },
    /// The `nth` time (from 1) the fault's worker reaches `step`.
    Step { step: StepKind, nth: u32 },
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
