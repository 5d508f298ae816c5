//! Bugs found once stay found: each is a named test with a short post-mortem.

use fencesim::files::replay_file::ReplayFile;
use fencesim::model::{Step, WorkerId};
use fencesim::runner::{run, run_with};
use fencesim::sim::EventKind;

/// Replays a committed file; it must still replay to the hash it was saved with (a new
/// event or fault kind placed anywhere but last would change every hash).
fn replay(name: &str) -> fencesim::runner::Outcome {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions").join(name);
    let file = ReplayFile::load(&path).unwrap();
    let outcome = run(&file.scenario().unwrap(), file.seed).unwrap();
    assert_eq!(
        format!("{:016x}", outcome.trace_hash),
        file.expected_trace_hash,
        "{name} replays to its hash"
    );
    outcome
}

/// Post-mortem. Found by `explore --mechanism fenced-db-sequence` at seed 38. Worker E's
/// request for its token was held up on its way to the database (a db-delay fault) for
/// longer than its lease lived. Meanwhile the lease expired and C took it with token 61;
/// then E's request landed and drew 62. E, whose lease was gone, now held the newest
/// token: its claim of r_062 was accepted over C's and the row went back to an older
/// lease (monotonic-fences). The fence was doing its job; the protocol was not, because
/// tokens only rise in the order leases were granted if each is issued while its lease
/// is live. Fix: after taking its token the worker checks once that the lease is still
/// its own, and abandons the batch if not. The file stores the plan, not the seed, so it
/// keeps its meaning when the generator changes.
#[test]
fn a_token_drawn_after_the_lease_expired_is_never_used() {
    let outcome = replay("token-drawn-after-the-lease-expired.json");
    assert!(
        outcome.passed(),
        "{:?}",
        outcome
            .checks
            .iter()
            .filter(|check| check.is_violation())
            .map(|check| &check.breaches[0])
            .collect::<Vec<_>>()
    );
    // the stale holder noticed, right after its token, and stopped
    let noticed = outcome.record.events.iter().any(|event| {
        matches!(
            event.kind,
            EventKind::Step { worker: WorkerId(4), step: Step::LeaseChecked { refund: None, held: false } }
        )
    });
    assert!(noticed, "worker E's check after its token found its lease gone");
}

/// Post-mortem. Found by the false-alarm run of `redlock-fenced` (seed 51914 of 100,000)
/// once the random scenario drew faults inside lease operations. A took a majority
/// (instances 2, 3 and 4) and froze for a millisecond; instance 3 let A's key expire early
/// (a clock shift), and B took a majority of its own (1, 3 and 5) and a token, and claimed
/// r_001. A then drew the next token, larger than B's, and its check after the token
/// passed: under Redlock that check judged A's validity on A's own clock, which still had
/// time left. A's claim overtook B's and the row went back to an older lease
/// (monotonic-fences, token-order). Fix: the check after the token asks the instances
/// (`LeaseStore::confirm_held`, a majority of `GET`s), whatever the mechanism; the
/// validity on the worker's clock stays what Redlock checks before each write. The file
/// stores the plan, not the seed.
#[test]
fn a_redlock_token_drawn_after_the_majority_was_lost_is_never_used() {
    let outcome = replay("redlock-token-drawn-after-the-majority-was-lost.json");
    assert!(outcome.passed(), "{}", outcome.breach_lines("", true));
    let noticed = outcome.record.events.iter().any(|event| {
        matches!(
            event.kind,
            EventKind::Step { worker: WorkerId(0), step: Step::LeaseChecked { refund: None, held: false } }
        )
    });
    assert!(noticed, "A's check after its token found its majority gone");
}

/// Post-mortem. Found by the false-alarm run of `redlock-fenced` (seed 9406 of 100,000)
/// once refunds arrived while batches ran. Four jobs of one merchant timed out in the
/// queue together and were handed out in the same millisecond, every 3.5 s: each worker
/// asked the five instances in turn, each instance granted the first to ask, and the
/// votes split 2-1-1-1. Nobody had a majority, everyone gave the key back, and the queue
/// handed the four jobs out together again, round after round until the settle bound ran
/// out (`progress`). The algorithm asks a client whose vote failed to try again after a
/// random delay; the lease client now does, after a split vote, with a delay drawn from
/// the lease's value (`split_vote_delay_ms`), so that contenders come back apart.
#[test]
fn contenders_whose_votes_split_come_back_apart() {
    let outcome = replay("redlock-split-votes-come-back-together.json");
    assert!(outcome.passed(), "{}", outcome.breach_lines("", true));
    assert!(outcome.record.settled);
    // some acquisition gave back what its split vote had won, and a later round of the
    // same acquisition (the same lease value) took a majority
    let events = &outcome.record.events;
    let retried_and_won = events.iter().enumerate().any(|(at, event)| {
        let EventKind::LeaseGranted { value, epoch: None, .. } = &event.kind else { return false };
        let given_back = events[at..].iter().position(|later| {
            matches!(&later.kind, EventKind::LeaseReleased { value: v, deleted: true, .. } if v == value)
        });
        given_back.is_some_and(|back| {
            events[at + back..].iter().any(|later| {
                matches!(&later.kind, EventKind::LeaseGranted { value: v, epoch: Some(_), .. } if v == value)
            })
        })
    });
    assert!(retried_and_won, "a split vote was tried again and won");
}

/// Post-mortem. Found by a guided search started from plans another search had kept,
/// with `shared-lock-value` planted (every worker's lease value the same). A `SET NX` that
/// the live key refused was logged with that key, as every write of the last second is
/// for a restart to undo; the key then expired, another worker took the lease, and Redis
/// restarted with its append-only file flushed every second. Undoing the refused `SET NX`
/// put the expired key back, past its deadline, and it expired a second time, stamped at
/// its old deadline, before the restart: out of time order in the history, and, with the
/// values alike, charged to the lease granted after it, which then "ended before it
/// began" and stopped the simulation. With unique values the same double expiry had been
/// counted in every such run (`a lease expired while held` fell from 7,223 to 7,185 runs
/// of the matrix's 9,600). Fix: a key the file brings back past its deadline is gone as
/// the server loads it (`RedisCore::restart`).
#[test]
fn a_key_brought_back_by_a_restart_past_its_deadline_does_not_expire_again() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/regressions/expired-key-back-from-a-restart.json");
    let file = ReplayFile::load(&path).unwrap();
    let outcome = run_with(&file.scenario().unwrap(), file.seed, file.mutant).unwrap();
    assert_eq!(format!("{:016x}", outcome.trace_hash), file.expected_trace_hash);
    let events = &outcome.record.events;
    let restart = events
        .iter()
        .position(|event| matches!(event.kind, EventKind::RedisRestarted { .. }))
        .expect("Redis restarts");
    let expired_after =
        events[restart..].iter().filter(|event| matches!(event.kind, EventKind::LeaseExpired { .. }));
    for event in expired_after {
        assert!(event.at_ms >= events[restart].at_ms, "an expiry stamped before the restart: {event:?}");
    }
    assert!(events.windows(2).all(|pair| pair[0].at_ms <= pair[1].at_ms), "the history is in time order");
}
