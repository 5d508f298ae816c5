//! `fencesim merge`: the `--json` outputs of an exploration's shards (`explore --shard
//! K/N --keep-going --json`) combined into what one run of the whole range would have
//! printed, as one JSON object. A shard missing, given twice, interrupted or of another
//! run is refused with exit 2.

use crate::cli::{bad_input, verdict};
use fencesim::search::merge::{merge, ShardReport};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MergeArgs {
    /// The shards' --json outputs, one file each, in any order
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

fn read(path: &PathBuf) -> Result<ShardReport, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let report = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not the --json output of fencesim explore: {e}", path.display()))?;
    Ok(ShardReport { name: path.display().to_string(), report })
}

pub fn run(args: MergeArgs) -> ExitCode {
    let shards: Result<Vec<ShardReport>, String> = args.files.iter().map(read).collect();
    let merged = match shards.and_then(|shards| merge(&shards)) {
        Ok(merged) => merged,
        Err(error) => return bad_input(error),
    };
    println!("{merged}");
    verdict(merged["first_failing_seed"].is_null())
}
