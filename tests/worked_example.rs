//! The article's worked example, fact by fact, as the simulation produces it.

use fencesim::model::{Mechanism, RefundId, RefundState, Step, Token, WriteKind};
use fencesim::runner::{run, Outcome, DEFAULT_SEED};
use fencesim::scenario::{worked_example, worked_example_two_stores, A, B, R_815};
use fencesim::sim::{CallOutcome, Event, EventKind, FaultKind, GatewayMode, WallMs};
use std::sync::OnceLock;

fn outcome(mechanism: Mechanism, gateway: GatewayMode) -> Outcome {
    run(&worked_example().with_mechanism(mechanism, gateway), DEFAULT_SEED).expect("the worked example runs")
}

fn fenced() -> &'static Outcome {
    static RUN: OnceLock<Outcome> = OnceLock::new();
    RUN.get_or_init(|| outcome(Mechanism::Fenced, GatewayMode::Idempotent))
}

fn ttl_only_non_idempotent() -> &'static Outcome {
    static RUN: OnceLock<Outcome> = OnceLock::new();
    RUN.get_or_init(|| outcome(Mechanism::TtlOnly, GatewayMode::NonIdempotent))
}

/// `10:00:26.000` as milliseconds since the run began at 10:00:00.000.
fn at(h: u64, m: u64, s: u64) -> u64 {
    WallMs::hms(h, m, s).0 - WallMs::hms(10, 0, 0).0
}

fn events(outcome: &Outcome) -> &[Event] {
    &outcome.record.events
}

fn find(outcome: &Outcome, what: impl Fn(&EventKind) -> bool) -> Vec<&Event> {
    events(outcome).iter().filter(|event| what(&event.kind)).collect()
}

#[test]
fn a_takes_the_lease_at_10_00_00_and_token_33_from_a_counter_at_32() {
    let outcome = fenced();
    let granted = find(outcome, |kind| matches!(kind, EventKind::LeaseGranted { .. }));
    assert!(
        matches!(&granted[0].kind, EventKind::LeaseGranted { worker, key, ttl_ms: 30_000, epoch: Some(1), .. }
        if *worker == A && key == "lock:settle:m_4471")
    );
    assert_eq!(granted[0].at_ms, at(10, 0, 0));
    let tokens = find(outcome, |kind| matches!(kind, EventKind::TokenIssued { .. }));
    assert!(matches!(&tokens[0].kind, EventKind::TokenIssued { worker, key, token: Token(33) }
        if *worker == A && key == "fence:settle:m_4471"));
    assert_eq!(tokens[0].at_ms, at(10, 0, 0));
}

#[test]
fn a_claims_pays_and_confirms_r_001_to_r_814_before_the_stall() {
    let outcome = fenced();
    let confirmed: Vec<RefundId> = find(outcome, |kind| {
        matches!(kind, EventKind::Write { worker, write: WriteKind::Confirm, rows: 1, token: Some(Token(33)), .. } if *worker == A)
    })
    .iter()
    .map(|event| match event.kind {
        EventKind::Write { refund, .. } => refund,
        _ => unreachable!(),
    })
    .collect();
    assert_eq!(confirmed, (1..=814).map(RefundId).collect::<Vec<_>>());
    assert!(find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, write: WriteKind::Confirm, .. } if *worker == A)
    )
    .iter()
    .all(|event| event.at_ms <= at(10, 0, 26) || event.at_ms >= at(10, 0, 34)));
}

#[test]
fn at_10_00_26_a_claims_r_815_with_fence_33_and_freezes_before_the_gateway_call() {
    let outcome = fenced();
    let claim = find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, refund, write: WriteKind::Claim, .. } if *worker == A && *refund == R_815),
    );
    assert_eq!(claim.len(), 1);
    assert_eq!(claim[0].at_ms, at(10, 0, 26));
    let EventKind::Write { rows, after, token, .. } = &claim[0].kind else { unreachable!() };
    assert_eq!((*rows, *token), (1, Some(Token(33))));
    let image = after.expect("the claim returned the row");
    assert_eq!((image.state, image.fence), (RefundState::Sending, 33));

    let paused = find(
        outcome,
        |kind| matches!(kind, EventKind::FaultFired { fault: FaultKind::Pause { worker, duration_ms: 8_000 }, .. } if *worker == A),
    );
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].at_ms, at(10, 0, 26));
    // nothing reached the gateway from A for r_815 before it woke
    let a_calls = find(
        outcome,
        |kind| matches!(kind, EventKind::RefundCalled { worker, refund, .. } if *worker == A && *refund == R_815),
    );
    assert!(a_calls.iter().all(|event| event.at_ms >= at(10, 0, 34)));
}

