//! A mutant run's JUnit report: one case per planted bug, passed when the suite caught it
//! (its output tells by which invariant, the shrunk plan and the replay command) and
//! failed when no search did; and one case per safe mechanism's false-alarm run, failed
//! when the correct code broke an invariant.

use super::{failure_body, under, Case, Failure, Suite};
use crate::search::false_alarms::FalseAlarmRun;
use crate::search::mutants::{MutantReport, MUTANT_FILES, START_STRIDE};
use std::path::Path;

/// What a caught mutant's case says: the catch, the plan, the command that replays it.
fn caught(report: &MutantReport, root: &Path, kept: bool) -> String {
    let invariant = report.invariant.unwrap_or("an invariant");
    let seed = report.first_seed.map_or_else(String::new, |seed| format!(" at seed {seed}"));
    let what =
        format!("caught by {invariant}{seed}; median {} seeds to catch it", report.seeds_to_detect_median);
    let Some(file) = &report.shrunk_file else { return what };
    let plan = serde_json::to_string_pretty(&file.fault_plan).expect("a plan serializes");
    let path = under(root, &format!("{MUTANT_FILES}/{}.json", report.name));
    let replay = match kept {
        true => format!("fencesim replay {}", path.display()),
        false => format!(
            "fencesim mutants --only {} --keep-shrunk, then fencesim replay {}",
            report.name,
            path.display()
        ),
    };
    failure_body(&what, &plan, &replay)
}

fn mutant_case(report: &MutantReport, starts: u64, budget: u64, root: &Path, kept: bool) -> Case {
    let classname = format!("mutants.{}.{}", report.baseline, report.gateway);
    let (failure, output) = match report.caught {
        true => (None, Some(caught(report, root, kept))),
        false => {
            let message = format!(
                "{} was not caught: no search of {budget} seeds broke an invariant through it",
                report.name
            );
            let again =
                format!("fencesim mutants --only {} --starts {starts} --budget {budget}", report.name);
            let body = format!("{message} ({starts} searches)\n\nmeasure it again with: {again}\n");
            (Some(Failure { message, body }), None)
        }
    };
    Case { name: report.name.to_owned(), classname, failure, output }
}

/// The suite of the mutants; `kept`: each caught mutant's shrunk run is written under
/// `root` (a whole run, a merge, or `--only` with `--keep-shrunk`).
pub fn mutants_suite(reports: &[MutantReport], starts: u64, budget: u64, root: &Path, kept: bool) -> Suite {
    let mut properties = vec![
        ("searches".to_owned(), starts.to_string()),
        ("budget".to_owned(), budget.to_string()),
        (
            "seed-ranges".to_owned(),
            format!(
                "search k (from 0) runs seeds {} * k + 1 ..= {} * k + {budget}",
                START_STRIDE, START_STRIDE
            ),
        ),
    ];
    for report in reports {
        if let (Some(seed), Some(hash)) = (report.first_seed, &report.trace_hash) {
            properties.push((format!("first-seed.{}", report.name), seed.to_string()));
            properties.push((format!("trace-hash.{}", report.name), hash.clone()));
        }
    }
    let cases = reports.iter().map(|report| mutant_case(report, starts, budget, root, kept)).collect();
    Suite { name: "mutants".to_owned(), properties, cases }
}

/// The suite of the false-alarm runs: the correct code of each safe mechanism.
pub fn false_alarm_suite(runs: &[FalseAlarmRun]) -> Suite {
    let seeds = runs.first().map_or(0, |run| run.seeds);
    let properties = vec![("seed-range".to_owned(), format!("1..={seeds}"))];
    let cases = runs
        .iter()
        .map(|run| {
            let failure = (!run.violations.is_empty()).then(|| {
                let broken: Vec<String> =
                    run.violations.iter().map(|(name, n)| format!("{name} in {n} seeds")).collect();
                let message = format!("false alarm: {} broke {}", run.mechanism, broken.join(", "));
                let body = format!("{message}\n\nfind the failing seeds with: {}\n", run.command());
                Failure { message, body }
            });
            Case {
                name: run.mechanism.to_owned(),
                classname: "false-alarms".to_owned(),
                failure,
                output: None,
            }
        })
        .collect();
    Suite { name: "false alarms".to_owned(), properties, cases }
}
