//! Each checker can fail: hand-made histories that break one invariant each.

use fencesim::check::liveness::progress;
use fencesim::check::rows::state_machine;
use fencesim::check::{check_all, Check, Facts};
use fencesim::model::{
    Cents, FenceViolation, Job, JobId, MerchantId, RefundId, RefundState, RowImage, Step, Token, WriteKind,
};
use fencesim::scenario::{worked_example, A, B, M_4471};
use fencesim::sim::{CallOutcome, Epoch, EpochEnd, Event, EventKind, LedgerEntry, RunRecord, WallMs};

fn record(events: Vec<EventKind>) -> RunRecord {
    let world = worked_example().world;
    RunRecord {
        seed: 0,
        events: events.into_iter().enumerate().map(|(at, kind)| Event { at_ms: at as u64, kind }).collect(),
        final_rows: world.rows.clone(),
        ledger: Vec::new(),
        settlement_entries: Vec::new(),
        settlement_balances: Vec::new(),
        epochs: vec![
            Epoch {
                number: 1,
                worker: A,
                key: "lock:settle:m_4471".into(),
                value: "A#1".into(),
                granted_at_ms: 0,
                granted_at_event: 0,
                expired_at_ms: Some(5),
                ended: Some(EpochEnd { at_ms: 5, event: 5, by_owner: false }),
            },
            Epoch {
                number: 2,
                worker: B,
                key: "lock:settle:m_4471".into(),
                value: "B#1".into(),
                granted_at_ms: 6,
                granted_at_event: 6,
                expired_at_ms: None,
                ended: None,
            },
        ],
        settled: true,
        ended_at_ms: 100,
        last_fault_ms: None,
        // the merchant's job is still open: its rows wait for it, not for nobody
        open_jobs: vec![(Job { id: JobId(1), merchant: M_4471 }, 1)],
        leaked_tasks: 0,
        served: Vec::new(),
        sleeps: 0,
    }
}

fn checks(record: &RunRecord) -> Vec<Check> {
    let world = worked_example().world;
    check_all(&Facts { record, world: &world, base: WallMs::hms(10, 0, 0) })
}

fn broken(record: &RunRecord) -> Vec<&'static str> {
    checks(record).into_iter().filter(Check::is_violation).map(|check| check.invariant).collect()
}

fn write(
    worker: fencesim::model::WorkerId,
    epoch: u32,
    write: WriteKind,
    refund: u32,
    state: RefundState,
    fence: i64,
) -> EventKind {
    EventKind::Write {
        worker,
        epoch: Some(epoch),
        write,
        refund: RefundId(refund),
        token: Some(Token(fence)),
        rows: 1,
        after: Some(RowImage { state, fence }),
    }
}

fn paid(worker: fencesim::model::WorkerId, refund: u32, gateway_ref: u32, cents: i64) -> EventKind {
    EventKind::RefundCalled {
        worker,
        epoch: Some(1),
        refund: RefundId(refund),
        amount: Cents(cents),
        outcome: CallOutcome::Created,
        gateway_ref,
        response_lost: false,
    }
}

#[test]
fn a_quiet_history_breaks_nothing() {
    let history = record(vec![]);
    assert!(broken(&history).is_empty(), "{:?}", broken(&history));
}

#[test]
fn two_payments_for_one_refund_is_a_double_refund() {
    let amount = worked_example().world.rows[0].amount.0;
    let history = record(vec![paid(A, 1, 1, amount), paid(B, 1, 2, amount)]);
    let verdicts = checks(&history);
    let double = verdicts.iter().find(|check| check.invariant == "no-double-refund").unwrap();
    assert_eq!(double.breaches.len(), 1);
    assert_eq!(double.breaches[0].at_ms, 1);
    assert!(double.breaches[0].detail.contains("r_001 was refunded twice"));
}

#[test]
fn a_payment_of_the_wrong_amount_is_caught() {
    let history = record(vec![paid(A, 1, 1, 1)]);
    let verdicts = checks(&history);
    assert!(verdicts.iter().find(|check| check.invariant == "no-double-refund").unwrap().breaches[0]
        .detail
        .contains("but the row says"));
}

#[test]
fn a_confirm_by_a_lease_that_did_not_make_the_last_claim_is_stale() {
    let history = record(vec![
        write(A, 1, WriteKind::Claim, 1, RefundState::Sending, 33),
        write(B, 2, WriteKind::Claim, 1, RefundState::Sending, 34),
        write(A, 1, WriteKind::Confirm, 1, RefundState::Sent, 34),
    ]);
    let broken_now = broken(&history);
    assert!(broken_now.contains(&"no-stale-confirm"), "{broken_now:?}");
    assert!(broken_now.contains(&"monotonic-fences"), "{broken_now:?}");
}

