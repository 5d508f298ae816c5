//! `fencesim mutants`: every planted bug searched for, shrunk and timed, then the
//! exhaustive small scope; writes `reports/detection.md` and its chart, `reports/detection.svg`.

use crate::cli::args::{default_jobs, parse_count, parse_jobs};
use crate::cli::{bad_input, verdict};
use crate::files::write::write_report;
use crate::mutant::Mutant;
use crate::scenario::production::Rates;
use crate::search::exhaustive::small_scope;
use crate::search::explore::SearchKind;
use crate::search::false_alarms::false_alarm_runs;
use crate::search::mutant_shards::{mutants_shard, MutantsMerged, MutantsRun};
use crate::search::mutants::{evaluate_all, MutantReport, Searches, MUTANT_FILES};
use crate::search::seeds::Shard;
use crate::tell::junit::mutants::{false_alarm_suite, mutants_suite};
use crate::tell::junit::write_junit;
use crate::tell::reports::deep::{deep_report, DeepRun, CATCH_BUDGET, CATCH_STARTS, DEEP_FILES, DEEP_REPORT};
use crate::tell::reports::detection::{
    detection_chart, detection_report, exhaustive_section, false_alarm_section, mutant_table,
    search_comparison, DETECTION_CHART, DETECTION_REPORT,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct MutantsArgs {
    /// Independent searches per mutant: 31, so that a median near the target is measured
    /// more precisely (a sample median's spread shrinks with the square root of the count)
    #[arg(long, default_value_t = 31, value_parser = parse_count, allow_hyphen_values = true)]
    starts: u64,
    /// Seeds per search at most
    #[arg(long, default_value_t = 2_000, value_parser = parse_count, allow_hyphen_values = true)]
    budget: u64,
    /// Threads to run seeds on (the results do not depend on it)
    #[arg(long, default_value_t = default_jobs(), value_parser = parse_jobs, allow_hyphen_values = true)]
    jobs: usize,
    /// Print the measurements as one JSON object instead of the report
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
    /// With --only: also keep each chosen mutant's shrunk catching run as
    /// reports/mutants/NAME.json under --root (the other mutants' files stay)
    #[arg(long, requires = "only")]
    keep_shrunk: bool,
    /// Run shard K of N (from 1) of the catalogue, the small scope's plans and the
    /// false-alarm seeds: print what it found as JSON and write nothing; `fencesim merge`
    /// puts the N shards together
    #[arg(long, conflicts_with = "only")]
    shard: Option<Shard>,
    /// Also write the results as JUnit XML to this file: one test case per mutant, failed
    /// when no search caught it (a caught one tells its catch, plan and replay command),
    /// and one per safe mechanism's false-alarm run
    #[arg(long, value_name = "FILE", conflicts_with = "shard")]
    junit: Option<PathBuf>,
    /// The searches to measure, comma-separated. The uniform search is always measured;
    /// `uniform,guided` measures the guided search from the same starts with the same
    /// budget as well, and tells both, mutant by mutant, with their ratio (in the report
    /// and its chart too, without --only)
    #[arg(long, value_enum, value_delimiter = ',')]
    search: Vec<SearchKind>,
    /// The fault rates the chosen mutants are searched under: the swarm's, `production`
    /// (faults as rare as their kind is in production, docs/rates.md) or `production-swarm`
    /// (the swarm's plans in production's worlds); the report is the swarm's, so another
    /// rate needs --only
    #[arg(long, default_value = "swarm", requires = "only")]
    rates: Rates,
    /// Measure the deep catalogue instead (docs/deep-bugs.md): each bug caught in
    /// production's worlds under the swarm's plans and shrunk, then searched for under
    /// production rates by the uniform and the guided search from the same starts; writes
    /// reports/deep.md and reports/deep/NAME.json
    #[arg(long, conflicts_with_all = ["only", "shard", "junit"])]
    deep: bool,
}

/// `--deep`: the deep catalogue's two measurements and its report.
fn run_deep(args: &MutantsArgs) -> ExitCode {
    let run = DeepRun {
        starts: args.starts,
        budget: args.budget,
        catch_starts: CATCH_STARTS,
        catch_budget: CATCH_BUDGET,
    };
    let catching =
        Searches { starts: CATCH_STARTS, budget: CATCH_BUDGET, guided: false, rates: Rates::ProductionSwarm };
    let production =
        Searches { starts: args.starts, budget: args.budget, guided: true, rates: Rates::Production };
    let measured = evaluate_all(&Mutant::DEEP, catching, args.jobs).and_then(|caught| {
        let searched = evaluate_all(&Mutant::DEEP, production, args.jobs)?;
        let text = deep_report(&caught, &searched, run);
        keep_shrunk(&args.root.join(DEEP_FILES), &caught)?;
        write_report(&args.root, DEEP_REPORT, &text)?;
        Ok((text, caught.iter().all(|report| report.caught)))
    });
    match measured {
        Ok((text, caught)) => {
            print!("{text}");
            verdict(caught)
        }
        Err(error) => bad_input(error),
    }
}

/// `--only`: the chosen mutants' rows, nothing written.
fn run_only(args: &MutantsArgs) -> ExitCode {
    let guided = args.search.contains(&SearchKind::Guided);
    let searches = Searches { starts: args.starts, budget: args.budget, guided, rates: args.rates };
    let reports = match evaluate_all(&args.only, searches, args.jobs) {
        Ok(reports) => reports,
        Err(error) => return bad_input(error),
    };
    if args.keep_shrunk {
        let dir = args.root.join(MUTANT_FILES);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return bad_input(format!("cannot create {}: {e}", dir.display()));
        }
        for report in &reports {
            let kept = report
                .shrunk_file
                .as_ref()
                .map(|file| file.write_as(&dir.join(format!("{}.json", report.name))));
            if let Some(Err(error)) = kept {
                return bad_input(error);
            }
        }
    }
    if let Some(path) = &args.junit {
        let suite = mutants_suite(&reports, args.starts, args.budget, &args.root, args.keep_shrunk);
        if let Err(error) = write_junit(path, "fencesim mutants", &[suite]) {
            return bad_input(error);
        }
    }
    match args.json {
        true => println!("{}", serde_json::json!({ "mutants": reports })),
        false if guided => print!("{}\n{}", mutant_table(&reports), search_comparison(&reports)),
        false => print!("{}", mutant_table(&reports)),
    }
    verdict(reports.iter().all(|report| report.caught))
}

