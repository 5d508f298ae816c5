//! `fencesim matrix`: every mechanism with both gateway modes over the same seeds, the TTL
//! sweep, the debate over majority leases, the second store under each fault kind, the lookups from a
//! lagging copy and the failover; writes `reports/guarantees.md` and the
//! sweep's chart, `reports/sweep.svg`.

use crate::check::coverage::Coverage;
use crate::cli::args::{default_jobs, parse_count, parse_jobs};
use crate::cli::bad_input;
use crate::files::replay_file::ReplayFile;
use crate::files::write::write_report;
use crate::model::Mechanism;
use crate::search::debate::DEBATE_SEEDS;
use crate::search::failover::{failover_file, failover_rows, shrink_failover_failures};
use crate::search::lagging::{lag_file, shrink_lag_failures, LAG_SEEDS};
use crate::search::matrix::{
    matrix_of, run_matrix, shrink_first_failures, shrunk_file, Cell, MatrixFound, MatrixSizes, REPORT_SEEDS,
    SHRUNK_DIR, SWEEP_SEEDS,
};
use crate::search::matrix_shards::matrix_shard;
use crate::search::second_store::{shrink_store_failures, store_shrunk_file, STORE_SEEDS, STORE_SHRUNK_DIR};
use crate::search::seeds::{SeedRange, Shard};
use crate::search::verdicts::VERDICT_SEEDS;
use crate::tell::junit::matrix::matrix_suites;
use crate::tell::junit::write_junit;
use crate::tell::reports::failover::failover_section;
use crate::tell::reports::guarantees::{guarantees_report, sweep_chart, GUARANTEES_REPORT, SWEEP_CHART};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MatrixArgs {
    /// Seeds per mechanism and gateway mode
    #[arg(long, default_value_t = REPORT_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
    seeds: u64,
    /// Seeds per TTL in the sweep
    #[arg(long, default_value_t = SWEEP_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
    sweep_seeds: u64,
    /// Seeds per setting and mechanism in the debate over majority leases
    #[arg(long, default_value_t = DEBATE_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
    debate_seeds: u64,
    /// Seeds per fault kind and mechanism in the second store's measurement
    #[arg(long, default_value_t = STORE_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
    store_seeds: u64,
    /// Seeds per setting, mechanism and gateway of the lookups from a lagging copy
    #[arg(long, default_value_t = LAG_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
    lag_seeds: u64,
    /// Seeds per mechanism and gateway mode whose verdicts the report keeps, counted and
    /// digested (the table's seeds are the first of them)
    #[arg(long, default_value_t = VERDICT_SEEDS, value_parser = parse_count, allow_hyphen_values = true)]
    verdict_seeds: u64,
    /// Threads to run seeds on (the results do not depend on it)
    #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
    jobs: usize,
    /// The project root to write under
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Run shard K of N (from 1) of every cell's seeds and of the sweep's: print what it
    /// found as JSON and write nothing; `fencesim merge` puts the N shards together
    #[arg(long)]
    shard: Option<Shard>,
    /// Also write the cells as JUnit XML to this file: one test case per mechanism, gateway
    /// and invariant, a broken one failed (by design for an unsafe mechanism) with its
    /// violation, its plan and its replay command
    #[arg(long, value_name = "FILE", conflicts_with = "shard")]
    junit: Option<PathBuf>,
    /// Only this mechanism, described in a file (docs/mechanism-files.md): its cells over
    /// --seeds, each gateway's first failure shrunk and its replay file kept in --out;
    /// nothing under reports/ is written
    #[arg(long, value_name = "FILE", conflicts_with_all = ["shard", "junit"])]
    mechanism_file: Option<PathBuf>,
    /// With --mechanism-file: where the shrunk failures' replay files go
    #[arg(long, default_value = "fencesim-failures")]
    out: PathBuf,
}

/// Runs the matrix, the sweep and the debate, shrinks each mechanism's first failure, and
/// writes the report and the shrunk replay files under `root` (the files of an earlier run
/// go), and the JUnit report when asked.
pub fn write_guarantees(
    root: &Path,
    sizes: MatrixSizes,
    jobs: usize,
    junit: Option<&Path>,
) -> Result<String, String> {
    write_report_of(root, &run_matrix(sizes, jobs)?, jobs, junit)
}

