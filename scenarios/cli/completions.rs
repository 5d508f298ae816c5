//! `fencesim completions SHELL`: the shell's completion script, made from the same
//! definitions the command line parses with.

use crate::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, elvish, fish, powershell or zsh
    shell: Shell,
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "fencesim", &mut out);
    out
}

pub fn run(args: CompletionsArgs) -> ExitCode {
    use std::io::Write as _;
    // a closed pipe ends the process quietly (see main.rs); any other failure is the shell's
    let _ = std::io::stdout().write_all(&script(args.shell));
    ExitCode::SUCCESS
}
