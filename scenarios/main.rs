//! The `fencesim` command line: parses the arguments and hands them to their subcommand
//! (the definitions and the subcommands are the library's `cli` module).

use clap::Parser;
use fencesim::cli::{dispatch, Cli};
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
    dispatch(Cli::parse().command)
}
