//! `fencesim merge`: the `--json` outputs of an exploration's shards (`explore --shard
//! K/N --keep-going --json`) combined into what one run of the whole range would have
//! printed, as one JSON object; or a matrix's or a mutant run's shards (`matrix --shard
//! K/N`, `mutants --shard K/N`) into the report one run writes, written under `--root`
//! and printed. A shard missing, given
//! twice, interrupted or of another run is refused with exit 2.

use crate::cli::args::{default_jobs, parse_jobs};
use crate::cli::matrix::write_report_of;
use crate::cli::mutants::{tell, write_detection};
use crate::cli::{bad_input, verdict};
use crate::search::matrix_shards::merge_matrix;
use crate::search::merge::{merge, ShardReport};
use crate::search::mutant_shards::merge_mutants;
use crate::tell::junit::explore::explore_suite;
use crate::tell::junit::write_junit;
use crate::tell::reports::guarantees::{GUARANTEES_REPORT, SWEEP_CHART};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MergeArgs {
    /// The shards' --json outputs, one file each, in any order
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Matrix and mutant shards: the project root to write the report under
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Matrix shards: threads for shrinking the first failures
    #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
    jobs: usize,
    /// Also write the merged results as JUnit XML to this file, as the unsharded command's
    /// --junit would have (an exploration's failing runs are read from the replay files
    /// its shards wrote)
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

fn read(path: &PathBuf) -> Result<ShardReport, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let report = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not the --json output of a fencesim shard: {e}", path.display()))?;
    Ok(ShardReport { name: path.display().to_string(), report })
}

/// A matrix's shards: the report one run would have written, written and printed.
fn merge_matrix_shards(shards: &[ShardReport], args: &MergeArgs) -> ExitCode {
    let written = merge_matrix(shards)
        .and_then(|found| write_report_of(&args.root, &found, args.jobs, args.junit.as_deref()));
    match written {
        Ok(text) => {
            print!("{text}");
            println!("\nwrote {GUARANTEES_REPORT} and {SWEEP_CHART}");
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(error),
    }
}

pub fn run(args: MergeArgs) -> ExitCode {
    let shards: Result<Vec<ShardReport>, String> = args.files.iter().map(read).collect();
    let shards = match shards {
        Ok(shards) => shards,
        Err(error) => return bad_input(error),
    };
    let command = shards.first().map(|shard| shard.report["run"]["command"].clone());
    if command.as_ref().is_some_and(|command| command == "matrix") {
        return merge_matrix_shards(&shards, &args);
    }
    if command.as_ref().is_some_and(|command| command == "mutants") {
        return match merge_mutants(&shards)
            .and_then(|merged| Ok((write_detection(&args.root, &merged, args.junit.as_deref())?, merged)))
        {
            Ok((text, merged)) => tell(&merged, &text, false),
            Err(error) => bad_input(error),
        };
    }
    let merged = match merge(&shards) {
        Ok(merged) => merged,
        Err(error) => return bad_input(error),
    };
    println!("{merged}");
    let written = args.junit.map(|path| write_junit(&path, "fencesim explore", &[explore_suite(&merged)]));
    if let Some(Err(error)) = written {
        return bad_input(error);
    }
    verdict(merged["first_failing_seed"].is_null())
}
