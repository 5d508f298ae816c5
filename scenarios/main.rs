//! The `fencesim` command line.

use clap::{Parser, Subcommand};
use fencesim::demo;
use fencesim::explore;
use fencesim::model::Mechanism;
use fencesim::random::FaultMask;
use fencesim::replay::ReplayFile;
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
        /// Save the run as a replay file (into this directory), failing or not
        #[arg(long)]
        save_replay: Option<PathBuf>,
    },
    /// List the strategies and what each promises
    Strategies,
    /// Run many seeds in parallel and keep every failure as a replay file
    Explore {
        #[arg(long, value_parser = parse_strategy)]
        strategy: Mechanism,
        #[arg(long, default_value = "random", value_parser = parse_scenario)]
        scenario: String,
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
        #[arg(long)]
        json: bool,
    },
    /// Run a replay file's plan again and tell how it failed
    Replay {
        file: PathBuf,
        /// Run it twice in fresh runtimes and name the first event that differs
        #[arg(long)]
        check_determinism: bool,
    },
    /// Every strategy with both gateway modes over the same seeds, and the TTL sweep:
    /// writes reports/guarantees.md
    Matrix {
        /// Seeds per strategy and gateway mode
        #[arg(long, default_value_t = fencesim::matrix::REPORT_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
        seeds: u64,
        /// Seeds per TTL in the sweep
        #[arg(long, default_value_t = fencesim::matrix::SWEEP_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
        sweep_seeds: u64,
        #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
        jobs: usize,
        /// The project root to write under
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Plant each bug of the mutant catalogue and measure how fast the suite catches it:
    /// writes reports/detection.md
    Mutants {
        /// Independent searches per mutant
        #[arg(long, default_value_t = 5, value_parser = parse_count, allow_hyphen_values = true)]
        starts: u64,
        /// Seeds per search at most
        #[arg(long, default_value_t = 2_000, value_parser = parse_count, allow_hyphen_values = true)]
        budget: u64,
        #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
        jobs: usize,
        #[arg(long)]
        json: bool,
        /// Leave out the exhaustive small-scope section
        #[arg(long)]
        no_exhaustive: bool,
        /// The project root to write under
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Regenerate the reports in reports/
    Report {
        /// The project root to write under
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Time the simulated worked example against its SQL floor (use a release build)
    Bench {
        #[arg(long, default_value_t = 21, value_parser = parse_runs)]
        runs: usize,
        /// Seeds of the random scenario for the exploration figures
        #[arg(long, default_value_t = 1000, value_parser = parse_count, allow_hyphen_values = true)]
        explore_seeds: u64,
        /// Also run this many seeds to see whether memory stays flat (0: skip)
        #[arg(long, default_value_t = 0)]
        memory_seeds: u64,
        #[arg(long)]
        json: bool,
        /// Also write the figures to reports/bench.md under this project root
        #[arg(long, value_name = "ROOT", num_args = 0..=1, default_missing_value = ".")]
        record: Option<PathBuf>,
    },
}

fn parse_scenario(s: &str) -> Result<String, String> {
    scenario::known(s).map(str::to_owned)
}

fn parse_strategy(s: &str) -> Result<Mechanism, String> {
    s.parse()
}

fn parse_gateway(s: &str) -> Result<GatewayMode, String> {
    s.parse()
}

fn parse_count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("expected a positive whole number of seeds, got '{s}'")),
    }
}

fn parse_runs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("expected a positive number of runs, got '{s}'")),
    }
}

fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of threads from 1 to 256, got '{s}'")),
    }
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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

