//! Faults fire where the plan says, and a paused worker is frozen whole.

use fencesim::model::{
    AbandonReason, Cents, GatewayCall, GatewayError, Mechanism, Step, StepKind, WriteKind,
};
use fencesim::runner::run;
use fencesim::scenario::{Scenario, A, B};
use fencesim::sim::{CallOutcome, EventKind, FaultKind, GatewayMode, Hop, Latency, Trigger, WallMs};

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

/// A within trigger counts only the requests inside one operation: under Redlock, A's
/// first such Redis command is its `SET` on the second instance, so the pause lands in the
/// middle of the majority acquisition (one instance granted, the rest not yet asked). Under
/// a single instance no lease operation takes two round trips, and the fault never fires.
#[test]
fn a_within_trigger_lands_inside_an_operation_of_several_round_trips_and_nowhere_else() {
    let scenario = small("within-trigger")
        .fault(
            FaultKind::Pause { worker: A, duration_ms: 50 },
            Trigger::Within { worker: A, hop: Hop::Redis, nth: 1 },
        )
        .build();
    let redlock =
        run(&scenario.clone().with_mechanism(Mechanism::Redlock, GatewayMode::Idempotent), 3).unwrap();
    let events = &redlock.record.events;
    let fired = events
        .iter()
        .position(|event| matches!(event.kind, EventKind::FaultFired { trigger: Trigger::Within { .. }, .. }))
        .expect("the within trigger fires under Redlock");
    let granted_to_a = |range: &[fencesim::sim::Event]| {
        range
            .iter()
            .filter(|event| matches!(event.kind, EventKind::LeaseGranted { worker, .. } if worker == A))
            .map(|event| match event.kind {
                EventKind::LeaseGranted { instance, .. } => instance,
                _ => unreachable!(),
            })
            .collect::<Vec<u8>>()
    };
    assert_eq!(granted_to_a(&events[..fired]), [0], "only the first instance answered before the pause");
    let after: Vec<u8> = granted_to_a(&events[fired..]).into_iter().take(4).collect();
    assert_eq!(after, [1, 2, 3, 4], "the rest of the majority comes after it");
    assert!(events[fired + 1..].iter().any(|event| event.at_ms >= events[fired].at_ms + 50));

    let fenced = run(&scenario.with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent), 3).unwrap();
    let fired_at_all =
        fenced.record.events.iter().any(|event| matches!(event.kind, EventKind::FaultFired { .. }));
    assert!(!fired_at_all, "SET, then a step, then INCR: never two Redis commands in one operation");
}

/// A Redis instance that restarts is down for a while: A's `INCR`, sent right after its
/// lease while the server restarts, is refused, and A gives the batch up with a backend
/// error; the job comes back by the queue and is done. With an instant restart the same
/// `INCR` is answered.
#[test]
fn a_command_sent_while_redis_restarts_is_refused_and_the_batch_given_up() {
    let restart = FaultKind::RedisRestart { instance: 0, persistence: fencesim::sim::Persistence::AofAlways };
    let acquired = Trigger::Step { worker: A, step: StepKind::LeaseAcquired, nth: 1 };
    let run_with_down = |ms: u64| {
        let scenario = small("restart-downtime").redis_restart_ms(ms).fault(restart, acquired).build();
        run(&scenario.with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent), 3).unwrap()
    };
    let down = run_with_down(200);
    let events = &down.record.events;
    let refused = events
        .iter()
        .find(|event| matches!(event.kind, EventKind::RedisRefused { worker, instance: 0 } if worker == A))
        .expect("A's INCR is refused while the server restarts");
    let gave_up = events.iter().any(|event| {
        matches!(&event.kind, EventKind::Step { worker, step: Step::BatchAbandoned { reason: AbandonReason::BackendError } } if *worker == A)
    });
    assert!(gave_up, "A gives the batch up with a backend error");
    assert!(refused.at_ms < 200, "refused while down: {}", refused.at_ms);
    assert!(down.passed(), "{}", down.breach_lines("", false));
    assert_eq!(down.tally().refunds_sent, down.tally().refunds_total, "the job is done in the end");

    let instant = run_with_down(0);
    assert!(!instant.record.events.iter().any(|event| matches!(event.kind, EventKind::RedisRefused { .. })));
}

/// An answer from the database held up on its way back: A's first confirm has run (the
/// row is `sent` at once), and A learns of it 700 ms later, so its next write comes after.
#[test]
fn a_database_answer_held_up_on_its_way_back_lands_before_the_worker_hears_it() {
    let armed = Trigger::Step { worker: A, step: StepKind::AfterGatewayCall, nth: 1 };
    let scenario =
        small("db-reply-delay").fault(FaultKind::DbReplyDelay { worker: A, delay_ms: 700 }, armed).build();
    let outcome =
        run(&scenario.with_mechanism(Mechanism::FencedDbSequence, GatewayMode::Idempotent), 3).unwrap();
    let writes: Vec<(u64, WriteKind)> = outcome
        .record
        .events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Write { worker, write, rows: 1, .. } if worker == A => Some((event.at_ms, write)),
            _ => None,
        })
        .collect();
    let confirm = writes.iter().position(|(_, write)| *write == WriteKind::Confirm).expect("a confirm");
    let (confirmed_at, next_at) = (writes[confirm].0, writes[confirm + 1].0);
    assert!(next_at >= confirmed_at + 700, "confirmed at {confirmed_at}, next write at {next_at}");
    assert!(outcome.passed(), "{}", outcome.breach_lines("", false));
}

