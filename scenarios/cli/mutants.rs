//! `fencesim mutants`: every planted bug searched for, shrunk and timed, then the
//! exhaustive small scope; writes `reports/detection.md`.

use crate::cli::args::{default_jobs, parse_count, parse_jobs};
use crate::cli::{bad_input, verdict};
use fencesim::mutant::Mutant;
use fencesim::search::exhaustive::small_scope;
use fencesim::search::false_alarms::false_alarm_runs;
use fencesim::search::mutants::{evaluate_all, MutantReport, MUTANT_FILES};
use fencesim::tell::reports::detection::{
    detection_report, exhaustive_section, false_alarm_section, mutant_table, DETECTION_REPORT,
};
use fencesim::tell::write::write_report;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MutantsArgs {
    /// Independent searches per mutant
    #[arg(long, default_value_t = 15, value_parser = parse_count, allow_hyphen_values = true)]
    starts: u64,
    /// Seeds per search at most
    #[arg(long, default_value_t = 2_000, value_parser = parse_count, allow_hyphen_values = true)]
    budget: u64,
    #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
    jobs: usize,
    #[arg(long)]
    json: bool,
    /// Leave out the exhaustive small-scope section
    #[arg(long)]
    no_exhaustive: bool,
    /// Seeds for each safe mechanism's false-alarm run
    #[arg(long, default_value_t = 100_000, value_parser = parse_count, allow_hyphen_values = true)]
    false_alarm_seeds: u64,
    /// The project root to write under
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Only these mutants (comma-separated names): prints their rows and writes no report
    #[arg(long, value_delimiter = ',')]
    only: Vec<Mutant>,
}

/// `--only`: the chosen mutants' rows, nothing written.
fn run_only(args: &MutantsArgs) -> ExitCode {
    let reports = match evaluate_all(&args.only, args.starts, args.budget, args.jobs) {
        Ok(reports) => reports,
        Err(error) => return bad_input(error),
    };
    match args.json {
        true => println!("{}", serde_json::json!({ "mutants": reports })),
        false => print!("{}", mutant_table(&reports)),
    }
    verdict(reports.iter().all(|report| report.caught))
}

/// Each mutant's shrunk catching run as `reports/mutants/NAME.json` (those of an earlier
/// run go).
fn keep_shrunk(root: &Path, reports: &[MutantReport]) -> Result<(), String> {
    let dir = root.join(MUTANT_FILES);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for report in reports {
        if let Some(file) = &report.shrunk_file {
            file.write_as(&dir.join(format!("{}.json", report.name)))?;
        }
    }
    Ok(())
}

pub fn run(args: MutantsArgs) -> ExitCode {
    if !args.only.is_empty() {
        return run_only(&args);
    }
    let reports = match evaluate_all(&Mutant::ALL, args.starts, args.budget, args.jobs) {
        Ok(reports) => reports,
        Err(error) => return bad_input(error),
    };
    let exhaustive = match args.no_exhaustive {
        true => Ok(String::new()),
        false => small_scope(args.jobs).map(|scope| exhaustive_section(&scope)),
    };
    let exhaustive = match exhaustive {
        Ok(section) => section,
        Err(error) => return bad_input(error),
    };
    let false_alarms = match false_alarm_runs(args.false_alarm_seeds, args.jobs) {
        Ok(runs) => runs,
        Err(error) => return bad_input(error),
    };
    let text = detection_report(&reports, args.starts, args.budget)
        + &exhaustive
        + &false_alarm_section(&false_alarms);
    if let Err(error) =
        keep_shrunk(&args.root, &reports).and_then(|()| write_report(&args.root, DETECTION_REPORT, &text))
    {
        return bad_input(error);
    }
    if args.json {
        println!("{}", serde_json::json!({ "mutants": reports, "false_alarms": false_alarms }));
    } else {
        print!("{text}");
    }
    let clean = false_alarms.iter().all(|run| run.violations.is_empty());
    verdict(clean && reports.iter().all(|report| report.caught))
}
