//! Faults: the plan (kinds, targets, triggers, validation) and the engine that fires them
//! (timed faults, step triggers, faults armed for a worker's next request, pauses to
//! resume and crashed workers to start again).

mod engine;
mod plan;
mod state;

pub use plan::{Aim, Fault, FaultKind, FaultName, FaultPlan, Hop, Size, Timing, Trigger};
pub(crate) use state::{CallCounter, Counted, FaultState, RefundCall};
