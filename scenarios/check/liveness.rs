//! Liveness: once the faults are over, every job completes within the settle bound; a
//! stall is reported with its cause.

use crate::check::facts::{Breach, Facts};
use fencesim_model::Step;
use fencesim_sim::EventKind;

/// progress, once healed: every job completes within the settle bound after the last
/// fault; a stall is reported with its cause.
pub fn progress(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    if !facts.record.settled {
        let cause = stall_cause(facts);
        for (job, deliveries) in &facts.record.open_jobs {
            breaches.push(Breach {
                at_ms: facts.record.ended_at_ms,
                detail: format!(
                    "{} for {} was not done {} ms after the last fault ({} deliveries); {cause}",
                    job.id, job.merchant, facts.world.settle_ms, deliveries
                ),
            });
        }
    }
    breaches
}

fn stall_cause(facts: &Facts<'_>) -> String {
    let last_violation = facts.record.events.iter().rev().find_map(|event| match &event.kind {
        EventKind::Step { worker, step: Step::FenceViolation { violation } } => {
            Some((event.at_ms, *worker, *violation))
        }
        _ => None,
    });
    match last_violation {
        Some((at, worker, violation)) => {
            let stored = facts
                .record
                .final_rows
                .iter()
                .find(|row| row.id == violation.refund)
                .map_or(0, |row| row.fence);
            format!(
                "cause: every attempt is turned away, last at {} when {worker}'s {} of {} with token {} updated 0 rows (stored fence {stored})",
                facts.at(at),
                violation.write,
                violation.refund,
                violation.token
            )
        }
        None => "cause: no worker finished a batch (no fence violation was recorded)".to_owned(),
    }
}