fn print_explore(cfg: &explore::ExploreConfig, r: &explore::ExploreReport) {
    println!(
        "explored {} seed(s) of {} under {} ({} gateway) from seed {}: {:.0} seeds/s{}",
        r.seeds_run,
        cfg.scenario,
        cfg.mechanism,
        cfg.gateway,
        cfg.from,
        r.seeds_per_second,
        if r.interrupted { ", interrupted" } else { "" }
    );
    if r.violations.is_empty() {
        println!("no violation");
    }
    for (name, n) in &r.violations {
        println!("  {name}: broken in {n} seed(s)");
    }
    print!("{}", r.coverage.render());
    if let Some(seed) = r.first_failing_seed {
        println!("first failing seed: {seed}");
    }
    for path in &r.replay_files {
        println!("replay with: {}", ReplayFile::command(path));
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
        Command::Run { scenario, strategy, gateway, seed, ttl_ms, json, trace, save_replay } => {
            let mut sc = match scenario::build(&scenario, seed, strategy, gateway, FaultMask::ALL) {
                Ok(sc) => sc,
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
            if let Some(dir) = save_replay {
                match ReplayFile::from_outcome(&outcome).write_into(&dir) {
                    Ok(path) => eprintln!("saved {}", path.display()),
                    Err(e) => return bad_input(e),
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
                print!("{}", outcome.breach_lines("VIOLATION ", false));
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
        Command::Strategies => {
            for m in Mechanism::ALL {
                println!("{:<20} {}", m.name(), m.policy().promise);
            }
            ExitCode::SUCCESS
        }
        Command::Explore {
            strategy,
            scenario,
            gateway,
            seeds,
            from,
            jobs,
            keep_going,
            without,
            out,
            json,
        } => {
            let allowed = match FaultMask::ALL.without_names(&without) {
                Ok(mask) => mask,
                Err(e) => return bad_input(e),
            };
            let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = interrupted.clone();
            let _ = ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::Relaxed));
            let cfg = explore::ExploreConfig {
                scenario,
                mechanism: strategy,
                gateway,
                from,
                seeds,
                jobs,
                keep_going,
                out,
                allowed,
                progress: !json,
            };
            let report = match explore::explore(&cfg, &interrupted) {
                Ok(r) => r,
                Err(e) => return bad_input(e),
            };
            if json {
                println!("{}", serde_json::to_string(&report).expect("a report serializes"));
            } else {
                print_explore(&cfg, &report);
            }
            if report.first_failing_seed.is_some() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Replay { file, check_determinism } => {
            let replay = match ReplayFile::load(&file) {
                Ok(r) => r,
                Err(e) => return bad_input(e),
            };
            let sc = match replay.scenario() {
                Ok(sc) => sc,
                Err(e) => return bad_input(format!("{}: {e}", file.display())),
            };
            println!(
                "replaying {}: scenario {}, strategy {}, gateway {}, seed {}, {} fault(s)",
                file.display(),
                replay.scenario,
                replay.strategy,
                replay.gateway,
                replay.seed,
                replay.fault_plan.faults.len()
            );
            let outcome = match run(&sc, replay.seed) {
                Ok(o) => o,
                Err(e) => return bad_input(e),
            };
            let hash = format!("{:016x}", outcome.trace_hash);
            if hash == replay.expected_trace_hash {
                println!("trace hash {hash}: matches the file");
            } else {
                println!(
                    "trace hash {hash}: DIFFERS from the file's {} (this build behaves differently)",
                    replay.expected_trace_hash
                );
            }
            print!("{}", fencesim::replay::tell_failure(&outcome, 25));
            if check_determinism {
                let again = std::thread::spawn(move || run(&sc, replay.seed)).join();
                match again {
                    Ok(Ok(second)) => match fencesim::replay::first_difference(&outcome, &second) {
                        None => println!(
                            "determinism: two fresh runs gave the same {} events",
                            outcome.record.events.len()
                        ),
                        Some(diff) => {
                            println!("determinism: NOT deterministic; {diff}");
                            return ExitCode::from(1);
                        }
                    },
                    _ => return bad_input("the second run failed"),
                }
            }
            if outcome.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Matrix { seeds, sweep_seeds, jobs, root } => {
            match fencesim::matrix::write_guarantees(&root, seeds, sweep_seeds, jobs) {
                Ok(text) => {
                    print!("{text}");
                    println!("\nwrote {}", fencesim::matrix::GUARANTEES_REPORT);
                    ExitCode::SUCCESS
                }
                Err(e) => bad_input(e),
            }
        }
        Command::Mutants { starts, budget, jobs, json, no_exhaustive, root } => {
            let reports = match fencesim::mutants::evaluate_all(starts, budget, jobs) {
                Ok(r) => r,
                Err(e) => return bad_input(e),
            };
            let exhaustive = match no_exhaustive {
                true => Ok(String::new()),
                false => fencesim::exhaustive::section(jobs),
            };
            let exhaustive = match exhaustive {
                Ok(s) => s,
                Err(e) => return bad_input(e),
            };
            let text = fencesim::mutants::detection_report(&reports, starts, budget) + &exhaustive;
            let path = root.join(fencesim::mutants::DETECTION_REPORT);
            if let Err(e) = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, &text))
            {
                return bad_input(format!("cannot write {}: {e}", path.display()));
            }
            if json {
                println!("{}", serde_json::json!({ "mutants": reports }));
            } else {
                print!("{text}");
            }
            if reports.iter().all(|r| r.caught) {
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
        Command::Bench { runs, explore_seeds, memory_seeds, json, record } => {
            match fencesim::bench::bench(runs)
                .and_then(|r| Ok((r, fencesim::bench::bench_explore(explore_seeds, memory_seeds)?)))
            {
                Ok((r, e)) => {
                    if let Some(root) = record {
                        let path = root.join(fencesim::bench::BENCH_REPORT);
                        if let Err(err) = std::fs::write(&path, fencesim::bench::bench_report(&r, &e)) {
                            return bad_input(format!("cannot write {}: {err}", path.display()));
                        }
                    }
                    if json {
                        let mut v = serde_json::to_value(&r).expect("a bench result serializes");
                        v["explore"] = serde_json::to_value(&e).expect("a bench result serializes");
                        println!("{v}");
                    } else {
                        println!(
                        "explore: {:.0} seeds/s per core over {} seeds; against the SQL floor of the same seeds {:.2} \
                         (target <= 1.5); --jobs 2 speed-up {:.2} (target >= 1.8); peak RSS {:.1} MiB after 1,000 seeds{}",
                        e.seeds_per_second_per_core,
                        e.seeds,
                        e.floor_ratio,
                        e.jobs2_speedup,
                        e.peak_rss_mb_after_1000,
                        if e.memory_seeds > 0 {
                            format!(", {:.1} MiB after {} seeds", e.peak_rss_mb_after_memory_seeds, e.memory_seeds)
                        } else {
                            String::new()
                        }
                    );
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
            }
        }
    }
}
