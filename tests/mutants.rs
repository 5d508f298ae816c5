//! The mutant catalogue: every planted bug is caught, and the committed detection report
//! is what the project's command gives today.

use fencesim::files::replay_file::ReplayFile;
use fencesim::mutant::Mutant;
use fencesim::runner::{run, run_with};
use fencesim::search::mutants::{catches, scenario_for, MUTANT_FILES};
use fencesim::tell::reports::detection::{
    detection_chart, parse_detections, Detection, DETECTION_CHART, DETECTION_REPORT,
};
use std::process::Command;

/// The mutant rows of the committed report.
fn committed() -> Vec<Detection> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DETECTION_REPORT);
    parse_detections(&std::fs::read_to_string(path).unwrap_or_default())
}

#[test]
fn every_mutant_is_caught_by_the_seed_the_detection_report_names() {
    let rows = committed();
    let stale = format!("{DETECTION_REPORT} is stale: regenerate it with `cargo run --release -- mutants --search uniform,guided`");
    assert_eq!(rows.len(), Mutant::SWARM.len(), "{stale}");
    for Detection { mutant, invariant, first_seed: seed, trace_hash, .. } in rows {
        let caught = catches(&scenario_for(mutant, seed).unwrap(), seed, mutant).unwrap();
        let (by, trace) = caught.unwrap_or_else(|| panic!("{mutant} is not caught by seed {seed}: {stale}"));
        assert_eq!(by, invariant, "{mutant}: {stale}");
        assert_eq!(format!("{trace:016x}"), trace_hash, "{mutant}: {stale}");
    }
}

/// Each mutant's shrunk catching run replays to its hash with the mutant planted, breaks
/// the invariant that caught it, keeps it without the mutant, and is as small as the
/// report says.
#[test]
fn each_shrunk_catching_run_replays_and_catches_its_mutant() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let stale = format!("{MUTANT_FILES} is stale: regenerate it with `cargo run --release -- mutants --search uniform,guided`");
    let rows = committed();
    assert_eq!(rows.len(), Mutant::SWARM.len(), "{stale}");
    for Detection { mutant, invariant, shrunk, .. } in rows {
        let file = ReplayFile::load(&root.join(format!("{MUTANT_FILES}/{mutant}.json"))).expect(&stale);
        assert_eq!(file.mutant, Some(mutant), "{stale}");
        let scenario = file.scenario().unwrap();
        let planted = run_with(&scenario, file.seed, file.mutant).unwrap();
        assert_eq!(format!("{:016x}", planted.trace_hash), file.expected_trace_hash, "{mutant}: {stale}");
        assert!(planted.check(&invariant).is_violation(), "{mutant} breaks {invariant}: {stale}");
        let right = run(&scenario, file.seed).unwrap();
        assert!(!right.check(&invariant).is_violation(), "{mutant}: the right code keeps {invariant}");
        let world = &scenario.world;
        let sizes = format!("{}, {}, {}", world.faults.faults.len(), world.workers, world.rows.len());
        assert_eq!(sizes, shrunk, "{mutant}: {stale}");
    }
}

