//! What the runtime's timer costs: one wait on it (the timer set, the wake, the task polled
//! again), measured on a bare runtime with nothing else in it, so that the bench can price
//! the waits a run made (`RunRecord::sleeps`) as it prices the scripts the run sent. Every
//! latency a simulated request waits out is one such wait, so this is the part of a run's
//! cost that no change to the simulation's own code can take away while each request waits
//! out its latency on the runtime's clock.

use std::time::{Duration, Instant};

/// Tasks waiting at once, as a world's few workers do.
const TASKS: u64 = 4;

/// Nanoseconds one wait on the runtime's timer takes on a bare runtime: `TASKS` tasks each
/// waiting a millisecond at a time, `waits` waits in all; the best of three.
pub fn sleep_ns(waits: u64) -> f64 {
    let per_task = (waits / TASKS).max(1);
    let mut best = f64::MAX;
    for seed in 0..3 {
        let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
        let clock = Instant::now();
        runtime.block_on(async move {
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    madsim::task::spawn(async move {
                        for _ in 0..per_task {
                            madsim::time::sleep(Duration::from_millis(1)).await;
                        }
                    })
                })
                .collect();
            for task in tasks {
                let _ = task.await;
            }
        });
        best = best.min(clock.elapsed().as_secs_f64() * 1e9 / (per_task * TASKS) as f64);
    }
    best
}

#[cfg(test)]
mod tests {
    use crate::runner::{run, DEFAULT_SEED};
    use crate::scenario::worked_example;
    use fencesim_model::Mechanism;
    use fencesim_sim::{EventKind, GatewayMode};

    #[test]
    fn the_worked_examples_waits_are_its_gateway_calls_as_its_stores_answer_at_once() {
        let scenario = worked_example().with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent);
        assert_eq!((scenario.world.db_latency_ms, scenario.world.redis_latency_ms), (0, 0));
        let record = run(&scenario, DEFAULT_SEED).expect("the worked example runs").record;
        let calls = record.events.iter().filter(|e| matches!(e.kind, EventKind::RefundCalled { .. })).count();
        assert!(calls > 1_000, "{calls}");
        assert_eq!(record.sleeps, calls as u64, "one wait on the timer per gateway call");
    }

    #[test]
    fn a_wait_is_priced_from_the_waits_made() {
        let ns = super::sleep_ns(4_000);
        assert!(ns.is_finite() && ns > 1.0, "{ns}");
    }
}
