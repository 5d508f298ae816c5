//! `fencesim worker --controlled` runs a team's program on the run's own clock, each
//! request in the turn the seed gives it: the worked example breaks, for the unfenced
//! examples, what the simulated `ttl-only` breaks; the fenced Python worker breaks
//! nothing under an idempotent gateway; and a seed run twice gives the same history, line
//! for line. Run as a person runs them: the binary, its exit code and what it prints.
//!
//! Needs redis-server, PostgreSQL, libfaketime and the example workers (`.ci/components`
//! installs them); without them each test says loudly that it skipped, and with `CI` set
//! it fails instead.

mod support;

use fencesim::model::Mechanism;
use fencesim::sim::GatewayMode;
use support::programs::{available, broken, python, simulated, unfenced_typescript, worker};

/// Whether libfaketime is here, which puts the servers on the run's clock; said if not.
fn faketime(test: &str) -> bool {
    support::faketime::FakeClock::new(test).is_some()
}

#[test]
fn the_unfenced_typescript_worker_breaks_what_the_simulation_breaks_and_repeats_its_history() {
    let test = "the_unfenced_typescript_worker_breaks_what_the_simulation_breaks_and_repeats_its_history";
    let Some(command) = unfenced_typescript(test) else { return };
    if !faketime(test) {
        return;
    }
    let (code, stdout, stderr) =
        worker(&["--controlled", "--twice", "--gateway", "non-idempotent"], &command);
    assert_eq!(code, 1, "a broken invariant exits 1: {stderr}");
    let told: Vec<String> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("VIOLATION "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert_eq!(told, simulated(Mechanism::TtlOnly, GatewayMode::NonIdempotent), "{stdout}");
    for name in ["no-double-refund", "no-stale-confirm"] {
        assert!(told.iter().any(|t| t == name), "{name} broken: {stdout}");
    }
    assert!(stdout.contains("controlled run, seed 1: a history of "), "{stdout}");
    assert!(stdout.contains("run again: the same history"), "the seed repeats its history: {stdout}");
}

#[test]
fn the_fenced_python_worker_breaks_nothing_with_an_idempotent_gateway() {
    let test = "the_fenced_python_worker_breaks_nothing_with_an_idempotent_gateway";
    let (needs, command) = python();
    if !available(test, Some(&needs)) || !faketime(test) {
        return;
    }
    let (code, stdout, stderr) = worker(&["--controlled", "--seed", "7", "--json"], &command);
    assert_eq!(broken(&stdout), Vec::<String>::new(), "{stderr}");
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn random_worlds_run_twice_give_the_same_histories() {
    let test = "random_worlds_run_twice_give_the_same_histories";
    let Some(command) = unfenced_typescript(test) else { return };
    if !faketime(test) {
        return;
    }
    let flags = ["--controlled", "--twice", "--random", "3", "--first-seed", "1001"];
    let (_, stdout, stderr) = worker(&flags, &command);
    assert!(stdout.contains("the same history run twice in 3 of 3 worlds"), "{stdout}\n{stderr}");
    assert!(stdout.contains("broke no-stale-confirm"), "the unfenced worker is caught: {stdout}");
}
