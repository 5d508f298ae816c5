//! The mutant catalogue: every planted bug is caught, and the committed detection report
//! is what the project's command gives today.

use fencesim::mutant::Mutant;
use fencesim::mutants::{catches, gateway_for, DETECTION_REPORT};
use fencesim::random::FaultMask;
use fencesim::scenario;
use std::process::Command;

/// (mutant, invariant, first seed, trace hash) rows of the committed report.
fn committed() -> Vec<(Mutant, String, u64, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DETECTION_REPORT);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            let mutant = c.get(1)?.parse().ok()?;
            Some((mutant, c[4].to_owned(), c[8].parse().ok()?, c[9].to_owned()))
        })
        .collect()
}

#[test]
fn every_mutant_is_caught_by_the_seed_the_detection_report_names() {
    let rows = committed();
    let stale = format!("{DETECTION_REPORT} is stale: regenerate it with `cargo run --release -- mutants`");
    assert_eq!(rows.len(), Mutant::ALL.len(), "{stale}");
    for (mutant, invariant, seed, hash) in rows {
        let sc =
            scenario::build("random", seed, mutant.baseline(), gateway_for(mutant), FaultMask::ALL).unwrap();
        let caught = catches(&sc, seed, mutant).unwrap();
        let (by, trace) = caught.unwrap_or_else(|| panic!("{mutant} is not caught by seed {seed}: {stale}"));
        assert_eq!(by, invariant, "{mutant}: {stale}");
        assert_eq!(format!("{trace:016x}"), hash, "{mutant}: {stale}");
    }
}

#[test]
fn the_mutants_command_reports_json_and_names_bad_input() {
    let root = std::env::temp_dir().join(format!("fencesim-mutants-{}", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args([
            "mutants",
            "--starts",
            "1",
            "--budget",
            "30",
            "--jobs",
            "2",
            "--json",
            "--root",
            root.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = v["mutants"].as_array().unwrap();
    assert_eq!(list.len(), Mutant::ALL.len());
    for m in list {
        for key in ["name", "caught", "invariant", "seeds_to_detect_median", "shrunk_faults"] {
            assert!(m.get(key).is_some(), "{key} missing in {m}");
        }
    }
    // with only 30 seeds the nearly equivalent mutant escapes, and the command says so
    let escaped: Vec<&str> =
        list.iter().filter(|m| m["caught"] == false).map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(o.status.code(), Some(if escaped.is_empty() { 0 } else { 1 }), "{escaped:?}");
    assert!(root.join(DETECTION_REPORT).exists());
    std::fs::remove_dir_all(&root).unwrap();

    let bad =
        Command::new(env!("CARGO_BIN_EXE_fencesim")).args(["mutants", "--budget", "none"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("got 'none'"));
}

#[test]
fn exhaustively_the_database_sequence_survives_every_placement_and_the_ttl_alone_does_not() {
    use fencesim::exhaustive::{failing, plans, single_faults};
    use fencesim::model::Mechanism;
    let all = plans();
    assert_eq!(all.len(), 1 + 128 + 128 * 127 / 2, "the small scope's plans");
    assert_eq!(single_faults().len(), 128);
    let (count, first) = failing(Mechanism::FencedDbSequence, &all, 2).unwrap();
    assert_eq!(count, 0, "first failing plan: {first:?}");
    // the committed report says the same
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DETECTION_REPORT);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let stale = format!("{DETECTION_REPORT} is stale: regenerate it with `cargo run --release -- mutants`");
    assert!(text.contains(&format!("Every plan of at most two faults: {} plans.", all.len())), "{stale}");
    assert!(text.contains(&format!("| fenced-db-sequence | 0 of {} | - |", all.len())), "{stale}");
    let singles: Vec<_> = single_faults().into_iter().map(|f| vec![f]).collect();
    for unsafe_one in [Mechanism::TtlOnly, Mechanism::Redlock, Mechanism::PlainDelRelease] {
        let (count, _) = failing(unsafe_one, &singles, 2).unwrap();
        assert!(count > 0, "{unsafe_one} failed none of the single faults");
    }
}
