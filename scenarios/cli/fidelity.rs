//! `fencesim fidelity`: every committed failure played again live, on SQLite and on
//! PostgreSQL: writes `reports/fidelity.md`.

use crate::cli::{bad_input, INTERRUPTED};
use crate::files::write::write_whole;
use crate::live::fidelity::{files, judge, play, Sitting};
use crate::live::interrupt;
use crate::live::postgres::PostgresServer;
use crate::live::scale::{measure_lag_on, Probe};
use crate::tell::reports::fidelity::{read_data, render, Entry, FIDELITY_DATA, FIDELITY_REPORT};
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
    interrupt::watch();
    let postgres = match PostgresServer::start("fidelity") {
        Ok(server) => server,
        Err(error) => return bad_input(error),
    };
    let url = postgres.url();
    let lags = match lags(&url) {
        Ok(lags) => lags,
        Err(error) => return bad_input(error),
    };
    let sitting = Sitting { program: &program, runs: args.runs, lags, postgres: &url };
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
                Err(error) if interrupt::asked() => return stopped(&args.root, &entries, &earlier, error),
                Err(error) => return bad_input(error),
            },
        });
        if let Err(error) = save(&args.root, &entries, &earlier) {
            return bad_input(error);
        }
    }
    write(&args.root, &entries, true)
}

/// This machine's lag per request on each database, measured and said.
fn lags(postgres: &str) -> Result<[std::time::Duration; 2], String> {
    let measured = |probe| measure_lag_on(probe).map_err(|e| format!("measuring the lag per request: {e}"));
    let lags = [measured(Probe::Sqlite)?, measured(Probe::Postgres(postgres))?];
    let ms = |lag: std::time::Duration| lag.as_secs_f64() * 1000.0;
    eprintln!(
        "fidelity: lag per request {:.2} ms on SQLite, {:.2} ms on PostgreSQL",
        ms(lags[0]),
        ms(lags[1])
    );
    Ok(lags)
}

/// The measurements so far and the earlier rows of the files not reached yet: saved after
/// every file, so that a sitting cut short (a signal, a crash, a machine taken away) keeps
/// what it measured, and the next one (`fencesim fidelity` without `--fresh`) plays only
/// the runs still missing.
fn so_far(entries: &[Entry], earlier: &[Entry]) -> Vec<Entry> {
    let reached = |file: &str| entries.iter().any(|entry| entry.judged().file == file);
    let rest = earlier.iter().filter(|entry| !reached(&entry.judged().file)).cloned();
    entries.iter().cloned().chain(rest).collect()
}

fn save(root: &std::path::Path, entries: &[Entry], earlier: &[Entry]) -> Result<(), String> {
    let json = serde_json::to_string_pretty(&so_far(entries, earlier)).expect("entries are JSON") + "\n";
    write_whole(&root.join(FIDELITY_DATA), json.as_bytes())
        .map_err(|e| format!("cannot write {FIDELITY_DATA}: {e}"))
}

/// A sitting a signal stopped: what it measured is kept in the data (not in the report,
/// which is written only from a whole sitting), and it exits as a cut-short run does.
fn stopped(root: &std::path::Path, entries: &[Entry], earlier: &[Entry], error: String) -> ExitCode {
    eprintln!("fencesim: {error}");
    match save(root, entries, earlier) {
        Ok(()) => eprintln!(
            "fidelity: {} files measured are kept in {FIDELITY_DATA}; `fencesim fidelity` goes on from them",
            entries.len()
        ),
        Err(error) => eprintln!("fencesim: {error}"),
    }
    ExitCode::from(INTERRUPTED)
}
