//! Faults fire where the plan says, and a paused worker is frozen whole.

use fencesim::model::{Cents, Mechanism, StepKind, WriteKind};
use fencesim::runner::run;
use fencesim::scenario::{Scenario, A, B};
use fencesim::sim::{EventKind, FaultKind, GatewayMode, Hop, Latency, Trigger, WallMs};

fn small(name: &'static str) -> fencesim::scenario::ScenarioBuilder {
    Scenario::named(name)
        .starts_at(WallMs::hms(9, 0, 0))
        .merchant_with_refunds(fencesim::model::MerchantId(7), &[Cents(1_000); 20])
        .lease_ttl_ms(5_000)
        .visibility_timeout_ms(6_000)
        .workers(2)
        .gateway_latency(Latency::flat(100))
}

#[test]
fn a_pause_at_a_time_freezes_the_worker_from_that_millisecond_until_its_resume() {
    let scenario = small("timed-pause").pause_at_time(A, 350, 7_000).build();
    let outcome = run(&scenario, 3).unwrap();
    let paused = outcome
        .record
        .events
        .iter()
        .find(|event| matches!(event.kind, EventKind::FaultFired { fault: FaultKind::Pause { .. }, .. }))
        .unwrap();
    assert_eq!(paused.at_ms, 350);
    let resumed =
        outcome.record.events.iter().find(|event| matches!(event.kind, EventKind::Resumed { .. })).unwrap();
    assert_eq!(resumed.at_ms, 7_350);
    // A makes no move of its own while frozen: its call in flight answers only after the resume
    let a_moves: Vec<u64> = outcome
        .record
        .events
        .iter()
        .filter(|event| matches!(&event.kind, EventKind::Step { worker, .. } if *worker == A))
        .map(|event| event.at_ms)
        .collect();
    assert!(a_moves.iter().all(|&t| t <= 350 || t >= 7_350), "{a_moves:?}");
    // the lease expired under it, B took over; the fence turned A away and all was paid once
    assert!(outcome
        .record
        .events
        .iter()
        .any(|event| matches!(&event.kind, EventKind::LeaseGranted { worker, .. } if *worker == B)));
    assert!(
        outcome.passed(),
        "{:?}",
        outcome.checks.iter().filter(|check| check.is_violation()).collect::<Vec<_>>()
    );
    assert_eq!(outcome.tally().gateway_refunds, 20);
    assert!(outcome.tally().fence_rejections >= 1);
}

#[test]
fn the_same_pause_without_the_fence_pays_twice() {
    let scenario = small("timed-pause")
        .pause_at_time(A, 350, 7_000)
        .build()
        .with_mechanism(Mechanism::TtlOnly, GatewayMode::NonIdempotent);
    let outcome = run(&scenario, 3).unwrap();
    assert!(outcome.check("no-double-refund").is_violation());
}

#[test]
fn a_step_trigger_fires_on_the_nth_arrival_of_that_worker_only() {
    let scenario = small("step-pause").pause_at_step(A, StepKind::AfterClaim, 3, 5_000).build();
    let outcome = run(&scenario, 3).unwrap();
    let fired: Vec<usize> = outcome
        .record
        .events
        .iter()
        .enumerate()
        .filter(|(_, event)| matches!(event.kind, EventKind::FaultFired { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(fired.len(), 1);
    // right after A's third accepted claim, before anything else of A's
    let before = &outcome.record.events[fired[0] - 1].kind;
    assert!(
        matches!(before, EventKind::Write { worker, write: WriteKind::Claim, refund, rows: 1, .. } if *worker == A && refund.0 == 3),
        "{before:?}"
    );
    assert!(matches!(
        outcome.record.events[fired[0]].kind,
        EventKind::FaultFired { trigger: Trigger::Step { worker, step: StepKind::AfterClaim, nth: 3 }, .. } if worker == A
    ));
    assert!(outcome.passed());
}

#[test]
fn without_faults_one_worker_settles_everything_and_the_run_ends_cleanly() {
    let outcome = run(&small("calm").build(), 9).unwrap();
    assert!(outcome.passed());
    assert!(outcome.record.settled);
    assert_eq!(outcome.record.leaked_tasks, 0);
    assert_eq!(outcome.tally().gateway_refunds, 20);
    assert_eq!(outcome.record.ended_at_ms, 2_000, "20 refunds at 100 ms each");
}

/// A call trigger lands between two round trips: A is frozen right before its second Redis
/// command, after its lease was granted and before it takes its token. It wakes after its
/// lease is gone, draws a newer token than B's, and the lease check after the token sends
/// it away before it writes anything.
#[test]
fn a_pause_before_the_second_redis_command_lands_between_the_lease_and_the_token() {
    let scenario = small("call-trigger").pause_before_call(A, Hop::Redis, 2, 8_000).build();
    let outcome = run(&scenario.with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent), 3).unwrap();
    let events = &outcome.record.events;
    let position =
        |what: &dyn Fn(&EventKind) -> bool| events.iter().position(|event| what(&event.kind)).unwrap();
    let granted = position(&|kind| matches!(kind, EventKind::LeaseGranted { worker, .. } if *worker == A));
    let fired = position(&|kind| matches!(kind, EventKind::FaultFired { trigger: Trigger::Call { .. }, .. }));
    let token = position(&|kind| matches!(kind, EventKind::TokenIssued { worker, .. } if *worker == A));
    assert!(granted < fired && fired < token, "granted {granted}, fired {fired}, token {token}");
    assert_eq!(events[token].at_ms, events[fired].at_ms + 8_000, "the INCR leaves only when A wakes");
    let b_token = position(&|kind| matches!(kind, EventKind::TokenIssued { worker, .. } if *worker == B));
    assert!(b_token < token, "B took its token while A was frozen");
    let a_wrote = events
        .iter()
        .any(|event| matches!(&event.kind, EventKind::Write { worker, epoch: Some(1), .. } if *worker == A));
    assert!(!a_wrote, "A's first lease writes nothing");
    assert!(outcome.passed(), "{}", outcome.breach_lines("", false));
}
