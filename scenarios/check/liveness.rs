//! Liveness: once the faults are over, every job completes within the settle bound; a
//! stall is reported with its cause.

use crate::check::facts::{Breach, Facts};
use fencesim_model::{RefundState, Step};
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
                event: None,
                detail: format!(
                    "{} for {} was not done {} ms after the last fault ({} deliveries); {cause}",
                    job.id, job.merchant, facts.world.settle_ms, deliveries
                ),
            });
        }
    }
    breaches
}

/// rows-settled, at rest: every refund row is `sent` at the end, or its job is still open
/// (and progress names the stall). A row left unsent behind an acked job is dropped work:
/// an ack proves nothing about the rows.
///
/// What it misses: a row paid at the gateway but never confirmed while its job is still
/// open (progress reports the job, not the row).
pub fn rows_settled(facts: &Facts<'_>) -> Vec<Breach> {
    let open: Vec<_> = facts.record.open_jobs.iter().map(|(job, _)| job.merchant).collect();
    let mut breaches = Vec::new();
    for row in facts.record.final_rows.iter().filter(|row| row.state != RefundState::Sent) {
        if open.contains(&row.merchant) {
            continue;
        }
        let acked = facts.record.events.iter().rev().find_map(|event| match &event.kind {
            EventKind::JobAcked { job, worker, accepted: true, .. }
                if facts.world.all_jobs().any(|j| j.id == *job && j.merchant == row.merchant) =>
            {
                Some(format!("its job was acked by {worker} at {}", facts.at(event.at_ms)))
            }
            _ => None,
        });
        let why = acked.unwrap_or_else(|| "no job for its merchant is open".to_owned());
        breaches.push(Breach {
            at_ms: facts.record.ended_at_ms,
            event: None,
            detail: format!(
                "{} of {} is still {} at the end, and {why}: nobody will pay it",
                row.id, row.merchant, row.state
            ),
        });
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
        None => last_abandon(facts),
    }
}

/// The last batch given up, and why, as a stall's cause.
fn last_abandon(facts: &Facts<'_>) -> String {
    let last = facts.record.events.iter().rev().find_map(|event| match &event.kind {
        EventKind::Step { worker, step: Step::BatchAbandoned { reason } } => {
            Some((event.at_ms, *worker, *reason))
        }
        _ => None,
    });
    let mut refused = facts.record.events.iter().filter_map(|event| match &event.kind {
        EventKind::StatementFailed { worker, statement, message } => Some((*worker, statement, message)),
        _ => None,
    });
    let database = match (refused.clone().count(), refused.next_back()) {
        (0, _) | (_, None) => String::new(),
        (count, Some((worker, statement, message))) => {
            format!("; the database refused {count} statement(s), the last {worker}'s {statement}: {message}")
        }
    };
    match last {
        Some((at, worker, reason)) => {
            format!("cause: the last batch was given up at {} by {worker}: {reason}{database}", facts.at(at))
        }
        None => "cause: no worker finished a batch, and none gave one up".to_owned(),
    }
}
