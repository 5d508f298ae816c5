//! `fencesim live`: the worked example with real processes against a real redis-server,
//! a real SQLite file and a gateway service on loopback, judged by the same checkers and
//! told by the same narrator as a simulated run.

use crate::cli::args::{parse_gateway, parse_mechanism};
use crate::cli::{bad_input, verdict};
use fencesim::live::{run_live, run_worker, LiveConfig, StoreChoice, WorkerSpec};
use fencesim::model::Mechanism;
use fencesim::runner::Outcome;
use fencesim::sim::{EventKind, GatewayMode};
use fencesim::tell::story::{render_story, story};
use fencesim::tell::write::write_whole;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LiveArgs {
    /// The mechanism (`fencesim mechanisms` lists them; one Redis instance), e.g. fenced
    #[arg(long, alias = "mechanism", default_value = "fenced", value_parser = parse_mechanism)]
    strategy: Mechanism,
    /// idempotent or non-idempotent
    #[arg(long, default_value = "idempotent", value_parser = parse_gateway)]
    gateway: GatewayMode,
    /// Real time per story time: 0.1 tells the two-minute story in about twelve seconds
    #[arg(long, default_value_t = 0.1, allow_hyphen_values = true)]
    time_scale: f64,
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

fn tell(outcome: &Outcome) {
    let lines = story(outcome);
    print!("{}", render_story(outcome, &lines, usize::MAX));
    if let Some(note) = too_slow(outcome) {
        eprintln!("{note}");
    }
    println!("\nlive: {}", outcome.counts_line());
    print!("{}", outcome.breach_lines("VIOLATION ", false));
}

pub fn live_command(args: LiveArgs) -> ExitCode {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => return bad_input(format!("cannot find the fencesim program for the workers: {e}")),
    };
    if !args.strategy.spec().fence_settlement {
        return bad_input(format!(
            "--mechanism {}: the live arm has one store only, and this mechanism is about a second one; run it in the simulation (fencesim run --mechanism {})",
            args.strategy, args.strategy
        ));
    }
    let store = match (args.database.as_str(), args.db, args.postgres) {
        ("postgres", None, url) => StoreChoice::Postgres(url),
        ("sqlite", file, None) => StoreChoice::Sqlite(file),
        (database, _, _) => {
            return bad_input(format!(
                "--database {database}: --db goes with sqlite, --postgres with postgres"
            ))
        }
    };
    let config = LiveConfig {
        program,
        store,
        mechanism: args.strategy,
        gateway: args.gateway,
        time_scale: args.time_scale,
        redis_url: args.redis,
        gateway_port: args.gateway_port,
        keep: args.keep,
    };
    let outcome = match run_live(&config) {
        Ok(outcome) => outcome,
        Err(error) => return bad_input(error),
    };
    if let Some(path) = args.trace {
        if let Err(e) = write_whole(&path, &outcome.trace_bytes()) {
            return bad_input(format!("cannot write the trace to {}: {e}", path.display()));
        }
    }
    if args.json {
        println!("{}", outcome.to_json());
    } else {
        tell(&outcome);
    }
    verdict(outcome.passed())
}

/// A worker process of a live run (started by `fencesim live`, not by hand).
pub fn live_worker_command(spec: String) -> ExitCode {
    let spec: WorkerSpec = match serde_json::from_str(&spec) {
        Ok(spec) => spec,
        Err(e) => return bad_input(format!("a worker spec that is not one: {e}")),
    };
    match run_worker(spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => bad_input(error),
    }
}
