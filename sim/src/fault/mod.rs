//! Faults: the plan (kinds, targets, triggers, validation), as data that the config, the
//! history and the adapters name. What a fault does to the world when it fires, and the
//! world's bookkeeping of faults, are the world's (`world/fault_engine.rs`,
//! `world/fault_state.rs`), above the history that records them.

mod plan;

pub use plan::{Aim, Fault, FaultKind, FaultName, FaultPlan, Hop, Size, Timing, Trigger};