#[test]
fn the_lease_key_runs_out_at_10_00_30_and_is_gone_a_millisecond_later_by_redis_own_clock() {
    let outcome = fenced();
    let expired = find(outcome, |kind| matches!(kind, EventKind::LeaseExpired { .. }));
    assert_eq!(expired.len(), 1);
    // as on a real server, the key is still there at its deadline's millisecond
    assert_eq!(expired[0].at_ms, at(10, 0, 30) + 1);
    assert!(
        matches!(&expired[0].kind, EventKind::LeaseExpired { epoch: Some(1), value, .. } if value == "A#1")
    );
    assert_eq!(outcome.record.epochs[0].expired_at_ms, Some(at(10, 0, 30) + 1));
}

#[test]
fn at_10_00_31_the_queue_hands_the_job_to_b_which_takes_the_lease_and_token_34() {
    let outcome = fenced();
    let expiry =
        find(outcome, |kind| matches!(kind, EventKind::VisibilityExpired { worker, .. } if *worker == A));
    assert_eq!(expiry[0].at_ms, at(10, 0, 31));
    let delivered = find(
        outcome,
        |kind| matches!(kind, EventKind::JobDelivered { worker, delivery: 2, .. } if *worker == B),
    );
    assert_eq!(delivered[0].at_ms, at(10, 0, 31));
    let granted = find(
        outcome,
        |kind| matches!(kind, EventKind::LeaseGranted { worker, epoch: Some(2), .. } if *worker == B),
    );
    assert_eq!(granted[0].at_ms, at(10, 0, 31));
    let token = find(
        outcome,
        |kind| matches!(kind, EventKind::TokenIssued { worker, token: Token(34), .. } if *worker == B),
    );
    assert_eq!(token[0].at_ms, at(10, 0, 31));
}

#[test]
fn b_finds_r_815_sending_with_fence_33_asks_the_gateway_first_then_claims_it_with_34() {
    let outcome = fenced();
    let selected = find(
        outcome,
        |kind| matches!(kind, EventKind::Step { worker, step: Step::RowsSelected { .. } } if *worker == B),
    );
    assert!(matches!(
        selected[0].kind,
        EventKind::Step { step: Step::RowsSelected { open: 386, sending: 1 }, .. }
    ));
    let lookup = find(
        outcome,
        |kind| matches!(kind, EventKind::Lookup { worker, refund, .. } if *worker == B && *refund == R_815),
    );
    assert!(
        matches!(lookup[0].kind, EventKind::Lookup { found: None, .. }),
        "the gateway has no refund for r_815 yet"
    );
    let claims = find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, refund, write: WriteKind::Claim, .. } if *worker == B && *refund == R_815),
    );
    let EventKind::Write { token, after, .. } = &claims[0].kind else { unreachable!() };
    assert_eq!(*token, Some(Token(34)));
    assert_eq!(after.map(|i| (i.state, i.fence)), Some((RefundState::Sending, 34)));
    assert!(lookup[0].at_ms <= claims[0].at_ms && claims[0].at_ms < at(10, 0, 32));
    let confirm = find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, refund, write: WriteKind::Confirm, rows: 1, .. } if *worker == B && *refund == R_815),
    );
    assert_eq!(confirm.len(), 1);
    assert!(confirm[0].at_ms < at(10, 0, 34));
}

