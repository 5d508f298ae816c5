//! A team's own worker program, in any language, run through a world against the real
//! servers and judged from what the components saw (docs/worker.md is its contract).
//!
//! - `run`: the run, from its input to its verdict; `watch`: the supervisor's loop;
//! - `programs`: the copies of the program (started, stopped, killed, started again);
//! - `queue`: the job queue the copies take their jobs from, an HTTP service of ours;
//! - `faults`: the plan's faults given from outside, at the requests and replies the
//!   proxies see (`live::proxy`, `live::pgproxy`);
//! - `redis_seen`, `rows_seen`: the proxies' and the row trigger's records read as the
//!   simulation's events; `seen`: all of them for one run;
//! - `shrink`: a failing run of the program made small (`fencesim shrink FILE`);
//! - `kept`: the PostgreSQL cluster and the clock file kept from one run to the next;
//! - `conductor`, `turns`, `start_up`, `controlled`, `history`: a controlled run
//!   (docs/controlled.md);
//! - `own_worker`: the project's own worker speaking the contract (`fencesim contract-worker`),
//!   which also writes its own events, so that a run can judge it from both.

pub mod conductor;
pub mod controlled;
pub mod faults;
pub mod history;
pub mod kept;
pub mod own_worker;
pub mod programs;
pub mod queue;
pub mod redis_seen;
pub mod rows_seen;
pub mod run;
pub mod seen;
pub mod shrink;
pub mod start_up;
pub mod turns;
pub mod watch;
pub mod worlds;

pub use run::{run_foreign, run_foreign_kept, ForeignConfig, ForeignRun};
