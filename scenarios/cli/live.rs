//! `fencesim live`: the worked example, or a replay file's world and faults (`--replay`),
//! with real processes against a real redis-server, a real SQLite file or PostgreSQL and
//! a gateway service on loopback, judged by the same checkers and told by the same
//! narrator as a simulated run; `--runs N` plays it N times beside the simulation.

use crate::cli::args::{chosen, parse_gateway, parse_mechanism};
use crate::cli::{bad_input, verdict, INTERRUPTED};
use crate::files::replay_file::ReplayFile;
use crate::files::write::write_whole;
use crate::live::coordinator::{live_scenario, refusal};
use crate::live::interrupt;
use crate::live::postgres::PostgresServer;
use crate::live::scale::{choose, measure_lag_on, shortest_interval, Probe};
use crate::live::{run_live, run_worker, LiveConfig, StoreChoice, WorkerSpec};
use crate::model::Mechanism;
use crate::mutant::Mutant;
use crate::runner::{run_with, Outcome, DEFAULT_SEED};
use crate::scenario::Scenario;
use crate::sim::{EventKind, GatewayMode};
use crate::tell::story::{render_story, story};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LiveArgs {
    /// The mechanism (`fencesim mechanisms` lists them; one Redis instance), e.g. fenced
    #[arg(long, alias = "strategy", default_value = "fenced", value_parser = parse_mechanism)]
    mechanism: Mechanism,
    /// Or a mechanism described in a file (docs/mechanism-files.md), checked before it runs
    #[arg(long, value_name = "FILE", conflicts_with = "mechanism")]
    mechanism_file: Option<PathBuf>,
    /// idempotent or non-idempotent
    #[arg(long, default_value = "idempotent", value_parser = parse_gateway)]
    gateway: GatewayMode,
    /// Run this replay file's world and faults instead of the worked example (its
    /// mechanism and gateway are the file's)
    #[arg(long, conflicts_with_all = ["mechanism", "mechanism_file", "gateway"])]
    replay: Option<PathBuf>,
    /// Play it this many times and count, per invariant, the runs that broke it, beside
    /// the simulation's verdict
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Real time per story time: 0.1 tells the worked example's two minutes in about twelve
    /// seconds [default: 0.1 for the worked example; for a replay file, chosen from its
    /// story and this machine's measured lag, and printed]
    #[arg(long, allow_hyphen_values = true)]
    time_scale: Option<f64>,
    /// Use the Redis at this URL (its database must be empty) instead of starting one
    #[arg(long)]
    redis: Option<String>,
    /// The refund database: sqlite (a file in WAL mode) or postgres
    #[arg(long, default_value = "sqlite", value_parser = ["sqlite", "postgres"])]
    database: String,
    /// Keep the SQLite refund store in this file (made if missing; else a refund store)
    #[arg(long, conflicts_with = "postgres")]
    db: Option<PathBuf>,
    /// With --database postgres: use the database at this URL instead of starting a cluster
    #[arg(long)]
    postgres: Option<String>,
    /// The gateway's port on 127.0.0.1 (0: any free port)
    #[arg(long, default_value_t = 0)]
    gateway_port: u16,
    /// Keep every process's event file (JSON Lines) in this directory
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Write the merged history as JSON Lines to this file
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Print one JSON object instead of the story
    #[arg(long)]
    json: bool,
}

/// When the pause came after the first lease had already ended, the machine was too slow
/// for the time scale to tell the worked example's story (the verdicts still stand).
fn too_slow(outcome: &Outcome) -> Option<String> {
    let froze = outcome.record.events.iter().find(|e| matches!(e.kind, EventKind::FaultFired { .. }))?.at_ms;
    let expired = outcome.record.epochs.first()?.expired_at_ms?;
    (froze > expired).then(|| {
        let at = |ms| outcome.scenario.base.plus(ms);
        format!(
            "note: A reached its pause at {}, after its lease had expired at {}: this machine did a row's work \
             slower than the gateway's latency at this time scale; a larger --time-scale tells the worked example's story",
            at(froze),
            at(expired)
        )
    })
}

fn tell(outcome: &Outcome, worked_example: bool) {
    let lines = story(outcome);
    print!("{}", render_story(outcome, &lines, usize::MAX));
    if let Some(note) = too_slow(outcome).filter(|_| worked_example) {
        eprintln!("{note}");
    }
    println!("\nlive: {}", outcome.counts_line());
    print!("{}", outcome.breach_lines("VIOLATION ", false));
}