#[test]
fn at_10_00_34_a_gets_b_s_refund_back_and_its_confirm_with_33_is_a_fence_violation() {
    let outcome = fenced();
    let resumed = find(outcome, |kind| matches!(kind, EventKind::Resumed { worker } if *worker == A));
    assert_eq!(resumed[0].at_ms, at(10, 0, 34));

    let b_paid = find(
        outcome,
        |kind| matches!(kind, EventKind::RefundCalled { worker, refund, outcome: CallOutcome::Created, .. } if *worker == B && *refund == R_815),
    );
    let EventKind::RefundCalled { gateway_ref: b_ref, .. } = b_paid[0].kind else { unreachable!() };
    let a_paid = find(
        outcome,
        |kind| matches!(kind, EventKind::RefundCalled { worker, refund, .. } if *worker == A && *refund == R_815),
    );
    assert_eq!(a_paid.len(), 1);
    assert!(
        matches!(a_paid[0].kind, EventKind::RefundCalled { outcome: CallOutcome::Replayed, gateway_ref, .. } if gateway_ref == b_ref)
    );

    let confirm = find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, refund, write: WriteKind::Confirm, .. } if *worker == A && *refund == R_815),
    );
    assert_eq!(confirm.len(), 1);
    assert_eq!(confirm[0].at_ms, at(10, 0, 34));
    assert!(matches!(confirm[0].kind, EventKind::Write { token: Some(Token(33)), rows: 0, after: None, .. }));

    let violation =
        find(outcome, |kind| matches!(kind, EventKind::Step { step: Step::FenceViolation { .. }, .. }));
    assert_eq!(violation.len(), 1, "exactly one fence rejection");
    assert_eq!(violation[0].at_ms, at(10, 0, 34));
    let EventKind::Step { worker, step: Step::FenceViolation { violation: v } } = violation[0].kind else {
        unreachable!()
    };
    assert_eq!((worker, v.refund, v.token, v.write), (A, R_815, Token(33), WriteKind::Confirm));
}

#[test]
fn a_abandons_the_batch_without_claiming_r_816() {
    let outcome = fenced();
    let a_writes_after_stall = find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, refund, .. } if *worker == A && refund.0 > 815),
    );
    assert!(a_writes_after_stall.is_empty());
    let abandoned = find(
        outcome,
        |kind| matches!(kind, EventKind::Step { worker, step: Step::BatchAbandoned { .. } } if *worker == A),
    );
    assert_eq!(abandoned.len(), 1);
    assert_eq!(abandoned[0].at_ms, at(10, 0, 34));
}

#[test]
fn b_finishes_and_the_ledger_holds_1200_refunds_r_815_once_84_300_eur_in_all() {
    let outcome = fenced();
    assert!(outcome.record.settled);
    assert_eq!(outcome.record.ledger.len(), 1200);
    let r815: Vec<_> = outcome.record.ledger.iter().filter(|entry| entry.refund == R_815).collect();
    assert_eq!(r815.len(), 1);
    assert_eq!(r815[0].amount.0, 7025);
    assert_eq!(outcome.record.ledger.iter().map(|entry| entry.amount.0).sum::<i64>(), 8_430_000);
    assert!(outcome.record.final_rows.iter().all(|r| r.state == RefundState::Sent));
    let final_815 = outcome.record.final_rows.iter().find(|r| r.id == R_815).unwrap();
    assert_eq!(final_815.fence, 34);
    let tally = outcome.tally();
    assert_eq!(
        (tally.refunds_sent, tally.gateway_refunds, tally.refunded_cents, tally.fence_rejections),
        (1200, 1200, 8_430_000, 1)
    );
}

#[test]
fn under_the_fence_no_invariant_breaks_and_the_single_holder_diagnostic_shows_the_overlap() {
    let outcome = fenced();
    for check in &outcome.checks {
        assert!(!check.is_violation(), "{}: {:?}", check.invariant, check.breaches.first());
    }
    assert!(outcome.passed());
    assert_eq!(outcome.record.leaked_tasks, 0, "the run ends with no task left behind");
    let holders = outcome.check("single-holder");
    assert_eq!(holders.breaches.len(), 1, "B takes the lease while A still believes it holds it");
    assert_eq!(holders.breaches[0].at_ms, at(10, 0, 31));
}