/// A frozen after its first payment and before its confirm: B, taking over, finds the
/// row in `sending`, asks the gateway, finds A's refund, and confirms without paying; the
/// story tells the lookup's answer and what B does with it.
#[test]
fn a_lookup_that_finds_the_refund_confirms_without_paying_and_the_story_says_so() {
    let armed = Trigger::Step { worker: A, step: StepKind::AfterGatewayCall, nth: 1 };
    let scenario = small("found").fault(FaultKind::Pause { worker: A, duration_ms: 8_000 }, armed).build();
    let outcome = run(&scenario.with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent), 3).unwrap();
    assert_eq!(lookups(&outcome), [Some(1)], "B finds A's gw#1");
    assert_eq!(outcome.tally().gateway_refunds, 20, "r_001 is paid once");
    let told = fencesim::tell::story::story(&outcome);
    assert!(
        told.iter().any(|line| line.text
            == "B asks the gateway for a refund with reference r_001: gw#1 exists, so B goes on to claim the row and confirm it without paying"),
        "{told:#?}"
    );
    assert!(outcome.passed(), "{}", outcome.breach_lines("", false));
}

/// One worker, three refunds, its first refund call held up `late_ms` on the way.
fn timed_out(late_ms: u64, gateway: GatewayMode) -> fencesim::runner::Outcome {
    let scenario = Scenario::named("timeout")
        .starts_at(WallMs::hms(9, 0, 0))
        .merchant_with_refunds(fencesim::model::MerchantId(7), &[Cents(1_000); 3])
        .lease_ttl_ms(5_000)
        .visibility_timeout_ms(6_000)
        .workers(1)
        .gateway_latency(Latency::flat(30))
        .fault(FaultKind::GatewayTimeout { worker: A, late_ms }, Trigger::At { at_ms: 0 })
        .build();
    run(&scenario.with_mechanism(Mechanism::FencedDbSequence, gateway), 5).unwrap()
}

fn failed_steps(outcome: &fencesim::runner::Outcome) -> Vec<(u64, GatewayCall, GatewayError, u32)> {
    outcome
        .record
        .events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Step { step: Step::GatewayFailed { call, error, attempt, .. }, .. } => {
                Some((event.at_ms, call, error, attempt))
            }
            _ => None,
        })
        .collect()
}

fn lookups(outcome: &fencesim::runner::Outcome) -> Vec<Option<u32>> {
    let found = |event: &fencesim::sim::Event| match event.kind {
        EventKind::Lookup { found, .. } => Some(found),
        _ => None,
    };
    outcome.record.events.iter().filter_map(found).collect()
}

#[test]
fn a_timed_out_refund_that_landed_is_found_by_its_lookup_and_not_paid_again() {
    // lands 10 ms after it left: before the worker's wait of 20 ms and its lookup
    for gateway in GatewayMode::ALL {
        let outcome = timed_out(10, gateway);
        assert_eq!(failed_steps(&outcome), [(30, GatewayCall::Refund, GatewayError::Timeout, 1)]);
        assert_eq!(lookups(&outcome), [Some(1)], "the lookup finds gw#1");
        let told = fencesim::tell::story::story(&outcome);
        assert!(
            told.iter().any(|line| {
                line.text.ends_with(
                "reference r_001: gw#1 exists, so A takes it as its receipt and confirms without paying again"
            )
            }),
            "{gateway}: the story tells what the lookup found: {told:#?}"
        );
        assert_eq!(outcome.tally().gateway_refunds, 3, "{gateway}");
        assert!(outcome.passed(), "{gateway}: {}", outcome.breach_lines("", false));
    }
}

#[test]
fn a_timed_out_refund_that_lands_late_is_one_refund_only_to_a_gateway_that_honours_the_key() {
    // lands 500 ms after it left: the lookup finds nothing, the worker calls again
    let outcome = timed_out(500, GatewayMode::Idempotent);
    assert_eq!(lookups(&outcome), [None]);
    let calls: Vec<CallOutcome> = outcome
        .record
        .events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::RefundCalled { refund, outcome, .. } if refund.0 == 1 => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [CallOutcome::Created, CallOutcome::Replayed],
        "the retry pays, the late call is a replay"
    );
    assert!(outcome.passed(), "{}", outcome.breach_lines("", false));
    // a gateway that ignores the key pays the late call a second time: no worker can help it
    let outcome = timed_out(500, GatewayMode::NonIdempotent);
    assert!(outcome.check("no-double-refund").is_violation());
}