/// Shrinks each cell's first failure and writes the report, the sweep's chart (drawn from
/// the report's table) and the shrunk replay files under `root` (the files of an earlier
/// run go), and the JUnit report when asked: the end of a matrix run, or of a merge of its
/// shards.
pub fn write_report_of(
    root: &Path,
    found: &MatrixFound,
    jobs: usize,
    junit: Option<&Path>,
) -> Result<String, String> {
    let shrunk = shrink_first_failures(&found.cells, jobs)?;
    if let Some(path) = junit {
        write_junit(path, "fencesim matrix", &matrix_suites(&found.cells, &shrunk, root)?)?;
    }
    let store_shrunk = shrink_store_failures(&found.second_store, jobs)?;
    let shrunk_lag = shrink_lag_failures(&found.lagging, jobs)?;
    let seeds = found.cells.first().map_or(REPORT_SEEDS, |cell| cell.seeds);
    let failover = failover_rows(seeds, jobs)?;
    let failover_shrunk = shrink_failover_failures(&failover)?;
    let text = guarantees_report(found, &shrunk, &store_shrunk, &shrunk_lag)
        + &failover_section(&failover, &failover_shrunk);
    for dir in [SHRUNK_DIR, STORE_SHRUNK_DIR].map(|dir| root.join(dir)) {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    for failure in &shrunk {
        let path = root.join(shrunk_file(failure.mechanism, failure.gateway));
        ReplayFile::from_outcome(&failure.outcome).write_as(&path)?;
    }
    for failure in &store_shrunk {
        let path = root.join(store_shrunk_file(&failure.kind, failure.mechanism));
        ReplayFile::from_outcome(&failure.outcome).write_as(&path)?;
    }
    for failure in &failover_shrunk {
        ReplayFile::from_outcome(&failure.outcome).write_as(&root.join(failover_file(failure.mechanism)))?;
    }
    for failure in &shrunk_lag {
        ReplayFile::from_outcome(&failure.outcome).write_as(&root.join(lag_file(&failure.row)))?;
    }
    write_report(root, GUARANTEES_REPORT, &text)?;
    write_report(root, SWEEP_CHART, &sweep_chart(&text))?;
    Ok(text)
}

/// One mechanism's cells over `seeds`, each gateway's first failure shrunk and written into
/// `out`: what the matrix says of a mechanism from a file.
fn one_mechanism(mechanism: Mechanism, seeds: u64, jobs: usize, out: &Path) -> Result<String, String> {
    let cells = matrix_of(&[mechanism], SeedRange::first(seeds)?, seeds, jobs, &mut Coverage::new())?;
    let shrunk = shrink_first_failures(&cells, jobs)?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut text = format!(
        "{mechanism} ({}), over seeds 1 to {seeds} of the random scenario with every fault kind:\n",
        mechanism.spec().promise
    );
    for cell in &cells {
        let _ = writeln!(text, "  {} gateway: {}", cell.gateway, broken_line(cell));
    }
    for failure in &shrunk {
        let path = out.join(format!("{}-{}.json", failure.mechanism, failure.gateway));
        ReplayFile::from_outcome(&failure.outcome).write_as(&path)?;
        let world = &failure.outcome.scenario.world;
        let _ = writeln!(
            text,
            "  {} gateway, {} first broken at seed {}, shrunk to {} fault(s), {} worker(s), {} row(s): fencesim replay {}",
            failure.gateway,
            failure.invariant,
            failure.seed,
            world.faults.faults.len(),
            world.workers,
            world.rows.len(),
            path.display()
        );
    }
    Ok(text)
}

/// A cell's broken invariants with their share of seeds and first seed, or that none broke.
fn broken_line(cell: &Cell) -> String {
    let broken: Vec<String> = cell
        .broken
        .iter()
        .map(|(name, (count, first, _))| format!("{name} in {count} seed(s), first {first}"))
        .collect();
    match broken.is_empty() {
        true => "every invariant held".to_owned(),
        false => broken.join("; "),
    }
}

pub fn run(args: MatrixArgs) -> ExitCode {
    let sizes = MatrixSizes {
        seeds: args.seeds,
        sweep_seeds: args.sweep_seeds,
        debate_seeds: args.debate_seeds,
        store_seeds: args.store_seeds,
        lag_seeds: args.lag_seeds,
        verdict_seeds: args.verdict_seeds,
    };
    if let Some(path) = &args.mechanism_file {
        let measured = crate::mechanism_file::load(path)
            .and_then(|mechanism| one_mechanism(mechanism, args.seeds, args.jobs, &args.out));
        return match measured {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => bad_input(error),
        };
    }
    if let Some(shard) = args.shard {
        return match matrix_shard(sizes, shard, args.jobs) {
            Ok(found) => {
                println!("{found}");
                ExitCode::SUCCESS
            }
            Err(error) => bad_input(error),
        };
    }
    match write_guarantees(&args.root, sizes, args.jobs, args.junit.as_deref()) {
        Ok(text) => {
            print!("{text}");
            println!("\nwrote {GUARANTEES_REPORT} and {SWEEP_CHART}");
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(error),
    }
}