#[test]
fn with_the_ttl_alone_and_a_non_idempotent_gateway_r_815_is_paid_twice_and_rows_are_confirmed_by_the_wrong_lease(
) {
    let outcome = ttl_only_non_idempotent();
    assert!(!outcome.passed());
    let double = outcome.check("no-double-refund");
    assert!(double.is_violation());
    assert_eq!(double.breaches[0].at_ms, at(10, 0, 34));
    assert!(
        double.breaches[0].detail.starts_with("r_815 was refunded twice"),
        "{}",
        double.breaches[0].detail
    );
    let stale = outcome.check("no-stale-confirm");
    assert!(stale.is_violation());
    assert!(
        stale.breaches[0].detail.contains("last accepted claim was made by"),
        "{}",
        stale.breaches[0].detail
    );
    assert!(outcome.check("monotonic-fences").is_violation());
    assert!(outcome.check("ledger-matches-rows").is_violation());
    let tally = outcome.tally();
    assert!(
        tally.double_refunds > 1 && tally.stale_confirms > 0 && tally.rows_claimed_by_two > 1,
        "{tally:?}"
    );
    assert_eq!(tally.gateway_refunds, 1200 + tally.double_refunds);
    assert!(tally.refunded_cents > 8_430_000);
    assert_eq!(tally.fence_rejections, 0, "nothing turns A away");
    // A woke up and went on writing beside B
    assert!(!find(
        outcome,
        |kind| matches!(kind, EventKind::Write { worker, refund, rows: 1, .. } if *worker == A && refund.0 > 815)
    )
    .is_empty());
}

#[test]
fn with_the_ttl_alone_an_idempotent_gateway_saves_the_money_but_not_the_rows() {
    let outcome = outcome(Mechanism::TtlOnly, GatewayMode::Idempotent);
    let tally = outcome.tally();
    assert_eq!((tally.double_refunds, tally.gateway_refunds, tally.refunded_cents), (0, 1200, 8_430_000));
    assert!(!outcome.check("no-double-refund").is_violation());
    assert!(outcome.check("monotonic-fences").is_violation());
    assert!(outcome.check("no-stale-confirm").is_violation());
}

#[test]
fn the_fence_keeps_a_non_idempotent_gateway_from_paying_r_815_twice_only_if_a_never_calls_it() {
    // A's call for r_815 is the one write the fence cannot see: with a gateway that pays
    // every call, the money leaves twice even though every row stays safe.
    let outcome = outcome(Mechanism::Fenced, GatewayMode::NonIdempotent);
    assert!(outcome.check("no-double-refund").is_violation());
    assert_eq!(outcome.check("no-double-refund").breaches.len(), 1);
    for name in ["no-stale-confirm", "monotonic-fences", "state-machine"] {
        assert!(!outcome.check(name).is_violation(), "{name}");
    }
}

#[test]
fn the_fenced_worked_example_is_the_same_story_whatever_the_seed() {
    let first = fenced().trace_hash;
    for seed in [2, 3, 17, 4471, u64::MAX] {
        let outcome = run(&worked_example(), seed).unwrap();
        assert_eq!(outcome.trace_hash, first, "seed {seed}");
    }
}

/// Post-mortem: a worker whose queue client acks a job as soon as it is delivered (an
/// auto-ack consumer) and then dies mid-batch takes the job with it. The queue has nothing
/// to hand on, the run settles, and before `rows-settled` no invariant said a word: every
/// check was about rows that were written, none about rows nobody came back for.
#[test]
fn a_worker_that_acks_on_delivery_and_crashes_after_r_100_leaves_1_100_refunds_unpaid_and_rows_settled_says_so(
) {
    use fencesim::mutant::Mutant;
    use fencesim::runner::run_planted;
    let crashed = worked_example()
        .to_builder()
        .without_faults()
        .crash_at_step(A, fencesim::model::StepKind::AfterConfirm, 100, 1_000)
        .build();
    let planted = run_planted(&crashed, DEFAULT_SEED, Mutant::AckOnReceive).unwrap();
    let unpaid = planted.record.final_rows.iter().filter(|row| row.state != RefundState::Sent).count();
    assert_eq!(unpaid, 1_100);
    assert!(planted.record.settled, "the job was acked: the queue has nothing left to hand on");
    let check = planted.check("rows-settled");
    assert!(check.is_violation());
    assert_eq!(check.breaches.len(), 1_100);
    assert!(
        check.breaches[0].detail.contains("r_101 of m_4471 is still pending"),
        "{}",
        check.breaches[0].detail
    );
    assert!(check.breaches[0].detail.contains("acked by A"), "{}", check.breaches[0].detail);
    // The same crash with acks after the batch: the job comes back and every refund is paid.
    let right = run(&crashed, DEFAULT_SEED).unwrap();
    assert!(right.check("rows-settled").holds());
    assert!(right.passed(), "{}", right.breach_lines("", false));
    assert_eq!(right.tally().refunds_sent, 1_200);
}

