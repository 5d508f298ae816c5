//! fencesim: a deterministic simulation that shows why a lock with a TTL needs a fencing
//! token checked by the database. This crate holds the scenarios, the runner, the
//! checkers, the stories and reports, and the command line's pieces.

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim` (set in .cargo/config.toml); \
     a RUSTFLAGS variable replaces that setting: add `--cfg madsim` to it"
);

pub mod bench;
pub mod checkers;
pub mod coverage;
pub mod demo;
pub mod exhaustive;
pub mod explore;
pub mod matrix;
pub mod mutant;
pub mod mutants;
pub mod narrate;
pub mod props;
pub mod random;
pub mod replay;
pub mod report;
pub mod runner;
pub mod scenario;

pub use fencesim_model as model;
pub use fencesim_sim as sim;