/// The mechanism the worked example runs under live: one the live arm's single store can
/// judge.
fn live_mechanism(args: &LiveArgs) -> Result<Mechanism, String> {
    let mechanism = chosen(Some(args.mechanism), args.mechanism_file.as_deref())?;
    if !mechanism.spec().fence_settlement && args.replay.is_none() {
        let option = crate::mechanism_file::option_for(mechanism);
        return Err(format!(
            "{option}: the live arm has one store only, and this mechanism is about a second one; run it in the simulation (fencesim run {option})"
        ));
    }
    Ok(mechanism)
}

pub fn live_command(args: LiveArgs) -> ExitCode {
    interrupt::watch();
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => return bad_input(format!("cannot find the fencesim program for the workers: {e}")),
    };
    let mechanism = match live_mechanism(&args) {
        Ok(mechanism) => mechanism,
        Err(error) => return bad_input(error),
    };
    let replay = match args.replay.as_deref().map(replayed).transpose() {
        Ok(replay) => replay,
        Err(error) => return bad_input(error),
    };
    let store = match (args.database.as_str(), args.db, args.postgres) {
        ("postgres", None, url) => StoreChoice::Postgres(url),
        ("sqlite", file, None) => StoreChoice::Sqlite(file),
        (database, _, _) => {
            return bad_input(format!(
                "--database {database}: --db goes with sqlite, --postgres with postgres"
            ))
        }
    };
    let (replay, mutant) = match replay {
        Some((scenario, seed, mutant)) => (Some((scenario, seed)), mutant),
        None => (None, None),
    };
    let time_scale = match (&replay, args.time_scale) {
        (_, Some(scale)) => scale,
        (None, None) => 0.1,
        (Some((scenario, _)), None) if refusal(&scenario.world).is_err() => 1.0,
        (Some((scenario, seed)), None) => match default_scale(scenario, *seed, mutant, &store) {
            Ok(scale) => scale,
            Err(error) => return bad_input(error),
        },
    };
    let config = LiveConfig {
        program,
        store,
        mechanism,
        gateway: args.gateway,
        time_scale,
        redis_url: args.redis,
        gateway_port: args.gateway_port,
        keep: args.keep,
        replay,
        mutant,
    };
    if args.runs > 1 {
        return runs(&config, args.runs, args.json);
    }
    let outcome = match run_live(&config) {
        Ok(outcome) => outcome,
        Err(error) => return failed(error),
    };
    if let Some(path) = args.trace {
        if let Err(e) = write_whole(&path, &outcome.trace_bytes()) {
            return bad_input(format!("cannot write the trace to {}: {e}", path.display()));
        }
    }
    if args.json {
        println!("{}", outcome.to_json());
    } else {
        tell(&outcome, config.replay.is_none());
    }
    verdict(outcome.passed())
}

/// A live run that could not go on: stopped by a signal (it cleaned up and did not
/// finish, so it cannot say whether anything broke), or anything else (exit 2).
fn failed(error: String) -> ExitCode {
    match interrupt::asked() {
        true => {
            eprintln!("fencesim: {error}");
            ExitCode::from(INTERRUPTED)
        }
        false => bad_input(error),
    }
}

/// A replay file's world, seed and planted bug, for a live run.
pub(crate) fn replayed(path: &std::path::Path) -> Result<(Scenario, u64, Option<Mutant>), String> {
    let file = ReplayFile::load(path)?;
    Ok((file.scenario().map_err(|e| format!("{}: {e}", path.display()))?, file.seed, file.mutant))
}

