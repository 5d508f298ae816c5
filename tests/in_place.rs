//! A wait the runtime would give straight back is answered in place (docs/request-path.md):
//! the run is the run it was, to the trace's hash, the verdict and the runtime's random
//! stream after it, on seeds of the random, production and worked-example worlds of every
//! mechanism and gateway; and in the worlds where waits may be answered so (no renewal
//! beside the batch), most are.

use fencesim::model::Mechanism;
use fencesim::runner::{run, Outcome};
use fencesim::scenario::{build, FaultMask};
use fencesim::sim::readiness::set_in_place;
use fencesim::sim::GatewayMode;
use std::collections::BTreeMap;

/// Seeds of each world per mechanism and gateway.
const SEEDS: u64 = 40;

fn both(name: &str, seed: u64, mechanism: Mechanism, gateway: GatewayMode) -> (Outcome, Outcome) {
    let scenario = build(name, seed, mechanism, gateway, FaultMask::ALL).unwrap();
    set_in_place(false);
    let waited = run(&scenario, seed).unwrap();
    set_in_place(true);
    let answered = run(&scenario, seed).unwrap();
    (waited, answered)
}

fn verdict(outcome: &Outcome) -> Vec<&'static str> {
    outcome.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant).collect()
}

#[test]
fn a_run_whose_waits_are_answered_in_place_is_the_run_it_was() {
    // per mechanism: waits answered in place, and waits in all
    let mut tally: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for mechanism in Mechanism::ALL {
        for gateway in GatewayMode::ALL {
            let worlds = (1..=SEEDS)
                .flat_map(|seed| [("random", seed), ("production", seed)])
                .chain([("worked-example", 1)]);
            for (name, seed) in worlds {
                let (waited, answered) = both(name, seed, mechanism, gateway);
                let at = format!("{name} seed {seed} {mechanism} {gateway}");
                assert_eq!(waited.trace_hash, answered.trace_hash, "{at}: the trace");
                assert_eq!(verdict(&waited), verdict(&answered), "{at}: the verdict");
                assert_eq!(waited.record.stream_after, answered.record.stream_after, "{at}: the draws");
                assert_eq!(waited.record.in_place, 0, "{at}: turned off, none answered in place");
                let (timer, in_place) = (answered.record.sleeps, answered.record.in_place);
                assert_eq!(waited.record.sleeps, timer + in_place, "{at}: every wait is one or the other");
                let counts = tally.entry(mechanism.name()).or_default();
                counts.0 += in_place;
                counts.1 += timer + in_place;
            }
        }
    }
    for mechanism in Mechanism::ALL {
        let (in_place, waits) = tally[mechanism.name()];
        eprintln!("{mechanism}: {in_place} of {waits} waits answered in place");
        match mechanism.spec().renewals_per_ttl {
            0 => assert!(2 * in_place > waits, "{mechanism}: {in_place} of {waits} waits answered in place"),
            _ => assert_eq!(in_place, 0, "{mechanism} renews beside its batch: none in place"),
        }
    }
}
