//! How close a failing run came: its prefix replayed to a moment with fresh faults after
//! it. The prefix is the failing run's own, event for event, so that at the first breach
//! every continuation fails; before the fault that made the failure, fewer do.

use fencesim::model::Mechanism;
use fencesim::runner::{run, run_with, Outcome};
use fencesim::scenario::worked_example::worked_example;
use fencesim::scenario::{random_scenario, FaultMask};
use fencesim::search::closeness::{closeness, continuation, cut, turning_point, TRIES};
use fencesim::search::Pool;
use fencesim::sim::{write_trace, GatewayMode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::AtomicBool;

static NOT_INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn pool(jobs: usize) -> Pool<'static> {
    Pool { jobs, interrupted: &NOT_INTERRUPTED }
}

/// The trace lines of the events at or before `at_ms`.
fn prefix(outcome: &Outcome, at_ms: u64) -> String {
    let events: Vec<_> = outcome.record.events.iter().filter(|e| e.at_ms <= at_ms).cloned().collect();
    let mut out = Vec::new();
    write_trace(&events, outcome.scenario.base, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn ttl_only_worked_example() -> Outcome {
    run(&worked_example().with_mechanism(Mechanism::TtlOnly, GatewayMode::NonIdempotent), 1).unwrap()
}

#[test]
fn a_continuation_replays_the_failing_runs_prefix_event_for_event() {
    let mut checked = 0;
    for seed in 1..200 {
        let scenario = random_scenario(seed, Mechanism::TtlOnly, GatewayMode::NonIdempotent, FaultMask::ALL);
        let failing = run(&scenario, seed).unwrap();
        let Some(breach) = failing.checks.iter().filter_map(|c| c.breaches.first()).map(|b| b.at_ms).min()
        else {
            continue;
        };
        for at_ms in [breach / 3, breach * 2 / 3, breach] {
            let (kept, dropped) = cut(&failing, at_ms);
            for i in 0..3 {
                let next = continuation(
                    &failing.scenario,
                    &kept,
                    at_ms,
                    dropped + 1,
                    &mut ChaCha8Rng::seed_from_u64(i),
                );
                let again = run_with(&next, seed, None).unwrap();
                assert_eq!(prefix(&again, at_ms), prefix(&failing, at_ms), "seed {seed}, cut at {at_ms} ms");
            }
        }
        checked += 1;
        if checked == 12 {
            return;
        }
    }
    panic!("only {checked} failing seeds of ttl-only in 200");
}

#[test]
fn the_worked_examples_failure_becomes_certain_when_a_freezes() {
    let failing = ttl_only_worked_example();
    let curve =
        closeness(&failing, TRIES, 10, &pool(2)).unwrap().expect("ttl-only breaks the worked example");
    let first = curve.moments.first().unwrap();
    let last = curve.moments.last().unwrap();
    assert_eq!((first.at_ms, first.kept), (0, 0), "the curve starts at the start, with no fault kept");
    assert!(first.share() < 1.0, "fresh faults alone do not always break it: {curve:?}");
    assert_eq!(last.at_ms, curve.first_breach_ms);
    assert_eq!(last.failed, last.tried, "at the breach the prefix holds it: {curve:?}");
    // the pause fires right after A's claim of r_815, at 10:00:26
    let (turn, before) = turning_point(&curve).expect("the share rises");
    assert_eq!((turn.at_ms, turn.kept, turn.failed), (26_000, 1, TRIES), "{curve:?}");
    assert!(before < 1.0);
    assert!(curve.moments.iter().all(|m| m.tried == TRIES));
}

#[test]
fn the_curve_is_the_same_each_time_and_on_any_number_of_threads() {
    let failing = ttl_only_worked_example();
    let one = closeness(&failing, 12, 6, &pool(1)).unwrap();
    let two = closeness(&failing, 12, 6, &pool(2)).unwrap();
    assert_eq!(one, two);
}

#[test]
fn a_run_that_broke_nothing_has_no_curve() {
    let passing = run(&worked_example(), 1).unwrap();
    assert!(passing.passed());
    assert_eq!(closeness(&passing, 4, 4, &pool(1)).unwrap(), None);
}

/// The command the guide quotes, and what the guide says it shows: none of the
/// continuations from before the lagging lookup pays twice, all of those from it on do.
#[test]
fn replay_closeness_tells_the_lost_answer_harmless_until_the_lookup_lags() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["replay", "reports/shrunk/fenced-renewal-non-idempotent.json", "--closeness"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("the failure became likely at 12:00:00.531 (2 faults of the plan fired by then), where the share rose from 0% to 100%"), "{text}");
    let lines: Vec<&str> = text.lines().filter(|line| line.starts_with("  12:00:00.")).collect();
    assert!(lines.len() >= 10, "{text}");
    for line in lines {
        let before = line.trim_start().split(' ').next().unwrap() < "12:00:00.531";
        let said = if before { "0 of 40 continuations" } else { "40 of 40 continuations" };
        assert!(line.contains(said), "{line}");
    }
}