/// Plays the world `count` times, and tells per invariant how many live runs broke it
/// beside whether the simulation does; exit 1 when any run broke any.
fn runs(config: &LiveConfig, count: u32, json: bool) -> ExitCode {
    let (scenario, seed) = match &config.replay {
        Some((scenario, seed)) => (scenario.clone(), *seed),
        None => match live_scenario(config) {
            Ok((scenario, _)) => (scenario, DEFAULT_SEED),
            Err(error) => return bad_input(error),
        },
    };
    let simulated = match run_with(&scenario, seed, config.mutant) {
        Ok(outcome) => outcome,
        Err(error) => return bad_input(error),
    };
    let mut broken: BTreeMap<&'static str, u32> = BTreeMap::new();
    for _ in 0..count {
        let outcome = match run_live(config) {
            Ok(outcome) => outcome,
            Err(error) => return failed(error),
        };
        for check in outcome.checks.iter().filter(|check| check.is_violation()) {
            *broken.entry(check.invariant).or_default() += 1;
        }
    }
    let rows: Vec<(&'static str, bool, u32)> = simulated
        .checks
        .iter()
        .map(|check| {
            (check.invariant, check.is_violation(), broken.get(check.invariant).copied().unwrap_or(0))
        })
        .collect();
    if json {
        let invariants: Vec<_> = rows
            .iter()
            .map(|(name, sim, live)| serde_json::json!({"name": name, "simulated_broken": sim, "live_runs_broken": live}))
            .collect();
        let out =
            serde_json::json!({"runs": count, "time_scale": config.time_scale, "invariants": invariants});
        println!("{out}");
    } else {
        println!("{count} live runs at time scale {}, beside the simulation:", config.time_scale);
        println!("{:<24} {:<12} live runs broken", "invariant", "simulated");
        for (name, sim, live) in &rows {
            println!("{name:<24} {:<12} {live} of {count}", if *sim { "broken" } else { "holds" });
        }
    }
    verdict(broken.is_empty())
}

/// A worker process of a live run (started by `fencesim live`, not by hand).
pub fn live_worker_command(spec: String) -> ExitCode {
    let spec = match worker_spec(&spec) {
        Ok(spec) => spec,
        Err(error) => return bad_input(error),
    };
    match run_worker(spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => bad_input(error),
    }
}

/// A worker's spec, its mechanism's file (if it has one) defined first, so that the
/// mechanism's name is known when the rest is read.
fn worker_spec(text: &str) -> Result<WorkerSpec, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("a worker spec that is not one: {e}"))?;
    crate::mechanism_file::define_carried(&value, "the worker spec's mechanism_file")?;
    serde_json::from_value(value).map_err(|e| format!("a worker spec that is not one: {e}"))
}

/// The time scale chosen from the simulated run and this machine's lag per request on
/// the run's database, printed, with a warning when the verdict rests on the order of one
/// millisecond.
fn default_scale(
    scenario: &crate::scenario::Scenario,
    seed: u64,
    mutant: Option<crate::mutant::Mutant>,
    store: &StoreChoice,
) -> Result<f64, String> {
    let simulated = run_with(scenario, seed, mutant)?;
    let lag = match store {
        StoreChoice::Sqlite(_) => measure_lag_on(Probe::Sqlite),
        StoreChoice::Postgres(Some(url)) => measure_lag_on(Probe::Postgres(url)),
        StoreChoice::Postgres(None) => {
            // each run starts a cluster of its own; this one is for the measurement alone
            let server = PostgresServer::start("lag")?;
            measure_lag_on(Probe::Postgres(&server.url()))
        }
    };
    let chosen = choose(shortest_interval(&simulated), lag.map_err(|e| format!("measuring the lag: {e}"))?);
    eprintln!("live: {}; --time-scale sets another", chosen.describe());
    warn_if_unsteady(scenario, seed, mutant, &simulated);
    Ok(chosen.scale)
}

/// Says so when the simulated verdict rests on the order of one millisecond: the same
/// world under the scheduler's other seeds does not always break the same invariants, and a
/// real run need not either.
fn warn_if_unsteady(
    scenario: &crate::scenario::Scenario,
    seed: u64,
    mutant: Option<crate::mutant::Mutant>,
    simulated: &crate::runner::Outcome,
) {
    use crate::search::widen::{steady_under, OTHER_SCHEDULES};
    let broken: Vec<&str> = simulated.broken();
    let mut run = |trial: &crate::scenario::Scenario, seed| run_with(trial, seed, mutant);
    if let Ok(steady) = steady_under(scenario, seed, &broken, &mut run) {
        if !broken.is_empty() && steady < OTHER_SCHEDULES {
            eprintln!(
                "live: the simulation breaks these invariants under only {steady} of {OTHER_SCHEDULES} other schedules \
                 (the same world, the scheduler's next seeds): the verdict rests on the order of one millisecond, \
                 which a real run need not keep (`fencesim shrink FILE` makes it steady where it can)"
            );
        }
    }
}
