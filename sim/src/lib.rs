//! The deterministic world fencesim's workers run in: simulated time (madsim), a
//! simulated Redis, the real SQLite refund store, a payment gateway and a job queue, each
//! a pure core plus a thin async face, all recording typed events into one history.
//!
//! - `config`: the run as data, with its defaults and validation;
//! - `clock`, `redis`, `gateway`, `queue`: the components' pure cores;
//! - `port`: one adapter per port of the model; `wiring`: how a worker's ports are put together;
//! - `fault`: the fault plan, as data;
//! - `replica`: a replica of the lease's Redis and its failover;
//! - `ledger`: the epochs, the checkers' ground truth about leases;
//! - `history`: the typed events; `record`: what a run leaves behind;
//! - `world`: the shared state, and the fault engine that changes it when a fault fires;
//!   `run`: the loop that keeps time;
//! - `sql_watch`: the real time a run's statements take, for the bench (off unless asked).

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim`. The repository's .cargo/config.toml sets it \
     for every cargo command run inside it (`cargo build`, `cargo test`, `cargo install --locked --path .`); \
     a RUSTFLAGS variable replaces that setting, and `cargo install --git` never reads it. \
     Run instead: RUSTFLAGS=\"--cfg madsim\" cargo install --locked --git <the repository's URL> fencesim"
);

pub mod clock;
pub mod config;
mod databases;
pub mod fault;
pub mod gateway;
pub mod history;
pub mod ledger;
pub mod order;
pub mod port;
pub mod queue;
pub mod record;
pub mod redis;
pub mod replica;
pub mod run;
pub mod sql_watch;
pub mod wiring;
mod world;

pub use clock::{SimClock, WallMs};
pub use config::{Arrival, Latency, Limits, Settlement, WorldConfig};
pub use fault::{Aim, Fault, FaultKind, FaultName, FaultPlan, Hop, Size, Timing, Trigger};
pub use gateway::{GatewayMode, LedgerEntry};
pub use history::{trace_hash, write_trace, Actor, CallOutcome, Event, EventKind};
pub use ledger::{Epoch, EpochEnd, Moment};
pub use order::Served;
pub use record::RunRecord;
pub use redis::Persistence;
pub use replica::Replication;
pub use run::{run_ordered, run_wired, run_world};
pub use wiring::{Connections, Plain, Wired, WiredOf, Wiring};
