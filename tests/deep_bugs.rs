//! The deep catalogue: each bug's committed catch replays, is a catch through the bug, and
//! needs every one of its faults, at least two and each of a kind production makes rare;
//! the committed report is what the project's command gives today.

use fencesim::files::replay_file::ReplayFile;
use fencesim::mutant::Mutant;
use fencesim::runner::run_with;
use fencesim::scenario::production::RATES;
use fencesim::search::mutants::catches;
use fencesim::tell::reports::deep::{
    committed_summary, parse_deep_budget, parse_deep_medians, parse_deep_rows, parse_deep_searches, summary,
    DEEP_FILES, DEEP_MEDIAN, DEEP_REPORT,
};
use std::path::Path;

const STALE: &str = "is stale: regenerate it with `cargo run --release -- mutants --deep` (about 35 minutes)";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn committed() -> String {
    std::fs::read_to_string(root().join(DEEP_REPORT)).unwrap_or_default()
}

#[test]
fn the_deep_report_lists_every_deep_bug_with_its_catch() {
    let rows = parse_deep_rows(&committed());
    let names: Vec<&str> = rows.iter().map(|row| row.mutant.as_str()).collect();
    let expected: Vec<&str> = Mutant::DEEP.iter().map(|mutant| mutant.name()).collect();
    assert_eq!(names, expected, "{DEEP_REPORT} {STALE}");
    for row in &rows {
        assert!(
            row.faults >= 2,
            "{}: its catch shrank to {} fault(s): not a deep bug",
            row.mutant,
            row.faults
        );
    }
    assert!(Mutant::DEEP.len() >= 8, "the deep catalogue holds at least eight bugs");
    assert!(Mutant::DEEP.iter().all(|mutant| !Mutant::SWARM.contains(mutant)), "the catalogues are apart");
}

/// The shrunk catch of each deep bug: it replays to its hash with the bug planted, the bug
/// is caught on it (an invariant the correct code keeps, broken through the bug's act), and
/// with any one of its faults left out the bug is no longer caught.
#[test]
fn each_deep_catch_needs_every_one_of_its_rare_faults() {
    let rows = parse_deep_rows(&committed());
    for mutant in Mutant::DEEP {
        let path = root().join(format!("{DEEP_FILES}/{mutant}.json"));
        let file = ReplayFile::load(&path).unwrap_or_else(|e| panic!("{e}: {DEEP_FILES} {STALE}"));
        assert_eq!(file.mutant, Some(mutant), "{}", path.display());
        let scenario = file.scenario().unwrap();
        let planted = run_with(&scenario, file.seed, Some(mutant)).unwrap();
        assert_eq!(format!("{:016x}", planted.trace_hash), file.expected_trace_hash, "{mutant}: {STALE}");
        let (invariant, _) = catches(&scenario, file.seed, mutant).unwrap().expect("the catch catches");
        let row = rows.iter().find(|row| row.mutant == mutant.name()).expect("a row per deep bug");
        assert_eq!(row.invariant, invariant, "{mutant}: {DEEP_REPORT} {STALE}");
        let faults = &scenario.world.faults.faults;
        assert!(faults.len() >= 2, "{mutant}: {} fault(s)", faults.len());
        for (at, fault) in faults.iter().enumerate() {
            let rate = RATES[fault.kind.kind() as usize];
            assert!(rate.one_in >= 50, "{mutant}: {} is not rare in production", rate.kind.name());
            let mut without = scenario.clone();
            without.world.faults.faults.remove(at);
            let caught = catches(&without, file.seed, mutant).unwrap();
            assert_eq!(caught, None, "{mutant} is caught without its {}", fault.kind.kind().name());
        }
    }
}

/// The report's claim, held to its own table: under production rates no deep bug is found
/// by drawing runs afresh in fewer than `DEEP_MEDIAN` runs by the median of its searches.
#[test]
fn under_production_rates_each_uniform_median_is_at_least_two_hundred_runs() {
    let medians = parse_deep_medians(&committed());
    assert_eq!(medians.len(), Mutant::DEEP.len(), "{DEEP_REPORT} {STALE}");
    for (name, uniform, _) in medians {
        assert!(uniform >= DEEP_MEDIAN, "{name}: uniform median {uniform}");
    }
}

/// The report's summary lines are what its own table gives: no figure in them was written
/// by hand.
#[test]
fn the_deep_reports_summary_is_computed_from_its_table() {
    let report = committed();
    let budget = parse_deep_budget(&report).expect("the report names its budget");
    let searched = parse_deep_searches(&report);
    assert_eq!(searched.len(), Mutant::DEEP.len(), "{DEEP_REPORT} {STALE}");
    if std::env::var_os("FENCESIM_DEEP_SUMMARY").is_some() {
        print!("{}", summary(&searched, budget));
    }
    assert_eq!(committed_summary(&report), summary(&searched, budget), "{DEEP_REPORT} {STALE}");
}

/// The guided searches the report gives are the ones today's search makes: every search of
/// its table that caught its bug within `QUICK` runs, searched for again from the same
/// start, catches it at the same run (a change to how the guided search grows its plans
/// changes them).
#[test]
fn the_reports_quick_guided_catches_are_what_the_search_gives_today() {
    use fencesim::scenario::production::Rates;
    use fencesim::search::mutants::{search_guided, START_STRIDE};
    const QUICK: u64 = 30;
    let report = committed();
    let budget = parse_deep_budget(&report).expect("the report names its budget");
    let mut checked = 0;
    for row in parse_deep_searches(&report) {
        let mutant = *Mutant::DEEP.iter().find(|mutant| mutant.name() == row.mutant).expect("a deep bug");
        for (search_number, runs) in (0u64..).zip(row.guided).filter(|(_, runs)| *runs <= QUICK) {
            let today = search_guided(mutant, 1 + search_number * START_STRIDE, budget, Rates::Production);
            let search = search_number + 1;
            assert_eq!(today.unwrap(), Some(runs), "{mutant}, search {search}: {DEEP_REPORT} {STALE}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} guided searches of the report caught within {QUICK} runs");
}
