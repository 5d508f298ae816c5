//! `fencesim manpage`: the manual page, made from the same definitions the command line
//! parses with: fencesim(1) on standard output, or one page per subcommand in a directory.

use crate::cli::{bad_input, Cli};
use clap::CommandFactory;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ManpageArgs {
    /// Write fencesim.1 and one page per subcommand (fencesim-run.1, ...) into this
    /// directory instead of printing fencesim.1
    #[arg(long)]
    out: Option<PathBuf>,
}

/// fencesim(1) as roff.
pub fn page() -> Vec<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out).expect("rendering into memory cannot fail");
    out
}

pub fn run(args: ManpageArgs) -> ExitCode {
    let Some(dir) = args.out else {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(&page());
        return ExitCode::SUCCESS;
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return bad_input(format!("cannot create {}: {e}", dir.display()));
    }
    match clap_mangen::generate_to(Cli::command(), &dir) {
        Ok(()) => {
            println!("wrote the manual pages into {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => bad_input(format!("cannot write the manual pages into {}: {e}", dir.display())),
    }
}
