//! The property suite CI runs. `PROPTEST_CASES` deepens it without a code change.

use fencesim::files::replay_file::ReplayFile;
use fencesim::model::Mechanism;
use fencesim::runner::run;
use fencesim::scenario::small::small_world_failing_over;
use fencesim::search::props::{cases, check, check_over, every_invariant_holds, no_double_refund};
use fencesim::sim::{FaultKind, GatewayMode};
use std::path::PathBuf;

fn out() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fencesim-failures")
}

/// A property that must hold: on failure, the shrunk plan, its replay file and the
/// command that replays it are what the test prints.
fn must_hold(name: &'static str, mechanism: Mechanism, gateway: GatewayMode, n: u32) {
    if let Some(found) = check(name, mechanism, gateway, cases(n), &out(), every_invariant_holds).unwrap() {
        panic!("{}", found.report());
    }
}

#[test]
fn tokens_from_the_database_keep_every_invariant() {
    must_hold("fenced-db-sequence", Mechanism::FencedDbSequence, GatewayMode::Idempotent, 200);
}

#[test]
fn fenced_keeps_every_invariant_with_a_counter_that_survives() {
    // Redis restarts and failovers are in the small worlds' plans; the property is kept
    // only where the counter survives, which the plan says.
    let config = |outcome: &fencesim::runner::Outcome| {
        let faults = &outcome.scenario.world.faults.faults;
        // a failover to a replica that had not received the last increments loses them too
        let restarts = faults.iter().any(|fault| {
            matches!(fault.kind, FaultKind::RedisRestart { .. } | FaultKind::RedisFailover { .. })
        });
        if restarts {
            Ok(())
        } else {
            every_invariant_holds(outcome)
        }
    };
    if let Some(found) =
        check("fenced", Mechanism::Fenced, GatewayMode::Idempotent, cases(200), &out(), config).unwrap()
    {
        panic!("{}", found.report());
    }
}

/// The mechanism that waits for the replica keeps every invariant through failovers (the
/// small worlds' Redis has a replica); only a restart may lose its counter.
#[test]
fn waiting_for_the_replica_keeps_every_invariant_through_a_failover() {
    let config = |outcome: &fencesim::runner::Outcome| {
        let faults = &outcome.scenario.world.faults.faults;
        match faults.iter().any(|fault| matches!(fault.kind, FaultKind::RedisRestart { .. })) {
            true => Ok(()),
            false => every_invariant_holds(outcome),
        }
    };
    let mechanism = Mechanism::FencedWaitReplica;
    let name = "fenced-wait-replica";
    let worlds = small_world_failing_over();
    let found = check_over(worlds, name, mechanism, GatewayMode::Idempotent, cases(200), &out(), config);
    if let Some(found) = found.unwrap() {
        panic!("{}", found.report());
    }
}

