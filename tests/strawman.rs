//! Every mechanism checked for a strawman: run with no fault at all over many random
//! worlds (idempotent gateway), a mechanism breaks nothing, or its spec names the weakness
//! a batch that outlasts its TTL shows by itself, and that weakness does show. A mechanism
//! that broke without faults and did not say so would be a bug in its model, or a claim
//! the matrix measures against a mechanism nobody would run.

use fencesim::model::Mechanism;
use fencesim::scenario::FaultMask;
use fencesim::search::explore::{run_seed, run_seeds};
use fencesim::search::pool::Pool;
use fencesim::search::seeds::SeedRange;
use fencesim::sim::GatewayMode;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// Seeds of the random world, no fault in any of them.
const SEEDS: u64 = 500;

/// The seeds among `SEEDS` that break some invariant under `mechanism` with no fault, and
/// which invariants they break (how many seeds each).
fn fault_free(mechanism: Mechanism) -> (u64, BTreeMap<&'static str, u64>) {
    let never = AtomicBool::new(false);
    let (mut failing, mut broken) = (0, BTreeMap::new());
    run_seeds(
        &Pool { jobs: 2, interrupted: &never },
        SeedRange::first(SEEDS).unwrap(),
        false,
        |seed| run_seed("random", seed, mechanism, GatewayMode::Idempotent, FaultMask::NONE, None),
        |_| {},
        |result| {
            failing += u64::from(!result.violations.is_empty());
            for invariant in result.violations {
                *broken.entry(invariant).or_default() += 1;
            }
        },
    )
    .unwrap();
    (failing, broken)
}

#[test]
fn with_no_fault_a_mechanism_breaks_nothing_or_says_what_it_breaks() {
    for mechanism in Mechanism::ALL {
        let (failing, broken) = fault_free(mechanism);
        match mechanism.spec().without_faults {
            None => assert_eq!(
                failing, 0,
                "{mechanism} breaks {broken:?} with no fault at all: a bug in its model, or a weakness \
                 its spec must name"
            ),
            Some(weakness) => assert!(
                failing > 0,
                "{mechanism} names a weakness without faults ({weakness}) that {SEEDS} seeds never show"
            ),
        }
    }
}
