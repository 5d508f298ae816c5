//! Faults fire where the plan says, and a paused worker is frozen whole.

use fencesim::model::{Cents, Mechanism, StepKind, WriteKind};
use fencesim::runner::run;
use fencesim::scenario::{Scenario, A, B};
use fencesim::sim::{EventKind, FaultKind, GatewayMode, Latency, Trigger, WallMs};

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
    let sc = small("timed-pause").pause_at_time(A, 350, 7_000).build();
    let o = run(&sc, 3).unwrap();
    let paused = o
        .record
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::FaultFired { fault: FaultKind::Pause { .. }, .. }))
        .unwrap();
    assert_eq!(paused.at_ms, 350);
    let resumed = o.record.events.iter().find(|e| matches!(e.kind, EventKind::Resumed { .. })).unwrap();
    assert_eq!(resumed.at_ms, 7_350);
    // A makes no move of its own while frozen: its call in flight answers only after the resume
    let a_moves: Vec<u64> = o
        .record
        .events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::Step { worker, .. } if *worker == A))
        .map(|e| e.at_ms)
        .collect();
    assert!(a_moves.iter().all(|&t| t <= 350 || t >= 7_350), "{a_moves:?}");
    // the lease expired under it, B took over; the fence turned A away and all was paid once
    assert!(o
        .record
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::LeaseGranted { worker, .. } if *worker == B)));
    assert!(o.passed(), "{:?}", o.checks.iter().filter(|c| c.is_violation()).collect::<Vec<_>>());
    assert_eq!(o.tally().gateway_refunds, 20);
    assert!(o.tally().fence_rejections >= 1);
}

#[test]
fn the_same_pause_without_the_fence_pays_twice() {
    let sc = small("timed-pause")
        .pause_at_time(A, 350, 7_000)
        .build()
        .with_strategy(Mechanism::TtlOnly, GatewayMode::NonIdempotent);
    let o = run(&sc, 3).unwrap();
    assert!(o.check("no-double-refund").is_violation());
}

#[test]
fn a_step_trigger_fires_on_the_nth_arrival_of_that_worker_only() {
    let sc = small("step-pause").pause_at_step(A, StepKind::AfterClaim, 3, 5_000).build();
    let o = run(&sc, 3).unwrap();
    let fired: Vec<usize> = o
        .record
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.kind, EventKind::FaultFired { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(fired.len(), 1);
    // right after A's third accepted claim, before anything else of A's
    let before = &o.record.events[fired[0] - 1].kind;
    assert!(
        matches!(before, EventKind::Write { worker, write: WriteKind::Claim, refund, rows: 1, .. } if *worker == A && refund.0 == 3),
        "{before:?}"
    );
    assert!(matches!(
        o.record.events[fired[0]].kind,
        EventKind::FaultFired { trigger: Trigger::Step { worker, step: StepKind::AfterClaim, nth: 3 }, .. } if worker == A
    ));
    assert!(o.passed());
}

#[test]
fn without_faults_one_worker_settles_everything_and_the_run_ends_cleanly() {
    let o = run(&small("calm").build(), 9).unwrap();
    assert!(o.passed());
    assert!(o.record.settled);
    assert_eq!(o.record.leaked_tasks, 0);
    assert_eq!(o.tally().gateway_refunds, 20);
    assert_eq!(o.record.ended_at_ms, 2_000, "20 refunds at 100 ms each");
}
