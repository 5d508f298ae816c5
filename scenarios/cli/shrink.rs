//! `fencesim shrink FILE`: a failing replay file made as small as it can be while it still
//! breaks the same invariant; the smaller file is written beside the original.

use crate::cli::{bad_input, verdict};
use fencesim::runner::run;
use fencesim::scenario::Scenario;
use fencesim::search::shrink::shrink_scenario;
use fencesim::tell::replay_file::ReplayFile;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ShrinkArgs {
    file: PathBuf,
    /// The invariant the smaller file must still break (default: the file's first)
    #[arg(long)]
    invariant: Option<String>,
}

/// `failure.json` becomes `failure.shrunk.json`, beside it.
fn shrunk_path(file: &Path) -> PathBuf {
    let stem = file.file_stem().map_or("replay".into(), |stem| stem.to_string_lossy().into_owned());
    file.with_file_name(format!("{stem}.shrunk.json"))
}

/// What shrinking took away, in one line.
fn removed(before: &Scenario, after: &Scenario) -> String {
    let rows = |scenario: &Scenario| scenario.world.rows.len();
    format!(
        "faults {} -> {}, workers {} -> {}, rows {} -> {}",
        before.world.faults.faults.len(),
        after.world.faults.faults.len(),
        before.world.workers,
        after.world.workers,
        rows(before),
        rows(after)
    )
}

pub fn run_command(args: ShrinkArgs) -> ExitCode {
    let replay = match ReplayFile::load(&args.file) {
        Ok(replay) => replay,
        Err(error) => return bad_input(error),
    };
    let Some(invariant) = args.invariant.or_else(|| replay.violations.first().cloned()) else {
        return bad_input(format!("{}: the file records no broken invariant to keep", args.file.display()));
    };
    let scenario = match replay.scenario() {
        Ok(scenario) => scenario,
        Err(error) => return bad_input(format!("{}: {error}", args.file.display())),
    };
    let seed = replay.seed;
    let breaks =
        |candidate: &Scenario| run(candidate, seed).map(|outcome| outcome.check(&invariant).is_violation());
    match breaks(&scenario) {
        Ok(true) => {}
        Ok(false) => {
            return bad_input(format!("{}: the run does not break {invariant}", args.file.display()))
        }
        Err(error) => return bad_input(error),
    }
    let smallest = match shrink_scenario(&scenario, breaks).and_then(|smallest| run(&smallest, seed)) {
        Ok(outcome) => outcome,
        Err(error) => return bad_input(error),
    };
    let path = match ReplayFile::from_outcome(&smallest).write_as(&shrunk_path(&args.file)) {
        Ok(path) => path,
        Err(error) => return bad_input(error),
    };
    println!("shrunk, still breaking {invariant}: {}", removed(&scenario, &smallest.scenario));
    println!("{}", serde_json::to_string_pretty(&smallest.scenario.world.faults).expect("a plan serializes"));
    println!("replay with: {}", ReplayFile::command(&path));
    verdict(false)
}
