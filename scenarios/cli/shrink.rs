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

/// A program's failing run is shrunk by running the program (`foreign::shrink`), any other
/// by the simulation.
fn shrink_either(args: &ShrinkArgs) -> Result<Shrunk, String> {
    let replay = ReplayFile::load(&args.file)?;
    if replay.worker.is_none() {
        return shrink_file(&args.file, args.invariant.as_deref());
    }
    // Ctrl-C stops the program's copies and the servers before the shrink ends
    crate::live::interrupt::watch();
    crate::foreign::shrink::shrink_program_file(&args.file, &replay, args.invariant.as_deref())
}

pub fn run_command(args: ShrinkArgs) -> ExitCode {
    match shrink_either(&args) {
        Ok(shrunk) => {
            print_shrunk(&shrunk);
            verdict(false)
        }
        Err(error) => bad_input(error),
    }
}