/// The postings of `refund` to the settlement ledger that it took, by whom, with what token.
fn postings(outcome: &Outcome, refund: RefundId) -> Vec<(fencesim::model::WorkerId, Option<Token>, u64)> {
    find(
        outcome,
        |kind| matches!(kind, EventKind::SettlementPosted { refund: r, rows: 1, .. } if *r == refund),
    )
    .iter()
    .map(|event| match event.kind {
        EventKind::SettlementPosted { worker, token, .. } => (worker, token, event.at_ms),
        _ => unreachable!(),
    })
    .collect()
}

/// The article's second act: the batch writes two stores, and the second has no fence.
/// A wakes at 10:00:34, the refund rows turn its confirm away, and by then its posting
/// of r_815 to the settlement ledger has gone through beside B's.
fn two_stores(mechanism: Mechanism) -> Outcome {
    let scenario = worked_example_two_stores().with_mechanism(mechanism, GatewayMode::Idempotent);
    run(&scenario, DEFAULT_SEED).expect("the second act runs")
}

#[test]
fn with_the_second_store_unfenced_a_wakes_and_posts_r_815_a_second_time() {
    let outcome = two_stores(Mechanism::FencedOneStore);
    let posted = postings(&outcome, R_815);
    assert_eq!(
        posted,
        vec![(B, None, at(10, 0, 31) + 30), (A, None, at(10, 0, 34))],
        "B posts, then A again"
    );
    let check = outcome.check("posted-once");
    assert!(check.is_violation(), "{:?}", check.breaches);
    assert!(check.breaches[0].detail.contains("r_815 was posted to the settlement ledger twice"));
    let balance = outcome.check("balance-matches-sent");
    assert!(balance.is_violation(), "the balance is 70.25 EUR over the refunds sent: {:?}", balance.breaches);
    // the first store is as safe as under fenced: r_815 sent once, by B, paid once
    let ledger_ok = outcome.check("ledger-matches-rows");
    assert!(ledger_ok.holds() && outcome.check("no-stale-confirm").holds(), "{ledger_ok:?}");
    let violation = find(
        &outcome,
        |kind| matches!(kind, EventKind::Step { worker, step: Step::FenceViolation { .. } } if *worker == A),
    );
    assert_eq!(violation.len(), 1, "the rows still turn A's confirm away");
}

/// The same act with both stores fenced: B took the ledger's fence with token 34 when its
/// batch began, so A's posting with 33 is turned away, and r_815 is posted once.
#[test]
fn with_both_stores_fenced_a_wakes_and_its_posting_of_r_815_is_turned_away() {
    let outcome = &two_stores(Mechanism::Fenced);
    assert_eq!(postings(outcome, R_815), vec![(B, Some(Token(34)), at(10, 0, 31) + 30)]);
    let turned_away = find(
        outcome,
        |kind| matches!(kind, EventKind::SettlementPosted { worker, refund, token: Some(Token(33)), rows: 0, .. } if *worker == A && *refund == R_815),
    );
    assert_eq!(turned_away.len(), 1);
    assert_eq!(turned_away[0].at_ms, at(10, 0, 34));
    let violation = find(
        outcome,
        |kind| matches!(kind, EventKind::Step { worker, step: Step::SettlementFenceViolation { .. } } if *worker == A),
    );
    assert_eq!(violation.len(), 1, "A abandons at the ledger's fence, before its confirm");
    assert!(outcome.check("posted-once").holds() && outcome.check("balance-matches-sent").holds());
    assert_eq!(outcome.record.settlement_entries.len(), 1200, "one entry per refund");
}
