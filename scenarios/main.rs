//! The `fencesim` command line.

use clap::{Parser, Subcommand};
use fencesim::demo;
use fencesim::model::Mechanism;
use fencesim::report::write_reports;
use fencesim::runner::{run, DEFAULT_SEED};
use fencesim::scenario;
use fencesim::sim::GatewayMode;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fencesim",
    version,
    about = "Why a lock with a TTL needs a fencing token checked by the database, shown in a deterministic simulation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tell the worked example second by second, with the fence and without it
    Demo {
        #[arg(long, default_value_t = DEFAULT_SEED, value_parser = parse_seed, allow_hyphen_values = true)]
        seed: u64,
    },
    /// Run one scenario under one strategy and check every invariant
    Run {
        #[arg(long, default_value = "worked-example", value_parser = parse_scenario)]
        scenario: String,
        /// ttl-only or fenced
        #[arg(long, value_parser = parse_strategy)]
        strategy: Mechanism,
        /// idempotent or non-idempotent
        #[arg(long, default_value = "idempotent", value_parser = parse_gateway)]
        gateway: GatewayMode,
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
    },
    /// Regenerate the reports in reports/
    Report {
        /// The project root to write under
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Time the simulated worked example against its SQL floor (use a release build)
    Bench {
        #[arg(long, default_value_t = 21)]
        runs: usize,
        #[arg(long)]
        json: bool,
        /// Also write the figures to reports/bench.md under this project root
        #[arg(long, value_name = "ROOT", num_args = 0..=1, default_missing_value = ".")]
        record: Option<PathBuf>,
    },
}

fn parse_scenario(s: &str) -> Result<String, String> {
    scenario::by_name(s).map(|_| s.to_owned())
}

fn parse_strategy(s: &str) -> Result<Mechanism, String> {
    s.parse()
}

fn parse_gateway(s: &str) -> Result<GatewayMode, String> {
    s.parse()
}

fn parse_seed(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| format!("the seed must be a whole number from 0 to {}, got '{s}'", u64::MAX))
}

fn parse_ttl(s: &str) -> Result<u64, String> {
    match s.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n as u64),
        Ok(n) => Err(format!("the TTL must be a positive number of milliseconds, got {n}")),
        Err(_) => Err(format!("the TTL must be a whole number of milliseconds, got '{s}'")),
    }
}

/// Bad input: exit 2 with a message that says what is wrong.
fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("fencesim: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo { seed } => match demo::render(seed) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => bad_input(e),
        },
        Command::Run { scenario, strategy, gateway, seed, ttl_ms, json, trace } => {
            let mut sc = match scenario::by_name(&scenario) {
                Ok(sc) => sc.with_strategy(strategy, gateway),
                Err(e) => return bad_input(e),
            };
            if let Some(ttl) = ttl_ms {
                sc.world.ttl_ms = ttl;
            }
            let outcome = match run(&sc, seed) {
                Ok(o) => o,
                Err(e) => return bad_input(e),
            };
            if let Some(path) = trace {
                if let Err(e) = std::fs::write(&path, outcome.trace_bytes()) {
                    return bad_input(format!("cannot write the trace to {}: {e}", path.display()));
                }
            }
            if json {
                println!("{}", outcome.to_json());
            } else {
                let lines = fencesim::narrate::story(&outcome);
                print!("{}", fencesim::narrate::render_story(&outcome, &lines, usize::MAX));
                let t = outcome.tally();
                println!(
                    "\nseed {} trace {:016x}: {} of {} refunds sent, {} gateway refunds, {} cents, {} fence rejection(s)",
                    seed, outcome.trace_hash, t.refunds_sent, t.refunds_total, t.gateway_refunds, t.refunded_cents, t.fence_rejections
                );
                for (check, breach) in fencesim::checkers::violations(&outcome.checks) {
                    println!(
                        "VIOLATION {} ({} time(s)), first at {}: {}",
                        check.invariant,
                        check.breaches.len(),
                        outcome.scenario.base.plus(breach.at_ms),
                        breach.detail
                    );
                }
                if !outcome.passed() {
                    println!("reproduce with: {}", outcome.replay_command());
                }
            }
            if outcome.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Report { root } => match write_reports(&root) {
            Ok(paths) => {
                for p in paths {
                    println!("wrote {p}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => bad_input(e),
        },
        Command::Bench { runs, json, record } => match fencesim::bench::bench(runs) {
            Ok(r) => {
                if let Some(root) = record {
                    let path = root.join(fencesim::bench::BENCH_REPORT);
                    if let Err(e) = std::fs::write(&path, fencesim::bench::bench_report(&r)) {
                        return bad_input(format!("cannot write {}: {e}", path.display()));
                    }
                }
                if json {
                    println!("{}", serde_json::to_string(&r).expect("a bench result serializes"));
                } else {
                    println!(
                        "worked example: median {:.2} ms over {} runs (world {:.2} ms, checkers and hash {:.2} ms)\n\
                         SQL floor, the same {} statements on a bare database: median {:.2} ms\n\
                         ratio {:.2} (target <= 1.25)",
                        r.worked_example_ms_median,
                        r.runs,
                        r.world_ms_median,
                        r.checks_ms_median,
                        r.statements,
                        r.sql_floor_ms_median,
                        r.ratio
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => bad_input(e),
        },
    }
}
