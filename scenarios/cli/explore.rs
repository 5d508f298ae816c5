//! `fencesim explore`: many seeds in parallel, a progress bar, every failure kept as a
//! replay file; Ctrl-C stops it and it still reports what it ran.

use crate::cli::args::{
    default_jobs, parse_count, parse_gateway, parse_jobs, parse_scenario, parse_seed, MechanismChoice,
};
use crate::cli::shrink::print_shrunk;
use crate::cli::{bad_input, INTERRUPTED};
use crate::files::replay_file::ReplayFile;
use crate::model::Mechanism;
use crate::mutant::Mutant;
use crate::scenario::FaultMask;
use crate::search::explore::{explore, ExploreConfig, ExploreReport, SearchKind, FIRST_SEEDS};
use crate::search::seeds::{SeedRange, Shard};
use crate::search::shrink::{shrink_file, Shrunk};
use crate::sim::GatewayMode;
use crate::tell::junit::explore::explore_suite;
use crate::tell::junit::write_junit;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct ExploreArgs {
    #[command(flatten)]
    mechanism: MechanismChoice,
    /// The scenario each seed's world is drawn from
    #[arg(long, default_value = "random", value_parser = parse_scenario)]
    scenario: String,
    /// idempotent or non-idempotent
    #[arg(long, default_value = "idempotent", value_parser = parse_gateway)]
    gateway: GatewayMode,
    /// How many seeds to run
    #[arg(long, default_value_t = 1000, value_parser = parse_count, allow_hyphen_values = true)]
    seeds: u64,
    /// The first seed
    #[arg(long, default_value_t = 1, value_parser = parse_seed, allow_hyphen_values = true)]
    from: u64,
    /// Threads to run seeds on (the results do not depend on it)
    #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
    jobs: usize,
    /// Go on after the first violation
    #[arg(long)]
    keep_going: bool,
    /// Switch fault kinds off, e.g. --without redis-restart,crash
    #[arg(long, default_value = "")]
    without: String,
    /// Where replay files go
    #[arg(long, default_value = "fencesim-failures")]
    out: PathBuf,
    /// Print one JSON object (what `fencesim merge` reads) instead of the summary
    #[arg(long)]
    json: bool,
    /// Keep the failures as found, without shrinking them
    #[arg(long)]
    no_shrink: bool,
    /// Plant this bug of the mutant catalogue (`fencesim mutants` lists them) in every run
    #[arg(long)]
    mutant: Option<Mutant>,
    /// Run shard K of N of the seeds (from 1; with --keep-going): N machines with the same
    /// command and K = 1..N run every seed once; `fencesim merge` combines their --json
    #[arg(long)]
    shard: Option<Shard>,
    /// Also write the results as JUnit XML to this file: one test case per invariant, a
    /// broken one failed with its violation, its plan and its replay command
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// How runs are chosen: uniform (each seed's world and plan drawn afresh) or guided
    /// (plans grown from the runs that reached something new; with --shard, each shard
    /// grows its own)
    #[arg(long, value_enum, default_value_t = SearchKind::Uniform)]
    search: SearchKind,
}

/// What a `--json` report says about the run it comes from: enough for `fencesim merge`
/// to check that shards belong together.
fn run_identity(args: &ExploreArgs, mechanism: Mechanism) -> serde_json::Value {
    serde_json::json!({
        "scenario": args.scenario,
        "mechanism": mechanism.name(),
        "gateway": args.gateway.name(),
        "from": args.from,
        "seeds": args.seeds,
        "without": args.without,
        "mutant": args.mutant.map(|mutant| mutant.to_string()),
        "shard": args.shard,
        "search": args.search,
    })
}

/// The seeds this process runs: the whole range, or its shard's share of it.
fn share(args: &ExploreArgs) -> Result<SeedRange, String> {
    let range = SeedRange::new(args.from, args.seeds)?;
    match args.shard {
        None => Ok(range),
        Some(_) if !args.keep_going => Err(
            "--shard needs --keep-going: each shard must run its whole share for the merge to be what one run prints"
                .to_owned(),
        ),
        Some(shard) => range.shard(shard),
    }
}

