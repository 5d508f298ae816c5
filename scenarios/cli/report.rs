//! `fencesim report`: regenerates `reports/worked-example.md`.

use crate::cli::bad_input;
use crate::tell::reports::worked_example::write_reports;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The project root to write under
    #[arg(long, default_value = ".")]
    root: PathBuf,
}

pub fn run(args: ReportArgs) -> ExitCode {
    match write_reports(&args.root) {
        Ok(paths) => {
            for path in paths {
                println!("wrote {path}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(error),
    }
}
