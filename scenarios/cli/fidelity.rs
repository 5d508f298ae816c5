//! `fencesim fidelity`: every committed failure played again live, on SQLite and on
//! PostgreSQL: writes `reports/fidelity.md`.

use crate::cli::bad_input;
use crate::live::fidelity::{files, judge, play, Sitting};
use crate::live::postgres::PostgresServer;
use crate::live::scale::measure_lag;
use crate::tell::reports::fidelity::{read_data, render, Entry, FIDELITY_DATA, FIDELITY_REPORT};
use crate::tell::write::write_whole;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct FidelityArgs {
    /// How many runs each playable file is to have on each database: the runs an earlier
    /// measurement of the same row made count, and only those missing are played
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// Forget the earlier measurements in reports/fidelity.json and play every run again
    #[arg(long)]
    fresh: bool,
    /// Forget the earlier measurements of these files only (relative to reports/, e.g.
    /// mutants/confirm-without-fence.json), after a change to the live run that their rows
    /// cannot show
    #[arg(long, value_delimiter = ',')]
    again: Vec<String>,
    /// The project root (its reports/ is read and written)
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Write the report again from reports/fidelity.json, playing nothing (after its
    /// notes changed)
    #[arg(long)]
    render: bool,
}

/// Writes the report and, unless it was read from there, the data it is written from.
fn write(root: &std::path::Path, entries: &[Entry], data: bool) -> ExitCode {
    let report = root.join(FIDELITY_REPORT);
    if let Err(e) = write_whole(&report, render(entries).as_bytes()) {
        return bad_input(format!("cannot write {}: {e}", report.display()));
    }
    println!("wrote {FIDELITY_REPORT}");
    if data {
        let json = serde_json::to_string_pretty(entries).expect("entries are JSON") + "\n";
        if let Err(e) = write_whole(&root.join(FIDELITY_DATA), json.as_bytes()) {
            return bad_input(format!("cannot write {FIDELITY_DATA}: {e}"));
        }
        println!("wrote {FIDELITY_DATA}");
    }
    ExitCode::SUCCESS
}

pub fn run(args: FidelityArgs) -> ExitCode {
    if args.render {
        return match read_data(&args.root) {
            Ok(entries) => write(&args.root, &entries, false),
            Err(error) => bad_input(error),
        };
    }
    let earlier = match args.fresh || !args.root.join(FIDELITY_DATA).exists() {
        true => Vec::new(),
        false => match read_data(&args.root) {
            Ok(entries) => entries,
            Err(error) => return bad_input(error),
        },
    };
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => return bad_input(format!("cannot find the fencesim program for the workers: {e}")),
    };
    let paths = match files(&args.root) {
        Ok(paths) => paths,
        Err(error) => return bad_input(error),
    };
    let reports = args.root.join("reports");
    let known: Vec<String> =
        paths.iter().map(|p| p.strip_prefix(&reports).unwrap_or(p).display().to_string()).collect();
    if let Some(unknown) = args.again.iter().find(|name| !known.contains(name)) {
        return bad_input(format!("--again {unknown}: no such file in reports/shrunk/ or reports/mutants/"));
    }
    let lag = measure_lag();
    let postgres = match PostgresServer::start("fidelity") {
        Ok(server) => server,
        Err(error) => return bad_input(error),
    };
    let sitting = Sitting { program: &program, runs: args.runs, lag, postgres: &postgres.url() };
    let mut entries = Vec::new();
    for path in &paths {
        let judged = match judge(&args.root, path, &program) {
            Ok(judged) => judged,
            Err(error) => return bad_input(error),
        };
        eprintln!("fidelity: {}", judged.file);
        let before = earlier.iter().find_map(|entry| match entry {
            Entry::Played(played)
                if played.judged.file == judged.file && !args.again.contains(&judged.file) =>
            {
                Some(played)
            }
            _ => None,
        });
        entries.push(match judged.refused {
            Some(_) => Entry::Refused(judged),
            None => match play(&args.root, judged, &sitting, before) {
                Ok(played) => Entry::Played(played),
                Err(error) => return bad_input(error),
            },
        });
    }
    write(&args.root, &entries, true)
}
