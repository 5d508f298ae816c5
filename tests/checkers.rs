//! Each checker can fail: hand-made histories that break one invariant each.

use fencesim::check::liveness::progress;
use fencesim::check::rows::state_machine;
use fencesim::check::{check_all, Check, Facts};
use fencesim::model::{
    Cents, FenceViolation, Job, JobId, MerchantId, RefundId, RefundState, RowImage, Step, Token, WriteKind,
};
use fencesim::scenario::{worked_example, A, B, M_4471};
use fencesim::sim::{CallOutcome, Epoch, Event, EventKind, LedgerEntry, RunRecord, WallMs};

fn record(events: Vec<EventKind>) -> RunRecord {
    let world = worked_example().world;
    RunRecord {
        seed: 0,
        events: events.into_iter().enumerate().map(|(at, kind)| Event { at_ms: at as u64, kind }).collect(),
        final_rows: world.rows.clone(),
        ledger: Vec::new(),
        epochs: vec![
            Epoch {
                number: 1,
                worker: A,
                key: "lock:settle:m_4471".into(),
                value: "A#1".into(),
                granted_at_ms: 0,
                expired_at_ms: Some(5),
            },
            Epoch {
                number: 2,
                worker: B,
                key: "lock:settle:m_4471".into(),
                value: "B#1".into(),
                granted_at_ms: 6,
                expired_at_ms: None,
            },
        ],
        settled: true,
        ended_at_ms: 100,
        last_fault_ms: None,
        open_jobs: Vec::new(),
        leaked_tasks: 0,
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
    let history = record(vec![
        EventKind::Step { worker: A, step: Step::LeaseAcquired { merchant: M_4471, acquisition: 1 } },
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
