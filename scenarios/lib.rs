//! fencesim: a deterministic simulation that shows why a lock with a TTL needs a fencing
//! token checked by the database. This crate holds the package's rooms: `scenario` (the
//! worlds a run starts from), `runner` (a scenario and a seed in, verdicts out), `check`
//! (the table of invariants, coverage), `search` (one parallel pool and what runs on it), `mutant` (the planted bugs),
//! `tell` (stories, diagrams, reports, replay files), `fault_words` (a fault in words, for
//! both the stories and the checks' chains), `bench`, `live` (the worked
//! example with real processes against real servers, judged by the same checkers) and `cli`
//! (the command line's definitions and subcommands, which the binary dispatches to and the
//! tests parse with).

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim`. The repository's .cargo/config.toml sets it \
     for every cargo command run inside it (`cargo build`, `cargo test`, `cargo install --locked --path .`); \
     a RUSTFLAGS variable replaces that setting, and `cargo install --git` never reads it. \
     Run instead: RUSTFLAGS=\"--cfg madsim\" cargo install --locked --git <the repository's URL> fencesim"
);

pub mod bench;
pub mod check;
pub mod cli;
mod fault_words;
pub mod files;
pub mod foreign;
pub mod live;
pub mod mechanism_file;
pub mod mutant;
pub mod runner;
pub mod scenario;
pub mod search;
pub mod tell;

pub use fencesim_model as model;
pub use fencesim_sim as sim;
