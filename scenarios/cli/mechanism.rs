//! `fencesim mechanism check FILE`: reads a mechanism file and says everything wrong with it
//! (exit 2), or what it describes (exit 0). `fencesim mechanism export`: writes the
//! built-in mechanisms as files, to start one's own from.

use crate::cli::bad_input;
use crate::mechanism_file::builtin::{file_name, text_of, DIRECTORY};
use crate::mechanism_file::{read, MechanismFile};
use crate::model::Mechanism;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MechanismArgs {
    #[command(subcommand)]
    pub action: MechanismAction,
}

#[derive(clap::Subcommand)]
pub enum MechanismAction {
    /// Check a mechanism file: its schema, its SQL (prepared by SQLite against the store's
    /// schema) and its Lua scripts (compiled as Redis compiles them)
    Check {
        /// The mechanism file (TOML; docs/mechanism-files.md gives the schema)
        file: PathBuf,
        /// Prepare every statement on PostgreSQL too, each parameter typed as the worker
        /// gives it: on the database at URL, or (with no URL) on a cluster of the check's own
        #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
        postgres: Option<String>,
    },
    /// Write each built-in mechanism as a file, to copy and change
    Export {
        /// The directory to write them into
        #[arg(long, default_value = DIRECTORY)]
        out: PathBuf,
    },
}

pub fn run(args: MechanismArgs) -> ExitCode {
    match args.action {
        MechanismAction::Check { file, postgres } => match read(&file) {
            Ok((mechanism, _)) => {
                if let Some(url) = postgres {
                    if let Err(said) = on_postgres(&mechanism, &url) {
                        return bad_input(format!("{}: {said}", file.display()));
                    }
                }
                println!("{}: a valid mechanism file: {}", file.display(), summary(&mechanism));
                // unsafe, but it runs: a search finds what it lets through
                for warning in crate::mechanism_file::warnings(&mechanism) {
                    println!("{}: warning: {}: {}", file.display(), warning.field, warning.message);
                }
                ExitCode::SUCCESS
            }
            Err(message) => bad_input(message),
        },
        MechanismAction::Export { out } => match export(&out) {
            Ok(written) => {
                println!("{written} mechanism files written to {}", out.display());
                ExitCode::SUCCESS
            }
            Err(message) => bad_input(message),
        },
    }
}

/// Prepares every statement the file's workers will run on the PostgreSQL at `url` (empty:
/// a cluster of the check's own, stopped after): the first one refused, in PostgreSQL's
/// words and named by its field.
fn on_postgres(file: &MechanismFile, url: &str) -> Result<(), String> {
    let own = match url.is_empty() {
        true => Some(crate::live::postgres::PostgresServer::start("mechanism-check")?),
        false => None,
    };
    let url = own.as_ref().map_or_else(|| url.to_owned(), |server| server.url());
    let spec = file.spec();
    let fenced = spec.tokens != fencesim_model::mechanism::TokenPolicy::None;
    crate::live::postgres::prepare_all(&url, &spec.statements, fenced)
}

/// What a valid file describes, in one line.
fn summary(file: &MechanismFile) -> String {
    let token = match file.token.source {
        crate::mechanism_file::schema::TokenSourceName::None => "no token".to_owned(),
        crate::mechanism_file::schema::TokenSourceName::RedisIncr => {
            format!("a token from INCR {}", file.token.key.as_deref().unwrap_or(""))
        }
        crate::mechanism_file::schema::TokenSourceName::DbSequence => {
            "a token from the database's sequence".into()
        }
    };
    format!("`{}`, {token}, the lease on {}", file.name, file.lease.key)
}

/// Writes every built-in mechanism's file into `out`; how many.
fn export(out: &Path) -> Result<usize, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for mechanism in Mechanism::ALL {
        let path = out.join(file_name(mechanism));
        std::fs::write(&path, text_of(mechanism)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(Mechanism::ALL.len())
}