/// Shrinks the first failure kept for each invariant (a file shrinks once, for the first
/// invariant it is the first to break).
fn shrink_failures(report: &ExploreReport) -> Result<Vec<Shrunk>, String> {
    let mut covered: Vec<String> = Vec::new();
    let mut shrunk = Vec::new();
    for path in &report.replay_files {
        let file = ReplayFile::load(path)?;
        let Some(invariant) = file.violations.iter().find(|name| !covered.contains(name)) else { continue };
        shrunk.push(shrink_file(path, Some(invariant))?);
        covered.extend(file.violations.iter().cloned());
    }
    Ok(shrunk)
}

fn print_report(config: &ExploreConfig, report: &ExploreReport) {
    println!(
        "explored {} seed(s) of {} under {} ({} gateway) from seed {}: {:.0} seeds/s{}",
        report.seeds_run,
        config.scenario,
        config.mechanism,
        config.gateway,
        config.from,
        report.seeds_per_second,
        if report.interrupted { ", interrupted" } else { "" }
    );
    if report.violations.is_empty() {
        println!("no violation");
    }
    for (name, seeds) in &report.violations {
        let first: Vec<String> =
            report.first_seeds.get(name).into_iter().flatten().map(|seed| seed.to_string()).collect();
        let more = if *seeds as usize > first.len() { ", ..." } else { "" };
        println!("  {name}: broken in {seeds} seed(s): {}{more}", first.join(", "));
    }
    print!("{}", report.coverage.render());
    if let Some(seed) = report.first_failing_seed {
        println!("first failing seed: {seed}");
    }
    // one line per file while there are few; many are counted (`--json` lists them all)
    let files = &report.replay_files;
    if files.len() > FIRST_SEEDS {
        println!("{} replay files in {}; the first:", files.len(), config.out.display());
    }
    for path in files.iter().take(if files.len() > FIRST_SEEDS { 1 } else { FIRST_SEEDS }) {
        println!("replay with: {}", ReplayFile::command(path));
    }
}

pub fn run(args: ExploreArgs) -> ExitCode {
    let mechanism = match args.mechanism.chosen() {
        Ok(mechanism) => mechanism,
        Err(error) => return bad_input(error),
    };
    let allowed = match FaultMask::ALL.without_names(&args.without) {
        Ok(mask) => mask,
        Err(error) => return bad_input(error),
    };
    let seeds = match share(&args) {
        Ok(seeds) => seeds,
        Err(error) => return bad_input(error),
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    let identity = run_identity(&args, mechanism);
    let config = ExploreConfig {
        scenario: args.scenario,
        mechanism,
        gateway: args.gateway,
        from: seeds.from,
        seeds: seeds.count,
        jobs: args.jobs,
        keep_going: args.keep_going,
        out: args.out,
        allowed,
        mutant: args.mutant,
        progress: !args.json,
        search: args.search,
    };
    let report = match explore(&config, &interrupted) {
        Ok(report) => report,
        Err(error) => return bad_input(error),
    };
    let shrunk = match args.no_shrink || report.write_error.is_some() {
        true => Vec::new(),
        false => match shrink_failures(&report) {
            Ok(shrunk) => shrunk,
            Err(error) => return bad_input(error),
        },
    };
    let value = json_of(&report, &shrunk, identity);
    if args.json {
        println!("{value}");
    } else {
        print_report(&config, &report);
        shrunk.iter().for_each(print_shrunk);
    }
    let written = args.junit.map(|path| write_junit(&path, "fencesim explore", &[explore_suite(&value)]));
    if let Some(Err(error)) = written {
        return bad_input(error);
    }
    exit_code(&report)
}

/// The `--json` object: the report, the shrunk files and the run it comes from.
fn json_of(report: &ExploreReport, shrunk: &[Shrunk], identity: serde_json::Value) -> serde_json::Value {
    let mut value = serde_json::to_value(report).expect("a report serializes");
    let paths: Vec<String> = shrunk.iter().map(|s| s.path.display().to_string()).collect();
    value["shrunk_files"] = serde_json::json!(paths);
    value["run"] = identity;
    value
}

/// 2 when a replay file could not be written (after the summary of what was found), 1
/// for a violation, 3 for an interrupted run that found none, 0 for a finished clean one.
fn exit_code(report: &ExploreReport) -> ExitCode {
    if let Some(error) = &report.write_error {
        return bad_input(format!("stopped: {error}"));
    }
    match (report.first_failing_seed.is_some(), report.interrupted) {
        (true, _) => ExitCode::from(1),
        (false, true) => ExitCode::from(INTERRUPTED),
        (false, false) => ExitCode::SUCCESS,
    }
}
