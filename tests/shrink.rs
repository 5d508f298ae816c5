//! `fencesim shrink FILE`: a failure found by exploration, made small, still fails the
//! same way and replays to its own hash.

use fencesim::files::replay_file::ReplayFile;
use fencesim::runner::run;
use std::path::PathBuf;
use std::process::Command;

fn fencesim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().unwrap()
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencesim-shrink-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_failure_found_by_explore_shrinks_to_at_most_three_faults_and_still_fails_the_same_way() {
    let dir = out_dir("renewal");
    let explored = fencesim(&[
        "explore",
        "--mechanism",
        "ttl-renewal",
        "--seeds",
        "2000",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(explored.status.code(), Some(1), "{}", String::from_utf8_lossy(&explored.stdout));
    let found = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let original = ReplayFile::load(&found).unwrap();
    let shrunk = fencesim(&["shrink", found.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&shrunk.stdout);
    assert_eq!(shrunk.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&shrunk.stderr));
    assert!(text.contains("shrunk, still breaking"), "{text}");
    let path = found.with_file_name(format!("{}.shrunk.json", found.file_stem().unwrap().to_string_lossy()));
    assert!(text.contains(&format!("replay with: fencesim replay {}", path.display())), "{text}");
    let small = ReplayFile::load(&path).unwrap();
    assert!(small.fault_plan.faults.len() <= 3, "{text}");
    assert!(small.fault_plan.faults.len() <= original.fault_plan.faults.len());
    let again = run(&small.scenario().unwrap(), small.seed).unwrap();
    assert_eq!(format!("{:016x}", again.trace_hash), small.expected_trace_hash, "it replays to its own hash");
    assert!(
        again.check(&original.violations[0]).is_violation(),
        "it still breaks {}",
        original.violations[0]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_breaks_nothing_or_is_not_a_replay_file_is_refused_with_exit_2() {
    let dir = out_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let saved = fencesim(&["run", "--mechanism", "fenced", "--save-replay", dir.to_str().unwrap()]);
    assert_eq!(saved.status.code(), Some(0));
    let passing = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let refused = fencesim(&["shrink", passing.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("records no broken invariant"));
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let refused = fencesim(&["shrink", garbage.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("malformed"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn explore_shrinks_the_first_failure_it_keeps_and_keeps_both_files() {
    let dir = out_dir("explore");
    let explored =
        fencesim(&["explore", "--mechanism", "ttl-only", "--seeds", "50", "--out", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&explored.stdout);
    assert_eq!(explored.status.code(), Some(1), "{text}");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    // the first failure and its shrunk form, and nothing else (whatever the timing)
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[1], files[0].replace(".json", ".shrunk.json"), "{files:?}");
    assert!(text.contains("shrunk, still breaking"), "{text}");
    assert!(
        text.trim_end().ends_with(".shrunk.json"),
        "the story ends with the smaller file's replay command: {text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A failure whose chain turns on two parties in one millisecond (B's claim of `r_001` and
/// A's stale confirm, both at 71 ms) breaks its invariants under the file's schedule and
/// under only some of the others, as a real machine orders the two either way. Out of the
/// shrinker it breaks the same invariants under every other schedule, and its settle
/// window is down to the floor its shape gives.
#[test]
fn shrinking_makes_a_failure_that_rests_on_one_millisecond_steady_under_other_schedules() {
    use fencesim::runner::run_with;
    use fencesim::search::widen::{race_margin, settle_floor, steady_under, OTHER_SCHEDULES};
    let dir = out_dir("race");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("race.json");
    std::fs::copy("tests/data/same-millisecond-race.json", &file).unwrap();
    let steady = |replay: &ReplayFile| {
        let mut run = |trial: &fencesim::scenario::Scenario, seed| run_with(trial, seed, replay.mutant);
        let kept: Vec<&str> = replay.violations.iter().map(String::as_str).collect();
        steady_under(&replay.scenario().unwrap(), replay.seed, &kept, &mut run).unwrap()
    };
    let before = ReplayFile::load(&file).unwrap();
    let narrow = run_with(&before.scenario().unwrap(), before.seed, before.mutant).unwrap();
    assert!(matches!(race_margin(&narrow), Some((0, _))), "{:?}", race_margin(&narrow));
    assert!(
        steady(&before) < OTHER_SCHEDULES / 2,
        "the committed story breaks under {} of the others",
        steady(&before)
    );
    let shrunk = fencesim(&["shrink", file.to_str().unwrap()]);
    assert_eq!(shrunk.status.code(), Some(1), "{}", String::from_utf8_lossy(&shrunk.stderr));
    let after = ReplayFile::load(&dir.join("race.shrunk.json")).unwrap();
    assert_eq!(after.violations, before.violations);
    assert_eq!(steady(&after), OTHER_SCHEDULES);
    let world = &after.scenario().unwrap().world;
    assert_eq!(world.settle_ms, settle_floor(world));
    assert!(world.settle_ms < before.scenario().unwrap().world.settle_ms);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failure whose refund arrives seconds after everything before it has come to rest
/// shrinks to one without the wait: the story is no clearer for it, and a live replay
/// would wait it out at its time scale.
#[test]
fn an_arrival_after_a_quiet_stretch_is_brought_forward_while_it_still_fails() {
    let dir = out_dir("arrival");
    std::fs::create_dir_all(&dir).unwrap();
    let committed = ReplayFile::load(std::path::Path::new("reports/shrunk/fenced-idempotent.json")).unwrap();
    let mut scenario = committed.scenario().unwrap();
    assert_eq!(scenario.world.arrivals.len(), 1, "the committed failure has one arrival");
    scenario.world.arrivals[0].at_ms = 4_380;
    let waiting = run(&scenario, committed.seed).unwrap();
    assert!(waiting.check("monotonic-fences").is_violation(), "it fails with the wait too");
    let file = dir.join("waiting.json");
    ReplayFile::from_outcome(&waiting).write_as(&file).unwrap();
    let shrunk = fencesim(&["shrink", file.to_str().unwrap()]);
    assert_eq!(shrunk.status.code(), Some(1), "{}", String::from_utf8_lossy(&shrunk.stderr));
    let after = ReplayFile::load(&dir.join("waiting.shrunk.json")).unwrap();
    let world = after.scenario().unwrap().world;
    let at = world.arrivals.iter().map(|arrival| arrival.at_ms).max().unwrap_or(0);
    assert!(at <= 100, "the arrival comes at {at} ms, not in the first 100");
    let again = run(&after.scenario().unwrap(), after.seed).unwrap();
    assert!(again.check("monotonic-fences").is_violation());
    let _ = std::fs::remove_dir_all(&dir);
}
