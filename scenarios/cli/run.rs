//! `fencesim run`: one scenario under one mechanism, every invariant checked, told as a
//! story or printed as one JSON object.

use crate::cli::args::{
    parse_gateway, parse_mechanism, parse_scenario, parse_seed, parse_ttl, MechanismChoice,
};
use crate::cli::{bad_input, verdict};
use crate::files::replay_file::ReplayFile;
use crate::files::write::write_whole;
use crate::model::Mechanism;
use crate::mutant::Mutant;
use crate::runner::{run_with, Outcome, DEFAULT_SEED};
use crate::scenario::{self, FaultMask};
use crate::sim::GatewayMode;
use crate::tell::failure::violations_told;
use crate::tell::story::{render_story, story};
use crate::tell::timeline::write_run_page;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The scenario: worked-example, random or another (a name it does not know lists them)
    #[arg(long, default_value = "worked-example", value_parser = parse_scenario)]
    scenario: String,
    #[command(flatten)]
    mechanism: MechanismChoice,
    /// idempotent or non-idempotent
    #[arg(long, default_value = "idempotent", value_parser = parse_gateway)]
    gateway: GatewayMode,
    /// The seed: it chooses the world's faults and timings, and orders the scheduler
    #[arg(long, default_value_t = DEFAULT_SEED, value_parser = parse_seed, allow_hyphen_values = true)]
    seed: u64,
    /// Override the lease TTL, in milliseconds (a positive whole number)
    #[arg(long, value_parser = parse_ttl, allow_hyphen_values = true)]
    ttl_ms: Option<u64>,
    /// Print one JSON object instead of the story
    #[arg(long)]
    json: bool,
    /// Write the history as JSON Lines to this file
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Save the run as a replay file (into this directory), failing or not
    #[arg(long)]
    save_replay: Option<PathBuf>,
    /// Write the run's timeline page (one HTML file that opens from disk) to this file
    #[arg(long)]
    html: Option<PathBuf>,
    /// On the page, the same fault plan under this mechanism too
    #[arg(long, value_parser = parse_mechanism, requires = "html")]
    beside: Option<Mechanism>,
    /// Plant this bug of the mutant catalogue (`fencesim mutants` lists them) in the workers
    #[arg(long)]
    mutant: Option<Mutant>,
}

/// The story, the counts, the broken invariants and, on failure, the command to reproduce.
fn tell(outcome: &Outcome, seed: u64) {
    let lines = story(outcome);
    print!("{}", render_story(outcome, &lines, usize::MAX));
    println!("\nseed {} trace {:016x}: {}", seed, outcome.trace_hash, outcome.counts_line());
    print!("{}", violations_told(outcome));
    if !outcome.passed() {
        println!("reproduce with: {}", outcome.replay_command());
    }
}

/// The trace and the replay file the run was asked to keep.
fn keep(outcome: &Outcome, trace: Option<PathBuf>, save_replay: Option<PathBuf>) -> Result<(), String> {
    if let Some(path) = trace {
        write_whole(&path, &outcome.trace_bytes())
            .map_err(|e| format!("cannot write the trace to {}: {e}", path.display()))?;
    }
    if let Some(dir) = save_replay {
        let path = ReplayFile::from_outcome(outcome).write_into(&dir)?;
        eprintln!("saved {}", path.display());
    }
    Ok(())
}

pub fn run_command(args: RunArgs) -> ExitCode {
    let built = args.mechanism.chosen().and_then(|mechanism| {
        scenario::build(&args.scenario, args.seed, mechanism, args.gateway, FaultMask::ALL)
    });
    let mut chosen = match built {
        Ok(chosen) => chosen,
        Err(error) => return bad_input(error),
    };
    if let Some(ttl) = args.ttl_ms {
        chosen.world.ttl_ms = ttl;
    }
    let outcome = match run_with(&chosen, args.seed, args.mutant) {
        Ok(outcome) => outcome,
        Err(error) => return bad_input(error),
    };
    if let Err(error) = keep(&outcome, args.trace, args.save_replay) {
        return bad_input(error);
    }
    if let Some(path) = &args.html {
        let ttl = args.ttl_ms.map(|ttl| format!(" --ttl-ms {ttl}")).unwrap_or_default();
        if let Err(error) =
            write_run_page(path, &outcome, args.beside, &format!("{}{ttl}", outcome.replay_command()))
        {
            return bad_input(error);
        }
        eprintln!("wrote {}", path.display());
    }
    if args.json {
        println!("{}", outcome.to_json());
    } else {
        tell(&outcome, args.seed);
    }
    verdict(outcome.passed())
}