#[test]
fn an_outage_is_waited_out_with_doubling_waits_and_a_longer_one_abandons_the_batch() {
    let outage = |for_ms| {
        let scenario = small("outage")
            .fault(FaultKind::GatewayOutage { for_ms }, Trigger::At { at_ms: 0 })
            .build()
            .with_mechanism(Mechanism::FencedDbSequence, GatewayMode::Idempotent);
        run(&scenario, 5).unwrap()
    };
    // refused at 0, 21 and 62 ms (1 ms to refuse, then waits of 20 and 40 ms); paid at 143
    let short = outage(100);
    let tries: Vec<(u64, u32)> =
        failed_steps(&short).iter().map(|(at, _, _, attempt)| (*at, *attempt)).collect();
    assert_eq!(tries, [(1, 1), (22, 2), (63, 3)]);
    assert!(short.passed(), "{}", short.breach_lines("", false));
    assert_eq!(short.tally().gateway_refunds, 20);
    // four refusals: the batch is given up, the job comes back, and the next batch pays
    let long = outage(1_000);
    let abandoned = long.record.events.iter().any(|event| {
        matches!(
            event.kind,
            EventKind::Step { step: Step::BatchAbandoned { reason: AbandonReason::GatewayUnavailable }, .. }
        )
    });
    assert!(abandoned);
    assert!(long.passed(), "{}", long.breach_lines("", false));
    assert_eq!(long.tally().gateway_refunds, 20);
}

/// A stale holder finishes a row between its successor's select and claim: the successor's
/// claim finds the row `sent` under the older fence. No fence turned it away, and the run
/// counts it apart from a fence rejection; under the article's rule it still gives the
/// batch up.
#[test]
fn a_claim_that_finds_its_row_finished_by_the_older_holder_is_not_counted_as_a_fence_rejection() {
    let scenario = Scenario::named("finished-under-the-successor")
        .starts_at(WallMs::hms(9, 0, 0))
        .merchant_with_refunds(fencesim::model::MerchantId(7), &[Cents(1_000)])
        .lease_ttl_ms(5_000)
        .visibility_timeout_ms(6_000)
        .workers(2)
        .gateway_latency(Latency::flat(100))
        .lookup_latency_ms(2_000)
        .pause_at_step(A, StepKind::AfterGatewayCall, 1, 7_000)
        .build();
    let outcome = run(&scenario, 1).unwrap();
    let steps: Vec<(fencesim::model::WorkerId, Step)> = outcome
        .record
        .events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Step { worker, step } => Some((*worker, *step)),
            _ => None,
        })
        .collect();
    let found: Vec<&Step> = steps
        .iter()
        .filter(|(_, step)| matches!(step, Step::RowAlreadySent { .. }))
        .map(|(_, s)| s)
        .collect();
    assert!(
        matches!(found.as_slice(), [Step::RowAlreadySent { write: WriteKind::Claim, fence: 1, .. }]),
        "{steps:?}"
    );
    assert!(steps.iter().all(|(_, step)| !matches!(step, Step::FenceViolation { .. })), "{steps:?}");
    assert!(steps.contains(&(B, Step::BatchAbandoned { reason: AbandonReason::RowAlreadySent })));
    let tally = outcome.tally();
    assert_eq!((tally.fence_rejections, tally.found_sent, tally.gateway_refunds), (0, 1, 1));
    assert!(outcome.passed(), "{}", outcome.breach_lines("", true));
    assert!(outcome.counts_line().ends_with("0 fence rejection(s), 1 write(s) found the row already sent"));
}

/// Runs, of seeds 1 to `seeds` of `scenario` under `fenced` with no fault at all, in which a
/// lease expired while held, and in which a job was delivered again (a job of a merchant
/// whose lease another job holds waits out its visibility timeout: that one is the queue's
/// design, not a lease running out).
fn expiries_without_faults(scenario: &str, seeds: u64) -> (u64, u64) {
    use fencesim::check::coverage::{Sometimes, Touched};
    use fencesim::scenario::FaultMask;
    let at = |situation| Sometimes::ALL.iter().position(|known| *known == situation).unwrap();
    let (mut expired, mut again) = (0, 0);
    for seed in 1..=seeds {
        let built = fencesim::scenario::build(
            scenario,
            seed,
            Mechanism::Fenced,
            GatewayMode::Idempotent,
            FaultMask::NONE,
        )
        .unwrap();
        assert!(built.world.faults.faults.is_empty());
        let outcome = run(&built, seed).unwrap();
        let touched = Touched::scan(&outcome.record, &outcome.scenario.world, |_| {});
        expired += u64::from(touched.sometimes.contains(at(Sometimes::LeaseExpiredWhileHeld)));
        again += u64::from(touched.sometimes.contains(at(Sometimes::JobDeliveredAgain)));
    }
    (expired, again)
}

#[test]
fn a_production_world_sizes_its_lease_and_visibility_timeout_so_that_only_a_fault_ends_them() {
    let seeds = 300;
    let (expired, again) = expiries_without_faults("production", seeds);
    assert_eq!(expired, 0, "production: {expired} runs of {seeds} had a lease expire ({again} a job again)");
    // the random world, as drawn, lets most leases run out under their batches
    let (expired, again) = expiries_without_faults("random", seeds);
    assert!(expired * 3 > seeds, "random: {expired} expired, {again} again");
}
