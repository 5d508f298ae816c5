//! The live arm: the worked example, or a replay file's world, with real processes. Each worker is an OS process of
//! its own running the model's worker unchanged, against a real redis-server, a real
//! SQLite file in WAL mode, the gateway as an HTTP service on loopback and a Redis stream
//! as the queue. Every process writes its events as JSON Lines; the coordinator merges
//! them into one history, which the simulation's checkers judge and its narrator tells.
//!
//! - `clock`: the wall clock and the story's time; `log`: the event files;
//! - `redis`, `store`, `gateway`, `queue`: the model's ports over the real components;
//! - `worker`: a worker process; `faults`: the faults it takes itself; `processes`: the workers as the coordinator sees them
//!   (start, pause, resume, kill, start again); `expiry`: Redis's expiries, seen as they
//!   happen; `plan`: what of a world and its faults a live run can do; `supervise`: the
//!   coordinator's loop while the run goes on; `coordinator`: the run, from its input to
//!   its verdict;
//! - `pace`: when the gateway service answers a refund call; `turns`: requests that share a
//!   story millisecond, released in the simulation's order;
//! - `fidelity`: the committed failures played live; `agreement`: fresh ones;
//! - `interrupt`: a signal that asks the run to stop and clean up;
//! - `proxy`, `resp`: a recording proxy between a party the run does not control and a
//!   Redis server, and the wire format it reads (the first part of running a team's own
//!   worker program); `pgproxy`, `pgsession`, `pgwire`: the same for a PostgreSQL server,
//!   one record per statement run, with hooks that may hold a statement or its answer, what
//!   one of its connections waits for, and the wire format;
//! - `server`: a redis-server of the run's own; `postgres`: PostgreSQL as the refund
//!   store, and a cluster of the run's own.

pub mod agreement;
pub mod clock;
pub mod coordinator;
pub mod expiry;
pub mod faketime;
pub mod faults;
pub mod fidelity;
pub mod gateway;
pub mod http;
pub mod interrupt;
pub mod log;
pub mod merge;
pub mod pace;
pub mod pgproxy;
pub mod pgsession;
pub mod pgwire;
pub mod plan;
pub mod postgres;
pub mod processes;
pub mod proxy;
pub mod queue;
pub mod redis;
pub mod resp;
pub mod scale;
pub mod server;
pub mod servers;
pub mod store;
pub mod supervise;
pub mod turns;
pub mod worker;

pub use coordinator::{run_live, LiveConfig, StoreChoice};
pub use worker::{run_worker, WorkerSpec};
