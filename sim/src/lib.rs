//! The deterministic world fencesim's workers run in: simulated time (madsim), a
//! simulated Redis, the real SQLite refund store, a payment gateway and a job queue, each
//! a pure core plus a thin async face, all recording typed events into one history.

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim` (set in .cargo/config.toml); \
     a RUSTFLAGS variable replaces that setting: add `--cfg madsim` to it"
);

pub mod clock;
pub mod faults;
pub mod gateway;
pub mod history;
pub mod queue;
pub mod redis;
pub mod world;

pub use clock::{SimClock, WallMs};
pub use faults::{Fault, FaultKind, FaultPlan, Trigger};
pub use gateway::{CallOutcome, GatewayMode, LedgerEntry};
pub use history::{trace_hash, write_trace, Actor, Event, EventKind};
pub use redis::Persistence;
pub use world::{run_world, Epoch, Latency, RunRecord, WorldConfig};
