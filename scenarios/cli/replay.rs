//! `fencesim replay FILE`: the file's own fault plan run again, its hash compared with the
//! file's, the failure told as a story; with `--check-determinism`, run twice.

use crate::cli::args::parse_mechanism;
use crate::cli::{bad_input, verdict};
use crate::files::replay_file::ReplayFile;
use crate::model::Mechanism;
use crate::runner::{run_with, Outcome};
use crate::scenario::Scenario;
use crate::tell::failure::{first_difference, tell_failure};
use crate::tell::timeline::write_run_page;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The replay file (written by explore, run --save-replay or shrink)
    file: PathBuf,
    /// Run it twice in fresh runtimes and name the first event that differs
    #[arg(long)]
    check_determinism: bool,
    /// Tell the whole story up to the first violation, not only its last 25 lines
    #[arg(long)]
    whole: bool,
    /// Write the run's timeline page (one HTML file that opens from disk) to this file
    #[arg(long)]
    html: Option<PathBuf>,
    /// On the page, the same fault plan under this mechanism too
    #[arg(long, value_parser = parse_mechanism, requires = "html")]
    beside: Option<Mechanism>,
    /// Also tell how close the run came: its prefix replayed to each of several moments
    /// with fresh faults after it, and the share of those continuations that broke it again
    /// (the run's page always shows it)
    #[arg(long)]
    closeness: bool,
    /// For a file of a team's worker program (`fencesim worker --save-replay`): run the
    /// program through it this many times and count the runs whose verdict repeated
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
}

fn compare_hash(outcome: &Outcome, replay: &ReplayFile) {
    let hash = format!("{:016x}", outcome.trace_hash);
    if hash == replay.expected_trace_hash {
        println!("trace hash {hash}: matches the file");
    } else {
        let why = match replay.edited() {
            Some(true) => "the file was edited since it was written: its content hash differs",
            Some(false) => "the file is as written: this build behaves differently",
            None => "the file has no content hash: it was edited, or this build behaves differently",
        };
        println!("trace hash {hash}: DIFFERS from the file's {} ({why})", replay.expected_trace_hash);
    }
}

/// Runs the plan again in a fresh runtime on another thread; `Ok(false)` when it differs.
fn check_determinism(outcome: &Outcome, scenario: Scenario, seed: u64) -> Result<bool, String> {
    let mutant = outcome.mutant;
    match std::thread::spawn(move || run_with(&scenario, seed, mutant)).join() {
        Ok(Ok(second)) => match first_difference(outcome, &second) {
            None => {
                println!("determinism: two fresh runs gave the same {} events", outcome.record.events.len());
                Ok(true)
            }
            Some(difference) => {
                println!("determinism: NOT deterministic; {difference}");
                Ok(false)
            }
        },
        Ok(Err(_)) | Err(_) => Err("the second run failed".to_owned()),
    }
}

pub fn run_command(args: ReplayArgs) -> ExitCode {
    let replay = match ReplayFile::load(&args.file) {
        Ok(replay) => replay,
        Err(error) => return bad_input(error),
    };
    let scenario = match replay.scenario() {
        Ok(scenario) => scenario,
        Err(error) => return bad_input(format!("{}: {error}", args.file.display())),
    };
    let mechanism = match &replay.worker {
        Some(_) => format!("a team's worker program (its keys as {} names them)", replay.mechanism),
        None => format!("mechanism {}", replay.mechanism),
    };
    println!(
        "replaying {}: scenario {}, {mechanism}, gateway {}, seed {}, {} fault(s)",
        args.file.display(),
        replay.scenario,
        replay.gateway,
        replay.seed,
        replay.fault_plan.faults.len()
    );
    if let Some(mutant) = replay.mutant {
        println!("with the mutant {mutant} planted in the workers");
    }
    if let Some(worker) = &replay.worker {
        return crate::cli::worker::replay_worker(&replay, scenario, worker, args.runs);
    }
    if args.runs > 1 {
        return bad_input(format!(
            "{}: --runs is for a file of a team's worker program; a simulated run repeats by construction \
             (--check-determinism checks it)",
            args.file.display()
        ));
    }
    let outcome = match run_with(&scenario, replay.seed, replay.mutant) {
        Ok(outcome) => outcome,
        Err(error) => return bad_input(error),
    };
    compare_hash(&outcome, &replay);
    print!("{}", tell_failure(&outcome, if args.whole { usize::MAX } else { 25 }));
    if args.closeness {
        match crate::tell::closeness::curve_of(&outcome) {
            Ok(Some(curve)) => print!("{}", crate::tell::closeness::closeness_lines(&outcome, &curve)),
            Ok(None) => println!("how close it came: the run broke nothing"),
            Err(error) => return bad_input(error),
        }
    }
    if let Some(path) = &args.html {
        if let Err(error) =
            write_run_page(path, &outcome, args.beside, &format!("fencesim replay {}", args.file.display()))
        {
            return bad_input(error);
        }
        println!("wrote {}", path.display());
    }
    if args.check_determinism {
        match check_determinism(&outcome, scenario, replay.seed) {
            Ok(true) => {}
            Ok(false) => return ExitCode::from(1),
            Err(error) => return bad_input(error),
        }
    }
    verdict(outcome.passed())
}
