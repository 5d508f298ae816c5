//! The `fencesim` command line: one file per subcommand, each with its arguments and what
//! it does; `args` holds the parsers they share. Exit codes: 0 no violation, 1 a violation
//! was found, 2 bad usage or bad input (with a message that says what is wrong).

pub mod agreement;
pub mod args;
pub mod bench;
pub mod completions;
pub mod demo;
pub mod explore;
pub mod fidelity;
pub mod live;
pub mod manpage;
pub mod matrix;
pub mod mechanism;
pub mod mechanisms;
pub mod merge;
pub mod mutants;
pub mod reference;
pub mod replay;
pub mod report;
pub mod run;
pub mod shrink;
pub mod worker;
pub mod worker_random;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fencesim",
    version,
    about = "Why a lock with a TTL needs a fencing token checked by the database, shown in a deterministic simulation"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Tell the worked example second by second, with the fence and without it
    Demo(demo::DemoArgs),
    /// Run one scenario under one mechanism and check every invariant
    Run(run::RunArgs),
    /// List the mechanisms and what each promises
    #[command(visible_alias = "strategies")]
    Mechanisms,
    /// Check a mechanism file describing your own lock, or write the built-ins as files
    Mechanism(mechanism::MechanismArgs),
    /// Run many seeds in parallel and keep every failure as a replay file
    Explore(explore::ExploreArgs),
    /// Run a replay file's plan again and tell how it failed
    Replay(replay::ReplayArgs),
    /// Make a failing replay file as small as it can be while it breaks the same invariant
    Shrink(shrink::ShrinkArgs),
    /// Every mechanism with both gateway modes over the same seeds, and the TTL sweep:
    /// writes reports/guarantees.md
    Matrix(matrix::MatrixArgs),
    /// Plant each bug of the mutant catalogue and measure how fast the suite catches it:
    /// writes reports/detection.md (with --deep, the deep catalogue's reports/deep.md)
    Mutants(mutants::MutantsArgs),
    /// Regenerate the reports in reports/
    Report(report::ReportArgs),
    /// Play every committed failure again live, on SQLite and on PostgreSQL: writes
    /// reports/fidelity.md
    Fidelity(fidelity::FidelityArgs),
    /// Draw failures afresh (every mechanism, a few planted bugs, seeds no committed file
    /// uses), play each live once, and count how often live breaks what the simulation
    /// breaks, naming where the two histories part when it does not
    Agreement(agreement::AgreementArgs),
    /// Time the simulated worked example against its SQL floor (use a release build)
    Bench(bench::BenchArgs),
    /// Combine the --json outputs of an exploration's shards into one answer
    Merge(merge::MergeArgs),
    /// The worked example, or a replay file's world (--replay), with real processes and servers
    Live(live::LiveArgs),
    /// Run your own worker program (any language) through the worked example or a replay
    /// file's world, against real servers, judged from what they saw: `fencesim worker --
    /// node worker.js` (docs/worker.md)
    Worker(worker::WorkerArgs),
    /// The project's own worker as a program that follows docs/worker.md's contract, for
    /// `fencesim worker -- fencesim contract-worker`; it also writes its own events, and the
    /// run says whether judging those agrees with judging what the servers saw
    ContractWorker(worker::ContractWorkerArgs),
    /// Print the shell's completion script for fencesim, e.g. `fencesim completions bash >
    /// ~/.local/share/bash-completion/completions/fencesim`
    Completions(completions::CompletionsArgs),
    /// Print fencesim's manual page (roff), or write one page per subcommand into a directory
    Manpage(manpage::ManpageArgs),
    /// A worker process of a live run (started by `fencesim live`)
    #[command(hide = true)]
    LiveWorker {
        /// The worker's spec, as JSON
        spec: String,
    },
}

/// Bad input: exit 2 with a message that says what is wrong.
/// Runs the subcommand the command line named; its exit code.
pub fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Demo(args) => demo::run(args),
        Command::Run(args) => run::run_command(args),
        Command::Mechanisms => mechanisms::run(),
        Command::Mechanism(args) => mechanism::run(args),
        Command::Explore(args) => explore::run(args),
        Command::Replay(args) => replay::run_command(args),
        Command::Shrink(args) => shrink::run_command(args),
        Command::Matrix(args) => matrix::run(args),
        Command::Mutants(args) => mutants::run(args),
        Command::Report(args) => report::run(args),
        Command::Fidelity(args) => fidelity::run(args),
        Command::Agreement(args) => agreement::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Live(args) => live::live_command(args),
        Command::Worker(args) => worker::run(args),
        Command::ContractWorker(args) => worker::contract_worker(args),
        Command::Completions(args) => completions::run(args),
        Command::Manpage(args) => manpage::run(args),
        Command::LiveWorker { spec } => live::live_worker_command(spec),
    }
}

pub fn bad_input(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("fencesim: {message}");
    ExitCode::from(2)
}

/// The exit code of a run cut short (Ctrl-C, SIGTERM) that found no violation: it did
/// not finish, so it cannot say "none".
pub const INTERRUPTED: u8 = 3;

/// 0 when nothing was broken, 1 when something was.
pub fn verdict(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
