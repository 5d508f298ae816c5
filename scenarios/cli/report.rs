//! `fencesim report`: regenerates `reports/worked-example.md` and its page; with
//! `--commands`, the command reference `docs/commands.md` instead.

use crate::cli::bad_input;
use crate::cli::reference::{command_reference, COMMANDS_REFERENCE};
use crate::files::write::write_report;
use crate::tell::reports::worked_example::write_reports;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The project root to write under
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Write the command reference, docs/commands.md, from the command line's own
    /// definitions (and nothing else)
    #[arg(long)]
    commands: bool,
}

pub fn run(args: ReportArgs) -> ExitCode {
    let written = match args.commands {
        true => write_report(&args.root, COMMANDS_REFERENCE, &command_reference())
            .map(|()| vec![COMMANDS_REFERENCE.to_owned()]),
        false => write_reports(&args.root),
    };
    match written {
        Ok(paths) => {
            for path in paths {
                println!("wrote {path}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(error),
    }
}
