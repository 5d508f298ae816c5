//! Why it broke, for every committed failure: each violation of each file in
//! `reports/shrunk/` and `reports/mutants/` has a chain, its events are in the history in
//! order and end at the breach, and `fencesim replay` prints it under the violation. Each
//! mutant's file has a violation whose chain passes through the planted bug's act.

use fencesim::files::replay_file::ReplayFile;
use fencesim::mutant::acts;
use fencesim::runner::{run_with, Outcome};
use std::path::{Path, PathBuf};
use std::process::Command;

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");

fn files(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    found.sort();
    assert!(!found.is_empty(), "{folder} holds replay files");
    found
}

fn replayed(path: &Path) -> Outcome {
    let file = ReplayFile::load(path).unwrap();
    run_with(&file.scenario().unwrap(), file.seed, file.mutant).unwrap()
}

/// Every violation's chain is found, its steps are events of the history in order, and
/// the last is the breach's own event (or, at rest, comes no later than the end).
fn chains_end_at_their_breaches(path: &Path, outcome: &Outcome) {
    let name = path.file_name().unwrap().to_string_lossy();
    let violations: Vec<_> = outcome.checks.iter().filter(|check| check.is_violation()).collect();
    assert!(!violations.is_empty(), "{name} fails");
    for check in violations {
        let chain = outcome.chain(check).unwrap();
        let what = format!("{name}, {}: {}", check.invariant, chain.summary);
        assert!(chain.found && !chain.steps.is_empty(), "{what}");
        let events: Vec<usize> = chain.steps.iter().map(|step| step.event).collect();
        assert!(events.windows(2).all(|pair| pair[0] < pair[1]), "{what}: in order {events:?}");
        let history = &outcome.record.events;
        for step in &chain.steps {
            assert_eq!(history[step.event].at_ms, step.at_ms, "{what}: step {} is its event", step.event);
        }
        match check.breaches[0].event {
            Some(breaking) => assert_eq!(events.last(), Some(&breaking), "{what}: ends at the breach"),
            None => assert!(events.iter().all(|&event| event < history.len()), "{what}"),
        }
    }
}

#[test]
fn every_shrunk_failure_has_a_chain_that_ends_at_its_breach() {
    for path in files("reports/shrunk").into_iter().chain(files("reports/second-store")) {
        chains_end_at_their_breaches(&path, &replayed(&path));
    }
}

#[test]
fn every_mutants_failure_has_a_chain_through_the_bugs_own_act() {
    for path in files("reports/mutants") {
        let outcome = replayed(&path);
        chains_end_at_their_breaches(&path, &outcome);
        let mutant = outcome.mutant.expect("a mutant's file plants it");
        let facts = fencesim::check::Facts {
            record: &outcome.record,
            world: &outcome.scenario.world,
            base: outcome.scenario.base,
        };
        let acted = acts(mutant, &facts);
        assert!(!acted.is_empty(), "{mutant}: the bug acted in its own catching run");
        let failing = outcome.checks.iter().filter(|check| check.is_violation());
        let through: Vec<&str> =
            failing.filter(|check| outcome.through_the_bug(check)).map(|check| check.invariant).collect();
        assert!(!through.is_empty(), "{mutant}: some violation's chain passes through the bug's act");
    }
}

#[test]
fn replay_prints_the_chain_under_the_violation() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/mutants/release-by-get-then-del.json");
    let out = Command::new(FENCESIM).arg("replay").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let below = text.split_once("VIOLATION lease-integrity").expect("the violation").1;
    // the split release's DEL, sent before the lease ran out and held up past it, lands
    // while B holds a later lease: the chain names each step in its order
    let why = below.lines().nth(1).unwrap();
    assert!(why.starts_with("  why: the planted bug (release-by-get-then-del) acts at"), "{why}");
    // (the file is regenerated with the world: the steps are named, not their numbers)
    let steps = [
        "A's GET of lock:settle:m_100 reads A#1",
        "A's next Redis command is held up",
        "expires in Redis",
        "B is granted",
        "A's DEL of lock:settle:m_100 lands and removes B#",
    ];
    let list = below.split_once("   1. ").expect("the chain's numbered steps").1;
    let at: Vec<usize> =
        steps.iter().map(|step| list.find(step).unwrap_or_else(|| panic!("{step} in\n{below}"))).collect();
    assert!(at.windows(2).all(|pair| pair[0] < pair[1]), "in this order: {steps:?}\n{below}");
}

#[test]
fn a_file_that_breaks_nothing_still_tells_its_story() {
    let dir = std::env::temp_dir().join(format!("fencesim-chains-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let saved = Command::new(FENCESIM)
        .args(["run", "--mechanism", "fenced", "--scenario", "worked-example", "--save-replay"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(saved.status.code(), Some(0), "{}", String::from_utf8_lossy(&saved.stderr));
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let out = Command::new(FENCESIM).arg("replay").arg(&file).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("FenceViolation") && text.contains("no invariant was broken"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