/// Each mutant's shrunk catching run as `DIR/NAME.json` (those of an earlier run go).
fn keep_shrunk(dir: &Path, reports: &[MutantReport]) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for report in reports {
        if let Some(file) = &report.shrunk_file {
            file.write_as(&dir.join(format!("{}.json", report.name)))?;
        }
    }
    Ok(())
}

/// Writes the detection report, its chart (drawn from the report's table) and each mutant's
/// shrunk run under `root`: the end of a mutant run, or of a merge of its shards. The
/// report's text.
pub fn write_detection(
    root: &Path,
    measured: &MutantsMerged,
    junit: Option<&Path>,
) -> Result<String, String> {
    let MutantsMerged { run, reports, scope, false_alarms } = measured;
    if let Some(path) = junit {
        let suites =
            [mutants_suite(reports, run.starts, run.budget, root, true), false_alarm_suite(false_alarms)];
        write_junit(path, "fencesim mutants", &suites)?;
    }
    let text = detection_report(reports, run.starts, run.budget)
        + &scope.as_ref().map(exhaustive_section).unwrap_or_default()
        + &false_alarm_section(false_alarms);
    keep_shrunk(&root.join(MUTANT_FILES), reports)?;
    write_report(root, DETECTION_REPORT, &text)?;
    write_report(root, DETECTION_CHART, &detection_chart(&text))?;
    Ok(text)
}

/// Prints what was measured (as JSON when asked) and says whether every mutant was caught
/// and no false alarm rang.
pub fn tell(measured: &MutantsMerged, text: &str, json: bool) -> ExitCode {
    let MutantsMerged { reports, false_alarms, .. } = measured;
    if json {
        println!("{}", serde_json::json!({ "mutants": reports, "false_alarms": false_alarms }));
    } else {
        print!("{text}");
    }
    let clean = false_alarms.iter().all(|run| run.violations.is_empty());
    verdict(clean && reports.iter().all(|report| report.caught))
}

/// Measures the whole catalogue, the small scope and the false alarms.
fn measure(args: &MutantsArgs) -> Result<MutantsMerged, String> {
    let run = MutantsRun {
        starts: args.starts,
        budget: args.budget,
        false_alarm_seeds: args.false_alarm_seeds,
        exhaustive: !args.no_exhaustive,
        guided: args.search.contains(&SearchKind::Guided),
    };
    let searches =
        Searches { starts: args.starts, budget: args.budget, guided: run.guided, rates: Rates::Swarm };
    let reports = evaluate_all(&Mutant::SWARM, searches, args.jobs)?;
    let scope = if run.exhaustive { Some(small_scope(args.jobs)?) } else { None };
    let false_alarms = false_alarm_runs(args.false_alarm_seeds, args.jobs, run.guided)?;
    Ok(MutantsMerged { run, reports, scope, false_alarms })
}

pub fn run(args: MutantsArgs) -> ExitCode {
    if !args.only.is_empty() {
        return run_only(&args);
    }
    if args.deep {
        return run_deep(&args);
    }
    if let Some(shard) = args.shard {
        let run = MutantsRun {
            starts: args.starts,
            budget: args.budget,
            false_alarm_seeds: args.false_alarm_seeds,
            exhaustive: !args.no_exhaustive,
            guided: args.search.contains(&SearchKind::Guided),
        };
        return match mutants_shard(run, shard, args.jobs) {
            Ok(found) => {
                println!("{found}");
                ExitCode::SUCCESS
            }
            Err(error) => bad_input(error),
        };
    }
    let written = measure(&args)
        .and_then(|measured| Ok((write_detection(&args.root, &measured, args.junit.as_deref())?, measured)));
    match written {
        Ok((text, measured)) => tell(&measured, &text, args.json),
        Err(error) => bad_input(error),
    }
}
