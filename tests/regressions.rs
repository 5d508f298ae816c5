//! Bugs found once stay found: each is a named test with a short post-mortem.

use fencesim::model::{Step, WorkerId};
use fencesim::runner::run;
use fencesim::sim::EventKind;
use fencesim::tell::replay_file::ReplayFile;

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