/// The TTL alone pays twice, and what it shrinks to is small and shows why: a worker
/// went on writing after its lease had ended (a stall longer than the TTL, or a lease
/// brought to an early end while the job was handed on).
#[test]
fn the_ttl_alone_pays_twice_and_shrinks_to_two_workers_a_few_rows_and_a_write_after_the_lease_ended() {
    let dir = std::env::temp_dir().join(format!("fencesim-props-{}", std::process::id()));
    let found = check(
        "ttl-only pays once",
        Mechanism::TtlOnly,
        GatewayMode::NonIdempotent,
        500,
        &dir,
        no_double_refund,
    )
    .unwrap()
    .expect("a counterexample within 500 cases");
    let world = &found.world;
    assert_eq!(world.workers, 2, "{}", found.report());
    // Small, by the suite's target for a shrunk counterexample: at most 3 faults, 3 workers
    // and 5 rows. (B takes the job over only after the visibility timeout, 1.5 TTLs,
    // unless a fault hands it on; A must still be writing then, which takes a few rows.)
    assert!(world.rows <= 5, "{}", found.report());
    assert!(world.faults.len() <= 3, "{}", found.report());
    // what the failing property prints replays the same failure
    let report = found.report();
    assert!(report.contains("replay with: fencesim replay "), "{report}");
    let file = ReplayFile::load(&found.replay_file).unwrap();
    let again = run(&file.scenario().unwrap(), file.seed).unwrap();
    assert_eq!(format!("{:016x}", again.trace_hash), file.expected_trace_hash);
    assert!(again.check("no-double-refund").is_violation());
    assert!(!again.check("writes-after-lease-end").holds(), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The random scenario's `seed` under `redlock` with the kinds `mask` lets on, which must
/// break `invariant`, shrunk while it still does.
fn shrunk_redlock_failure(
    seed: u64,
    mask: fencesim::scenario::FaultMask,
    invariant: &str,
) -> fencesim::scenario::Scenario {
    let found =
        fencesim::scenario::build("random", seed, Mechanism::Redlock, GatewayMode::Idempotent, mask).unwrap();
    let outcome = run(&found, seed).unwrap();
    assert!(outcome.check(invariant).is_violation(), "{}", outcome.breach_lines("", true));
    let breaks = |trial: &fencesim::scenario::Scenario| {
        run(trial, seed).map(|outcome| outcome.check(invariant).is_violation())
    };
    fencesim::search::shrink::shrink_scenario(&found, seed, breaks, run).unwrap()
}

/// Redlock as its algorithm asks to be used (validity checked before every write, the
/// lease extended on a majority) is what the debate about it says: with stalls and no clock
/// shifts, it breaks only when a pause lands between the check and the write. The first
/// failure of monotonic-fences in the debate's stalls-only setting (seed 1219 of `matrix`'s
/// seeds, clock shifts off; its earlier failures there break only the settlement ledger,
/// which Redlock writes without a fence) shrinks to exactly that: one stall, a pause of a
/// worker right before its claim leaves, after it checked its validity and found it held;
/// any other fault only brings a second contender (a job delivered again, say).
#[test]
fn redlock_as_specified_breaks_only_when_a_stall_lands_between_its_check_and_its_write() {
    use fencesim::model::{Step, StepKind, WriteKind};
    use fencesim::scenario::FaultMask;
    use fencesim::sim::{EventKind, Hop, Timing, Trigger};
    let seed = 1219;
    let stalls_only = FaultMask::ALL.without_names("redis-clock-jump,expire-lease").unwrap();
    let shrunk = shrunk_redlock_failure(seed, stalls_only, "monotonic-fences");
    let faults = &shrunk.world.faults.faults;
    let stalls: Vec<_> = faults.iter().filter(|fault| fault.kind.kind().timing() == Timing::Stall).collect();
    assert_eq!(stalls.len(), 1, "{faults:?}");
    let FaultKind::Pause { worker, .. } = stalls[0].kind else { panic!("the stall is a pause: {faults:?}") };
    let before_a_request = matches!(
        stalls[0].trigger,
        Trigger::Call { worker: w, hop: Hop::Database, .. } | Trigger::Step { worker: w, step: StepKind::LeaseChecked, .. }
            if w == worker
    );
    assert!(before_a_request, "{faults:?}");
    let events = run(&shrunk, seed).unwrap().record.events;
    let fired = events
        .iter()
        .position(
            |event| matches!(&event.kind, EventKind::FaultFired { fault, .. } if *fault == stalls[0].kind),
        )
        .expect("the pause fired");
    let checked = events[..fired].iter().rev().find_map(|event| match &event.kind {
        EventKind::Step { worker: w, step: Step::LeaseChecked { held, .. } } if *w == worker => Some(*held),
        _ => None,
    });
    assert_eq!(checked, Some(true), "{worker} checked its validity and found it held before the stall");
    let next_write = events[fired..].iter().find_map(|event| match &event.kind {
        EventKind::Write { worker: w, write, .. } if *w == worker => Some(*write),
        _ => None,
    });
    assert_eq!(next_write, Some(WriteKind::Claim), "the stall held back {worker}'s claim");
}

/// The debate's other side: Redlock counts on each instance keeping its key for the TTL.
/// With every fault on, its failure at seed 143 (the first of the debate's seeds to break
/// no-stale-confirm with every fault on) needs no
/// stall at all: the key lost on enough instances (clocks jumping ahead, restarts without
/// persistence) hands a majority to B while A's validity, measured on A's own clock, still
/// says held.
#[test]
fn redlock_breaks_without_a_stall_when_a_majority_of_instances_lose_the_key() {
    let shrunk = shrunk_redlock_failure(143, fencesim::scenario::FaultMask::ALL, "no-stale-confirm");
    let faults = &shrunk.world.faults.faults;
    let stall = |kind: &FaultKind| matches!(kind.kind().timing(), fencesim::sim::Timing::Stall);
    assert!(!faults.iter().any(|fault| stall(&fault.kind)), "{faults:?}");
    let mut lost: Vec<u8> = faults.iter().filter_map(|fault| fault.kind.instance()).collect();
    lost.sort_unstable();
    lost.dedup();
    assert!(lost.len() >= 3, "a majority of the five instances lost the key: {faults:?}");
}
