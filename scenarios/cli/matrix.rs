//! `fencesim matrix`: every mechanism with both gateway modes over the same seeds, and the
//! TTL sweep; writes `reports/guarantees.md`.

use crate::cli::args::{default_jobs, parse_count, parse_jobs};
use crate::cli::bad_input;
use fencesim::check::coverage::Coverage;
use fencesim::search::matrix::{
    matrix, shrink_first_failures, shrunk_file, sweep, Cell, SweepRow, REPORT_SEEDS, SHRUNK_DIR, SWEEP_SEEDS,
};
use fencesim::search::matrix_shards::matrix_shard;
use fencesim::search::seeds::{SeedRange, Shard};
use fencesim::tell::replay_file::ReplayFile;
use fencesim::tell::reports::guarantees::{guarantees_report, GUARANTEES_REPORT};
use fencesim::tell::write::write_report;
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
    #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
    jobs: usize,
    /// The project root to write under
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Run shard K of N (from 1) of every cell's seeds and of the sweep's: print what it
    /// found as JSON and write nothing; `fencesim merge` puts the N shards together
    #[arg(long)]
    shard: Option<Shard>,
}

/// Runs the matrix, shrinks each mechanism's first failure, runs the sweep, and writes
/// the report and the shrunk replay files under `root` (the files of an earlier run go).
pub fn write_guarantees(root: &Path, seeds: u64, sweep_seeds: u64, jobs: usize) -> Result<String, String> {
    let mut coverage = Coverage::new();
    let cells = matrix(SeedRange::first(seeds)?, jobs, &mut coverage)?;
    let rows = sweep(sweep_seeds)?;
    write_report_of(root, &cells, &rows, &coverage, jobs)
}

/// Shrinks each cell's first failure and writes the report and the shrunk replay files
/// under `root` (the files of an earlier run go): the end of a matrix run, or of a merge
/// of its shards.
pub fn write_report_of(
    root: &Path,
    cells: &[Cell],
    rows: &[SweepRow],
    coverage: &Coverage,
    jobs: usize,
) -> Result<String, String> {
    let shrunk = shrink_first_failures(cells, jobs)?;
    let text = guarantees_report(cells, &shrunk, rows, coverage);
    let dir = root.join(SHRUNK_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for failure in &shrunk {
        let path = root.join(shrunk_file(failure.mechanism, failure.gateway));
        ReplayFile::from_outcome(&failure.outcome).write_as(&path)?;
    }
    write_report(root, GUARANTEES_REPORT, &text)?;
    Ok(text)
}

pub fn run(args: MatrixArgs) -> ExitCode {
    if let Some(shard) = args.shard {
        return match matrix_shard(args.seeds, args.sweep_seeds, shard, args.jobs) {
            Ok(found) => {
                println!("{found}");
                ExitCode::SUCCESS
            }
            Err(error) => bad_input(error),
        };
    }
    match write_guarantees(&args.root, args.seeds, args.sweep_seeds, args.jobs) {
        Ok(text) => {
            print!("{text}");
            println!("\nwrote {GUARANTEES_REPORT}");
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(error),
    }
}
