//! The live arm: the worked example with real processes. Each worker is an OS process of
//! its own running the model's worker unchanged, against a real redis-server, a real
//! SQLite file in WAL mode, the gateway as an HTTP service on loopback and a Redis stream
//! as the queue. Every process writes its events as JSON Lines; the coordinator merges
//! them into one history, which the simulation's checkers judge and its narrator tells.
//!
//! - `clock`: the wall clock and the story's time; `log`: the event files;
//! - `redis`, `store`, `gateway`, `queue`: the model's ports over the real components;
//! - `worker`: a worker process; `processes`: the workers as the coordinator sees them
//!   (start, pause, resume, kill); `expiry`: Redis's expiries, seen as they happen;
//!   `coordinator`: the run, from its input to its verdict;
//! - `server`: a redis-server of the run's own; `postgres`: PostgreSQL as the refund
//!   store, and a cluster of the run's own.

pub mod clock;
pub mod coordinator;
pub mod expiry;
pub mod gateway;
pub mod log;
pub mod merge;
pub mod postgres;
pub mod processes;
pub mod queue;
pub mod redis;
pub mod server;
pub mod store;
pub mod worker;

pub use coordinator::{run_live, LiveConfig, StoreChoice};
pub use worker::{run_worker, WorkerSpec};
