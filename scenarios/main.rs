//! The `fencesim` command line: parses the arguments and hands them to their subcommand.

mod cli;

use clap::Parser;
use cli::{Cli, Command};
use std::process::ExitCode;

/// Output piped into a program that stops reading (`| head`) ends the process quietly, as
/// a command-line tool should, instead of failing on every later line it prints.
fn quiet_on_a_closed_pipe() {
    // SAFETY: restores the default action of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    quiet_on_a_closed_pipe();
    match Cli::parse().command {
        Command::Demo(args) => cli::demo::run(args),
        Command::Run(args) => cli::run::run_command(args),
        Command::Mechanisms => cli::mechanisms::run(),
        Command::Explore(args) => cli::explore::run(args),
        Command::Replay(args) => cli::replay::run_command(args),
        Command::Shrink(args) => cli::shrink::run_command(args),
        Command::Matrix(args) => cli::matrix::run(args),
        Command::Mutants(args) => cli::mutants::run(args),
        Command::Report(args) => cli::report::run(args),
        Command::Fidelity(args) => cli::fidelity::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Merge(args) => cli::merge::run(args),
        Command::Live(args) => cli::live::live_command(args),
        Command::LiveWorker { spec } => cli::live::live_worker_command(spec),
    }
}