#[test]
fn the_mutants_command_reports_json_and_names_bad_input() {
    let root = std::env::temp_dir().join(format!("fencesim-mutants-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args([
            "mutants",
            "--starts",
            "1",
            "--budget",
            "30",
            "--false-alarm-seeds",
            "40",
            "--jobs",
            "2",
            "--no-exhaustive",
            "--json",
            "--root",
            root.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let list = value["mutants"].as_array().unwrap();
    assert_eq!(list.len(), Mutant::SWARM.len());
    for mutant in list {
        for key in ["name", "caught", "invariant", "seeds_to_detect_median", "shrunk_faults"] {
            assert!(mutant.get(key).is_some(), "{key} missing in {mutant}");
        }
    }
    // with only 30 seeds the nearly equivalent mutant escapes, and the command says so
    let escaped: Vec<&str> = list
        .iter()
        .filter(|mutant| mutant["caught"] == false)
        .map(|mutant| mutant["name"].as_str().unwrap())
        .collect();
    assert_eq!(output.status.code(), Some(if escaped.is_empty() { 0 } else { 1 }), "{escaped:?}");
    let report = std::fs::read_to_string(root.join(DETECTION_REPORT)).unwrap();
    let chart = std::fs::read_to_string(root.join(DETECTION_CHART)).unwrap();
    assert_eq!(chart, detection_chart(&report), "the chart, drawn from the report written beside it");
    // a mutant that escaped is drawn as such
    assert_eq!(chart.matches(">not caught</text>").count(), escaped.len(), "{escaped:?}");
    std::fs::remove_dir_all(&root).unwrap();

    let bad =
        Command::new(env!("CARGO_BIN_EXE_fencesim")).args(["mutants", "--budget", "none"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("got 'none'"));
}

#[test]
fn exhaustively_the_database_sequence_survives_every_placement_and_the_ttl_alone_does_not() {
    use fencesim::model::Mechanism;
    use fencesim::search::exhaustive::{failing, plans, single_faults};
    let all = plans();
    assert_eq!(all.len(), 1 + 160 + 160 * 159 / 2, "the small scope's plans");
    assert_eq!(single_faults().len(), 160);
    let (count, first) = failing(Mechanism::FencedDbSequence, &all, 2).unwrap();
    assert_eq!(count, 0, "first failing plan: {first:?}");
    // the committed report says the same
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DETECTION_REPORT);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let stale = format!("{DETECTION_REPORT} is stale: regenerate it with `cargo run --release -- mutants --search uniform,guided`");
    assert!(text.contains(&format!("Every plan of at most two faults: {} plans.", all.len())), "{stale}");
    assert!(text.contains(&format!("| fenced-db-sequence | 0 of {} | - |", all.len())), "{stale}");
    let singles: Vec<_> = single_faults().into_iter().map(|f| vec![f]).collect();
    for unsafe_one in [Mechanism::TtlOnly, Mechanism::PlainDelRelease] {
        let (count, _) = failing(unsafe_one, &singles, 2).unwrap();
        assert!(count > 0, "{unsafe_one} failed none of the single faults");
    }
}

#[test]
fn the_detection_report_records_a_clean_false_alarm_run_for_every_mechanism_that_promises_safety() {
    use fencesim::model::{Mechanism, Safety};
    use fencesim::search::false_alarms::false_alarm_runs;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DETECTION_REPORT);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let stale = format!("{DETECTION_REPORT} is stale: regenerate it with `cargo run --release -- mutants --search uniform,guided`");
    let section =
        text.split("## False alarms").nth(1).unwrap_or_else(|| panic!("no false-alarm section: {stale}"));
    let promising: Vec<Mechanism> =
        Mechanism::ALL.into_iter().filter(|m| m.spec().safety != Safety::Unsafe).collect();
    for mechanism in &promising {
        for search in ["uniform", "guided"] {
            let row = section
                .lines()
                .find(|line| line.starts_with(&format!("| {mechanism} | {search} |")))
                .unwrap_or_else(|| {
                    panic!("{mechanism} has no false-alarm row by the {search} search: {stale}")
                });
            assert!(row.contains("| 100000 | none |"), "{row}: {stale}");
        }
    }
    // the same runs, short, still break nothing, by both searches
    let runs = false_alarm_runs(150, 2, true).unwrap();
    assert_eq!(runs.len(), 2 * promising.len());
    for run in runs {
        assert!(run.violations.is_empty(), "{}: {:?}", run.command(), run.violations);
    }
}

/// `explore --mutant` plants the bug in every seed: the same seeds that are clean without
/// it fail with it, and each replay file names the mutant, so that replaying it plants the
/// bug again.
#[test]
fn explore_with_a_mutant_planted_keeps_replay_files_that_plant_it() {
    let out = std::env::temp_dir().join(format!("fencesim-explore-mutant-{}", std::process::id()));
    let explore = |extra: &[&str]| {
        let mut args = vec!["explore", "--mechanism", "fenced-db-sequence", "--seeds", "20", "--keep-going"];
        args.extend(["--no-shrink", "--json", "--out", out.to_str().unwrap()]);
        args.extend(extra);
        Command::new(env!("CARGO_BIN_EXE_fencesim")).args(&args).output().unwrap()
    };
    let clean = explore(&[]);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stderr));
    let planted = explore(&["--mutant", "release-with-del"]);
    assert_eq!(planted.status.code(), Some(1), "{}", String::from_utf8_lossy(&planted.stderr));
    let value: serde_json::Value = serde_json::from_slice(&planted.stdout).unwrap();
    assert!(value["violations"]["lease-integrity"].as_u64().unwrap() > 0, "{value}");
    let first = value["replay_files"][0].as_str().unwrap();
    let file = ReplayFile::load(std::path::Path::new(first)).unwrap();
    assert_eq!(file.mutant, Some(Mutant::ReleaseWithDel));
    let replayed = Command::new(env!("CARGO_BIN_EXE_fencesim")).args(["replay", first]).output().unwrap();
    assert_eq!(replayed.status.code(), Some(1), "{}", String::from_utf8_lossy(&replayed.stdout));
    let unknown = explore(&["--mutant", "no-such-bug"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no-such-bug"));
    let _ = std::fs::remove_dir_all(&out);
}