#[test]
fn a_fence_that_goes_down_or_a_token_issued_twice_breaks_monotonic_fences() {
    let history = record(vec![
        write(B, 2, WriteKind::Claim, 1, RefundState::Sending, 34),
        write(B, 2, WriteKind::Claim, 1, RefundState::Sending, 3),
    ]);
    let verdicts = checks(&history);
    let monotonic = verdicts.iter().find(|check| check.invariant == "monotonic-fences").unwrap();
    assert!(monotonic.breaches[0].detail.contains("went down from 34 to 3"), "{:?}", monotonic.breaches);

    let token = |worker, number| EventKind::TokenIssued {
        worker,
        key: "fence:settle:m_4471".into(),
        token: Token(number),
    };
    let history = record(vec![token(A, 33), token(B, 33)]);
    assert!(broken(&history).contains(&"monotonic-fences"));
}

#[test]
fn a_sent_row_that_moves_again_breaks_the_state_machine() {
    let mut history = record(vec![
        write(A, 1, WriteKind::Claim, 1, RefundState::Sending, 33),
        write(A, 1, WriteKind::Confirm, 1, RefundState::Sent, 33),
        write(B, 2, WriteKind::Claim, 1, RefundState::Sending, 34),
    ]);
    history.final_rows[0].state = RefundState::Sending;
    history.final_rows[0].fence = 34;
    let world = worked_example().world;
    let breaches = state_machine(&Facts { record: &history, world: &world, base: WallMs(0) });
    assert_eq!(breaches.len(), 1);
    assert!(breaches[0].detail.contains("r_001 moved sent -> sending"), "{breaches:?}");
}

#[test]
fn a_table_that_differs_from_what_the_writes_left_breaks_the_state_machine() {
    let mut history = record(vec![]);
    history.final_rows[4].state = RefundState::Sent;
    let broken_now = broken(&history);
    assert!(broken_now.contains(&"state-machine"), "{broken_now:?}");
}

#[test]
fn a_sent_row_without_its_ledger_entry_breaks_ledger_matches_rows_at_rest_only() {
    let mut history = record(vec![]);
    history.final_rows[0].state = RefundState::Sent;
    history.ledger.push(LedgerEntry { gateway_ref: 1, refund: RefundId(2), amount: Cents(5), at_ms: 0 });
    assert!(broken(&history).contains(&"ledger-matches-rows"));
    history.settled = false;
    assert!(!broken(&history).contains(&"ledger-matches-rows"), "not checked before the run is at rest");
}

#[test]
fn a_stall_is_reported_with_its_cause() {
    let violation = FenceViolation { refund: RefundId(1), token: Token(3), write: WriteKind::Claim };
    let mut history = record(vec![EventKind::Step { worker: B, step: Step::FenceViolation { violation } }]);
    history.settled = false;
    history.open_jobs = vec![(Job { id: JobId(1), merchant: M_4471 }, 4)];
    history.final_rows[0].fence = 33;
    let world = worked_example().world;
    let breaches = progress(&Facts { record: &history, world: &world, base: WallMs::hms(10, 0, 0) });
    assert_eq!(breaches.len(), 1);
    let detail = &breaches[0].detail;
    assert!(detail.contains("job#1 for m_4471 was not done"), "{detail}");
    assert!(detail.contains("claim of r_001 with token 3 updated 0 rows (stored fence 33)"), "{detail}");
    assert!(detail.contains("4 deliveries"), "{detail}");
}

#[test]
fn two_believers_show_in_the_diagnostic_without_failing_the_run() {
    // each believes it because Redis granted it the lease, A's first, B's once A's expired
    let granted = |worker: fencesim::model::WorkerId, value: &str, epoch| EventKind::LeaseGranted {
        worker,
        instance: 0,
        key: "lock:settle:m_4471".into(),
        value: value.into(),
        ttl_ms: 5,
        epoch: Some(epoch),
    };
    let history = record(vec![
        granted(A, "A#1", 1),
        EventKind::Step { worker: A, step: Step::LeaseAcquired { merchant: M_4471, acquisition: 1 } },
        EventKind::LeaseExpired {
            instance: 0,
            key: "lock:settle:m_4471".into(),
            value: "A#1".into(),
            epoch: Some(1),
        },
        granted(B, "B#1", 2),
        EventKind::Step {
            worker: B,
            step: Step::LeaseAcquired { merchant: MerchantId(4471), acquisition: 1 },
        },
    ]);
    let verdicts = checks(&history);
    let holder = verdicts.iter().find(|check| check.invariant == "single-holder").unwrap();
    assert_eq!(holder.breaches.len(), 1);
    assert!(!holder.is_violation());
    assert!(broken(&history).is_empty());
}

