//! `fencesim shrink FILE`: a failing replay file made as small as it can be while it still
//! breaks the same invariant; the smaller file is written beside the original.

use crate::cli::{bad_input, verdict};
use crate::files::replay_file::ReplayFile;
use crate::search::shrink::{shrink_file, Shrunk};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ShrinkArgs {
    /// The failing replay file
    file: PathBuf,
    /// The invariant the smaller file must still break (default: the file's first)
    #[arg(long)]
    invariant: Option<String>,
}

/// What shrinking did, the plan that is left, and the command that replays it.
pub fn print_shrunk(shrunk: &Shrunk) {
    println!("shrunk, still breaking {}: {}", shrunk.invariant, shrunk.removed());
    let plan = &shrunk.after.scenario.world.faults;
    println!("{}", serde_json::to_string_pretty(plan).expect("a plan serializes"));
    println!("replay with: {}", ReplayFile::command(&shrunk.path));
}

pub fn run_command(args: ShrinkArgs) -> ExitCode {
    match shrink_file(&args.file, args.invariant.as_deref()) {
        Ok(shrunk) => {
            print_shrunk(&shrunk);
            verdict(false)
        }
        Err(error) => bad_input(error),
    }
}
