//! `fencesim worker -- CMD...`: a team's own worker program, in any language, run through the
//! worked example (or a replay file's world and plan) against a real redis-server and
//! PostgreSQL, through proxies of the project's own, and judged from what the components
//! saw (docs/worker.md is the contract the program follows).

use crate::cli::args::parse_gateway;
use crate::cli::{bad_input, verdict, INTERRUPTED};
use crate::files::replay_file::{ReplayFile, WorkerProgram};
use crate::files::write::write_whole;
use crate::foreign::controlled::Control;
use crate::foreign::history::{History, Parting};
use crate::foreign::kept::Kept;
use crate::foreign::watch::Ended;
use crate::foreign::{run_foreign_kept, ForeignConfig, ForeignRun};
use crate::live::interrupt;
use crate::model::WorkerId;
use crate::runner::Outcome;
use crate::sim::GatewayMode;
use crate::tell::story::{render_story, story};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct WorkerArgs {
    /// idempotent or non-idempotent: the gateway of the worked example
    #[arg(long, default_value = "idempotent", value_parser = parse_gateway)]
    gateway: GatewayMode,
    /// Run this replay file's world and faults instead of the worked example
    #[arg(long, conflicts_with = "gateway")]
    replay: Option<PathBuf>,
    /// Real time per story time: 0.25 tells the worked example's story in about 12 seconds
    #[arg(long, default_value_t = 0.25, allow_hyphen_values = true)]
    time_scale: f64,
    /// How long, in seconds, each copy of the program may take to ask the queue for its first job
    #[arg(long, default_value_t = 20)]
    first_take_within: u64,
    /// Keep the run's files (each copy's output, the services' records, a controlled run's
    /// history) in this directory: with --twice the second run's in its `again`, with
    /// --random each world's in its `seed-N`
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Write the history built from what the components saw, as JSON Lines, to this file
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Print one JSON object instead of the story
    #[arg(long)]
    json: bool,
    /// Run it this many times and count, per invariant, the runs that broke it
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Run it through this many random worlds with faults instead (seeds from --first-seed
    /// up; the faults a program can be given from outside), and count the worlds that broke
    /// each invariant
    #[arg(long, conflicts_with_all = ["replay", "runs"], value_parser = clap::value_parser!(u32).range(1..=10000))]
    random: Option<u32>,
    /// The first seed of --random
    #[arg(long, default_value_t = 1, requires = "random")]
    first_seed: u64,
    /// With --random: each world also simulated under this mechanism (the one the program
    /// stands for), its verdict beside the program's, and the worlds where they agree
    /// counted; with --html: the same world and plan simulated under it, drawn below the run.
    /// A built-in mechanism's name, or a mechanism file (a path) that describes the
    /// program's own steps
    #[arg(long, value_name = "MECHANISM|FILE", value_parser = crate::cli::args::parse_mechanism_or_file)]
    beside: Option<crate::model::Mechanism>,
    /// Write the run's timeline page (one HTML file that opens from disk) to this file
    #[arg(long, conflicts_with_all = ["random", "runs"])]
    html: Option<PathBuf>,
    /// Save a failing run as a replay file naming the program, the world and the plan (into
    /// this directory); `fencesim replay FILE` runs the program through them again
    #[arg(long, value_name = "DIR")]
    save_replay: Option<PathBuf>,
    /// Run on the run's own clock: every request held at its proxy until the seed's
    /// scheduler lets it go, Redis and PostgreSQL on the same clock (docs/controlled.md)
    #[arg(long)]
    controlled: bool,
    /// With --controlled: the seed that draws the hops' latencies and breaks ties (with
    /// --random, each world's own seed)
    #[arg(long, default_value_t = 1, requires = "controlled")]
    seed: u64,
    /// With --controlled: how long, in milliseconds, a copy may work without sending a
    /// request before the run goes on without it
    #[arg(long, default_value_t = 2000, requires = "controlled")]
    grace_ms: u64,
    /// With --controlled: the clock each copy reads the time of day from. `machine` (the
    /// default), or `run`: its wall clock stands at the run's time and moves only with it
    /// (libfaketime on the copy; its monotonic clock, which sleeps and timers count, stays
    /// the machine's), so that what it stamps or compares with the time of day is the
    /// story's (docs/controlled.md)
    #[arg(long, value_name = "CLOCK", default_value = "machine", value_parser = ["machine", "run"], requires = "controlled")]
    program_clock: String,
    /// With --controlled: run each world twice and compare the two histories (every turn,
    /// request, reply and event); where they part, the first differing line is named
    #[arg(long, requires = "controlled")]
    twice: bool,
    /// With --random: run the worlds in this many processes at once, one when not given (a
    /// controlled run holds its process's clock, so each takes its own)
    #[arg(long, requires = "random", value_parser = clap::value_parser!(u32).range(1..=64))]
    jobs: Option<u32>,
    /// The seeds of one share of a --random --jobs run (given by fencesim to the processes
    /// it starts)
    #[arg(long, hide = true, value_delimiter = ',', conflicts_with_all = ["random", "replay", "runs"])]
    share_seeds: Vec<u64>,
    /// The worker program and its arguments, after `--`; one copy is started per worker
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The replay file's world and seed, when one is given (a note when it plants a bug in the
/// project's own worker, which the program run here is not).
fn replay_world(args: &WorkerArgs) -> Result<Option<(crate::scenario::Scenario, u64)>, String> {
    let Some(path) = &args.replay else { return Ok(None) };
    let (scenario, seed, mutant) = crate::cli::live::replayed(path)?;
    if let Some(mutant) = mutant {
        eprintln!(
            "note: {} plants {} in the project's own worker; the program run here is not changed by it \
             (`fencesim contract-worker --like FILE` plants it)",
            path.display(),
            mutant.name()
        );
    }
    Ok(Some((scenario, seed)))
}

pub fn run(args: WorkerArgs) -> ExitCode {
    interrupt::watch();
    let replay = match replay_world(&args) {
        Ok(replay) => replay,
        Err(error) => return bad_input(error),
    };
    let config = ForeignConfig {
        command: args.command.clone(),
        gateway: args.gateway,
        time_scale: args.time_scale,
        replay,
        keep: args.keep.clone(),
        first_take_within: Duration::from_secs(args.first_take_within),
        control: args.controlled.then_some(Control {
            seed: args.seed,
            grace: Duration::from_millis(args.grace_ms),
            program_clock: args.program_clock == "run",
        }),
    };
    if args.runs > 1 {
        return runs(&config, args.runs);
    }
    if let Some(ask) = random_ask(&args) {
        return crate::cli::worker_random::random(&config, &ask);
    }
    if args.beside.is_some() && args.html.is_none() {
        return bad_input("--beside goes with --random (a verdict beside each world's) or --html (a run beside the program's)");
    }
    let mut kept = Kept::new();
    let ForeignRun { outcome, ended, own, left_early, history, behind_ms } =
        match run_foreign_kept(&config, &mut kept) {
            Ok(done) => done,
            Err(error) if interrupt::asked() => {
                eprintln!("fencesim: {error}");
                return ExitCode::from(INTERRUPTED);
            }
            Err(error) => return bad_input(error),
        };
    let again = match (args.twice, &history) {
        (true, Some(first)) => match run_foreign_kept(
            &ForeignConfig { keep: again_dir(&config.keep), ..config.clone() },
            &mut kept,
        ) {
            Ok(second) => Some(second.history.and_then(|second| first.parting(&second))),
            Err(error) => return bad_input(error),
        },
        _ => None,
    };
    if let Err(error) = keep(&args, &config, &outcome) {
        return bad_input(error);
    }
    print_run(&args, &config, &outcome, own.as_ref(), &behind_ms);
    tell_leaving(&left_early, &ended);
    if let (Some(history), Some(control)) = (&history, config.control) {
        let told = format!("controlled run, seed {}: {}", control.seed, history_words(history));
        match args.json {
            true => eprintln!("{told}"),
            false => println!("{told}"),
        }
    }
    finish(again, outcome.passed())
}

/// The run's verdict as asked (the story or one JSON object), and how far it fell behind.
fn print_run(
    args: &WorkerArgs,
    config: &ForeignConfig,
    outcome: &Outcome,
    own: Option<&Outcome>,
    behind_ms: &[(WorkerId, u64)],
) {
    match args.json {
        true => {
            let mut json = outcome.to_json();
            let behind = behind_ms.iter().map(|(worker, ms)| (worker.to_string(), serde_json::json!(ms)));
            json["behind_ms"] = serde_json::Value::Object(behind.collect());
            println!("{json}");
            if let Some(words) = behind_words(behind_ms) {
                eprintln!("worker: {words}");
            }
        }
        false => {
            tell(outcome, &config.command);
            if let Some(own) = own {
                println!("{}", own_words(&outcome.broken(), &own.broken()));
            }
            if let Some(words) = behind_words(behind_ms) {
                println!("{words}");
            }
        }
    }
}

/// What `--random` (or a share of one) asks, if it was asked.
fn random_ask(args: &WorkerArgs) -> Option<crate::cli::worker_random::RandomAsk<'_>> {
    let share = !args.share_seeds.is_empty();
    let seeds = match (share, args.random) {
        (true, _) => args.share_seeds.clone(),
        (false, Some(count)) => (args.first_seed..args.first_seed + u64::from(count)).collect(),
        (false, None) => return None,
    };
    let mut again = vec![
        format!("--gateway={}", args.gateway),
        format!("--time-scale={}", args.time_scale),
        format!("--first-take-within={}", args.first_take_within),
    ];
    if args.controlled {
        again.extend(["--controlled".to_owned(), format!("--grace-ms={}", args.grace_ms)]);
        again.push(format!("--program-clock={}", args.program_clock));
    }
    again.extend(args.twice.then(|| "--twice".to_owned()));
    again.extend(args.beside.map(|m| format!("--beside={}", crate::cli::args::mechanism_or_file_word(m))));
    again.extend(args.save_replay.as_ref().map(|dir| format!("--save-replay={}", dir.display())));
    again.extend(args.keep.as_ref().map(|dir| format!("--keep={}", dir.display())));
    again.push("--".to_owned());
    again.extend(args.command.iter().cloned());
    Some(crate::cli::worker_random::RandomAsk {
        seeds,
        beside: args.beside,
        save: args.save_replay.as_deref(),
        twice: args.twice,
        jobs: args.jobs.unwrap_or(1),
        share,
        again,
    })
}

/// Where a run made again with `--twice` keeps its files: `again` inside the first's.
pub(super) fn again_dir(keep: &Option<PathBuf>) -> Option<PathBuf> {
    keep.as_ref().map(|dir| dir.join("again"))
}

/// The exit code: a second run that parted from the first is a failure of its own.
fn finish(again: Option<Option<Parting>>, passed: bool) -> ExitCode {
    match again {
        Some(Some(parting)) => {
            println!("run again: {}", parting_words(&parting));
            ExitCode::from(1)
        }
        Some(None) => {
            println!("run again: the same history");
            verdict(passed)
        }
        None => verdict(passed),
    }
}

/// How far behind the simulation's pace a copy may fall, in story milliseconds, before a
/// run says so: a second of the story, the gap the pace takes for a pause rather than work.
/// Measured on the worked example at time scale 0.25 with the Python example worker: 0.23
/// to 0.33 s on an idle machine (its first gateway call waits on reading 1,200 rows), 1.4
/// to 1.8 s with four busy loops on the two cores.
pub const BEHIND_TOLD_MS: u64 = crate::live::pace::PAUSE_MS;

/// What a run says when a copy's story fell behind the simulation's pace.
pub(super) fn behind_words(behind_ms: &[(WorkerId, u64)]) -> Option<String> {
    let fell: Vec<String> = behind_ms
        .iter()
        .filter(|&&(_, ms)| ms >= BEHIND_TOLD_MS)
        .map(|(worker, ms)| format!("{worker} by {:.1} s of the story", *ms as f64 / 1_000.0))
        .collect();
    (!fell.is_empty()).then(|| {
        format!(
            "the program fell behind the simulation's pace ({}): its own work between two gateway \
             calls took longer than the calls' latency, more than its next calls could make up, so \
             this run told a later story than the simulation's and its verdict is of that story; a \
             slower --time-scale (0.5, 1) or a quieter machine gives it room",
            fell.join(", ")
        )
    })
}

/// Says which copies left early, and which stayed after the run was over.
fn tell_leaving(left_early: &[crate::foreign::watch::LeftEarly], ended: &Ended) {
    for told in left_early {
        eprintln!("worker: {told:#}");
    }
    if let Ended::Stayed(workers) = ended {
        let names: Vec<String> = workers.iter().map(ToString::to_string).collect();
        eprintln!(
            "worker: {} did not leave within 5 s after the queue answered 410 (the run is over); stopped",
            names.join(", ")
        );
    }
}

/// A controlled run's history in one line.
fn history_words(history: &History) -> String {
    format!("a history of {} lines, hash {}", history.lines.len(), history.hash())
}

/// Where a second run's history parted from the first's.
pub(super) fn parting_words(parting: &Parting) -> String {
    let line = |told: &Option<String>| told.clone().unwrap_or_else(|| "(the history ended)".to_owned());
    format!(
        "the history parted at line {}:\n  first run:  {}\n  second run: {}",
        parting.line,
        line(&parting.first),
        line(&parting.second)
    )
}

/// Writes what the arguments ask to keep of a run: its trace, its page, and its replay
/// file when it failed.
fn keep(args: &WorkerArgs, config: &ForeignConfig, outcome: &Outcome) -> Result<(), String> {
    if let Some(path) = &args.trace {
        write_whole(path, &outcome.trace_bytes())
            .map_err(|e| format!("cannot write the trace to {}: {e}", path.display()))?;
    }
    let program = config.command.join(" ");
    if let Some(path) = &args.html {
        let world = match &args.replay {
            Some(file) => format!("--replay {}", file.display()),
            None => format!("--gateway {}", config.gateway),
        };
        let beside = args
            .beside
            .map(|m| format!(" --beside {}", crate::cli::args::mechanism_or_file_word(m)))
            .unwrap_or_default();
        let again = format!("fencesim worker {world} --html {}{beside} -- {program}", path.display());
        crate::tell::timeline::write_program_page(path, outcome, &program, args.beside, &again)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(dir) = args.save_replay.as_ref().filter(|_| !outcome.passed()) {
        let program = WorkerProgram {
            command: config.command.clone(),
            time_scale: config.time_scale,
            controlled: config.control.map(|control| control.seed),
            run_clock: config.control.is_some_and(|control| control.program_clock),
        };
        let path = ReplayFile::of_worker(outcome, program).write_into_as(dir, "worker")?;
        eprintln!("saved {} ({})", path.display(), ReplayFile::command(&path));
    }
    Ok(())
}

fn tell(outcome: &Outcome, command: &[String]) {
    let lines = story(outcome);
    print!("{}", render_story(outcome, &lines, usize::MAX));
    println!(
        "\nworker `{}`, judged from what Redis, the database, the gateway and the queue saw:",
        command.join(" ")
    );
    println!("{}", outcome.counts_line());
    print!("{}", outcome.breach_lines("VIOLATION ", false));
}

/// `fencesim replay FILE` of a team's worker program's run: the same program through the
/// same world and plan, `runs` times, and how often it broke what the file says it broke.
pub fn replay_worker(
    replay: &ReplayFile,
    scenario: crate::scenario::Scenario,
    worker: &WorkerProgram,
    runs: u32,
) -> ExitCode {
    interrupt::watch();
    println!("the worker program `{}`, at time scale {}", worker.command.join(" "), worker.time_scale);
    let config = ForeignConfig {
        command: worker.command.clone(),
        gateway: replay.gateway,
        time_scale: worker.time_scale,
        replay: Some((scenario, replay.seed)),
        keep: None,
        first_take_within: Duration::from_secs(20),
        control: worker.controlled.map(|seed| Control::of_program(worker, seed)),
    };
    let expected: Vec<&str> = replay.violations.iter().map(String::as_str).collect();
    let (mut repeated, mut passed, mut own) = (0, true, OwnCount::default());
    let mut kept = Kept::new();
    for run in 1..=runs {
        let outcome = match run_foreign_kept(&config, &mut kept) {
            Ok(done) => own.counted(done),
            Err(error) => return bad_input(error),
        };
        if runs == 1 {
            tell(&outcome, &config.command);
        }
        let these = outcome.broken();
        passed &= outcome.passed();
        match these == expected {
            true => repeated += 1,
            false => println!(
                "run {run}: the verdict did not repeat: the file says {}, this run {}",
                verdict_words(&expected),
                verdict_words(&these)
            ),
        }
    }
    println!("the verdict repeated in {repeated} of {runs} runs: {}", verdict_words(&expected));
    own.tell(runs);
    verdict(passed)
}

pub(super) fn verdict_words(broken: &[&str]) -> String {
    match broken.is_empty() {
        true => "nothing broken".to_owned(),
        false => format!("broke {}", broken.join(", ")),
    }
}

/// Runs the program `count` times through the same world and plan, and tells per
/// invariant how many runs broke it; exit 1 when any run broke any.
fn runs(config: &ForeignConfig, count: u32) -> ExitCode {
    let mut broken: std::collections::BTreeMap<&'static str, u32> = std::collections::BTreeMap::new();
    let mut names: Vec<&'static str> = Vec::new();
    let mut own = OwnCount::default();
    let mut kept = Kept::new();
    for run in 1..=count {
        let outcome = match run_foreign_kept(config, &mut kept) {
            Ok(done) => own.counted(done),
            Err(error) => return bad_input(error),
        };
        names = outcome.checks.iter().map(|check| check.invariant).collect();
        let these = outcome.broken();
        for name in &these {
            *broken.entry(name).or_default() += 1;
        }
        eprintln!("run {run} of {count}: {}", verdict_words(&these));
    }
    println!("`{}`, {count} runs:", config.command.join(" "));
    for name in names {
        let times = broken.get(name).copied().unwrap_or(0);
        println!("  {name:<22} broken in {times} of {count} runs");
    }
    own.tell(count);
    verdict(broken.is_empty())
}

/// How often the verdict from a program's own events agreed with the observed one, over
/// the runs in which it wrote any.
#[derive(Default)]
pub(super) struct OwnCount {
    told: u32,
    agreed: u32,
}

impl OwnCount {
    /// Counts the run, says when the two verdicts part, and gives back the observed outcome.
    fn counted(&mut self, run: ForeignRun) -> Outcome {
        for told in &run.left_early {
            println!("  {told}");
        }
        if let Some(words) = behind_words(&run.behind_ms) {
            println!("  {words}");
        }
        let agrees = run.own_agrees();
        self.note(agrees);
        if let Some(agrees) = agrees {
            if !agrees {
                let own = run.own.as_ref().map(Outcome::broken).unwrap_or_default();
                println!("  {}", own_words(&run.outcome.broken(), &own));
            }
        }
        run.outcome
    }

    /// Counts a run's agreement, when it wrote its own events.
    pub(super) fn note(&mut self, agrees: Option<bool>) {
        if let Some(agrees) = agrees {
            self.told += 1;
            self.agreed += u32::from(agrees);
        }
    }

    pub(super) fn tell(&self, runs: u32) {
        if self.told > 0 {
            println!(
                "judged from the program's own events ({} of {runs} runs wrote them): the same verdict in {} of {}",
                self.told, self.agreed, self.told
            );
        }
    }
}

/// The verdict from the program's own events beside the observed one.
pub(super) fn own_words(observed: &[&str], own: &[&str]) -> String {
    match observed == own {
        true => {
            format!("judged again from the program's own events: the same verdict ({})", verdict_words(own))
        }
        false => format!(
            "judged again from the program's own events: {}, where what the components saw {}",
            verdict_words(own),
            verdict_words(observed)
        ),
    }
}

#[derive(clap::Args)]
pub struct ContractWorkerArgs {
    /// The mechanism the worker follows (its keys are those the contract names)
    #[arg(long, default_value = "fenced", value_parser = crate::cli::args::parse_mechanism)]
    mechanism: crate::model::Mechanism,
    /// Plant this bug of the mutant catalogue in it
    #[arg(long)]
    mutant: Option<String>,
    /// Take the mechanism and the planted bug from this replay file
    #[arg(long, conflicts_with_all = ["mechanism", "mutant"])]
    like: Option<PathBuf>,
    /// The run's time scale (`fencesim worker --time-scale`): the contract's TTL is real time
    #[arg(long, default_value_t = 0.25)]
    time_scale: f64,
}

/// `fencesim contract-worker`: the project's own worker as a program that follows the
/// contract, started by `fencesim worker -- fencesim contract-worker`.
pub fn contract_worker(args: ContractWorkerArgs) -> ExitCode {
    let (mechanism, mutant) = match &args.like {
        Some(path) => match crate::cli::live::replayed(path) {
            Ok((scenario, _, mutant)) => (scenario.world.mechanism, mutant),
            Err(error) => return bad_input(error),
        },
        None => match args.mutant.as_deref().map(str::parse).transpose() {
            Ok(mutant) => (args.mechanism, mutant),
            Err(error) => return bad_input(error),
        },
    };
    let asked = crate::foreign::own_worker::ContractWorker { mechanism, mutant, time_scale: args.time_scale };
    match crate::foreign::own_worker::run_contract_worker(asked) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => bad_input(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_behind_the_pace_by_a_second_of_the_story_is_named() {
        let (a, b) = (WorkerId(0), WorkerId(1));
        assert_eq!(behind_words(&[(a, 254), (b, 999)]), None, "under a second: not told");
        let words = behind_words(&[(a, 11_631), (b, 240)]).expect("told");
        assert!(words.contains("fell behind the simulation's pace (A by 11.6 s of the story)"), "{words}");
        assert!(words.contains("--time-scale"), "{words}");
    }
}