/// The history with row `refund` left at `state` and `fence`, as its writes left it.
fn ending_with(mut history: RunRecord, refund: u32, state: RefundState, fence: i64) -> RunRecord {
    let row = history.final_rows.iter_mut().find(|row| row.id == RefundId(refund)).unwrap();
    (row.state, row.fence) = (state, fence);
    history
}

#[test]
fn rows_left_unsent_behind_an_acked_job_are_dropped_work() {
    let mut history =
        record(vec![EventKind::JobAcked { job: JobId(1), worker: A, receipt: 1, accepted: true }]);
    history.open_jobs.clear();
    let verdicts = checks(&history);
    let settled = verdicts.iter().find(|check| check.invariant == "rows-settled").unwrap();
    assert!(settled.is_violation());
    assert_eq!(settled.breaches.len(), 1_200);
    assert!(
        settled.breaches[0].detail.contains("r_001 of m_4471 is still pending"),
        "{:?}",
        settled.breaches[0]
    );
    assert!(settled.breaches[0].detail.contains("acked by A at 10:00:00.000"), "{:?}", settled.breaches[0]);
    assert_eq!(broken(&history), ["rows-settled"]);
}

#[test]
fn a_later_lease_writing_with_a_token_no_larger_than_an_earlier_one_breaks_token_order() {
    let same = record(vec![
        write(A, 1, WriteKind::Claim, 1, RefundState::Sending, 34),
        write(B, 2, WriteKind::Claim, 2, RefundState::Sending, 34),
    ]);
    let same = ending_with(ending_with(same, 1, RefundState::Sending, 34), 2, RefundState::Sending, 34);
    assert_eq!(broken(&same), ["token-order"]);
    let order = checks(&same).into_iter().find(|check| check.invariant == "token-order").unwrap();
    assert!(order.breaches[0].detail.contains("B (epoch 2) wrote with token 34"), "{:?}", order.breaches[0]);
    let larger = record(vec![
        write(A, 1, WriteKind::Claim, 1, RefundState::Sending, 34),
        write(B, 2, WriteKind::Claim, 2, RefundState::Sending, 35),
    ]);
    let larger = ending_with(ending_with(larger, 1, RefundState::Sending, 34), 2, RefundState::Sending, 35);
    assert!(broken(&larger).is_empty(), "{:?}", broken(&larger));
}

#[test]
fn a_write_after_the_writers_lease_ended_shows_in_the_diagnostic_without_failing_the_run() {
    // epoch 1 (A) ended at 5 ms; its write lands at 7 ms (the event's index)
    let mut events: Vec<EventKind> = (0..7).map(|_| EventKind::Resumed { worker: B }).collect();
    events.push(write(A, 1, WriteKind::Claim, 1, RefundState::Sending, 34));
    let history = ending_with(record(events), 1, RefundState::Sending, 34);
    let after =
        checks(&history).into_iter().find(|check| check.invariant == "writes-after-lease-end").unwrap();
    assert_eq!(after.breaches.len(), 1);
    assert!(
        after.breaches[0].detail.contains("accepted 2 ms after its lease ended"),
        "{:?}",
        after.breaches[0]
    );
    assert!(!after.is_violation());
    assert!(broken(&history).is_empty(), "{:?}", broken(&history));
}

#[test]
fn re_arming_another_workers_lease_breaks_lease_integrity() {
    let granted = EventKind::LeaseGranted {
        worker: B,
        instance: 0,
        key: "lock:settle:m_4471".into(),
        value: "B#1".into(),
        ttl_ms: 30_000,
        epoch: Some(2),
    };
    let rearm = |worker| EventKind::LeaseRearmed {
        worker,
        instance: 0,
        key: "lock:settle:m_4471".into(),
        holder: Some("B#1".into()),
        ttl_ms: 30_000,
    };
    assert_eq!(broken(&record(vec![granted.clone(), rearm(A)])), ["lease-integrity"]);
    assert!(broken(&record(vec![granted, rearm(B)])).is_empty());
}
