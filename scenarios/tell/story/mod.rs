//! Tells a run in words: each notable event a line, and the routine rhythm of a worker
//! settling row after row folded into one line. Each component's events are told in a
//! file of their own; the same lines drive the sequence diagram.

mod faults;
mod gateway;
mod lease;
mod narrator;
mod queue;
mod repeats;
mod rhythm;
mod settlement;
mod store;
mod worker;

pub use narrator::Line;
pub(crate) use rhythm::plain_rows;

use crate::runner::Outcome;
use fencesim_sim::{Event, EventKind};
use narrator::Narrator;
use std::fmt::Write as _;

impl Narrator<'_> {
    /// Hands each event to the narrator of the component it happened in.
    fn event(&mut self, event: &Event) {
        let at = event.at_ms;
        let kind = &event.kind;
        match kind {
            EventKind::JobEnqueued { .. }
            | EventKind::JobDelivered { .. }
            | EventKind::VisibilityExpired { .. }
            | EventKind::JobAcked { .. } => self.queue_event(at, kind),
            EventKind::LeaseGranted { .. }
            | EventKind::LeaseRefused { .. }
            | EventKind::LeaseExpired { .. }
            | EventKind::LeaseReleased { .. }
            | EventKind::LeaseDeleted { .. }
            | EventKind::LeaseExtended { .. }
            | EventKind::LeaseRearmed { .. }
            | EventKind::LeaseRead { .. }
            | EventKind::LeaseSet { .. }
            | EventKind::CounterSeeded { .. }
            | EventKind::RedisRestarted { .. }
            | EventKind::RedisFailedOver { .. }
            | EventKind::ReplicaWaited { .. }
            | EventKind::RedisRefused { .. }
            | EventKind::ScriptFailed { .. }
            | EventKind::TokenIssued { .. } => self.redis_event(at, kind),
            EventKind::Write { .. }
            | EventKind::RefundsArrived { .. }
            | EventKind::StatementFailed { .. } => self.store_event(at, kind),
            EventKind::Lookup { .. }
            | EventKind::LookupBehind { .. }
            | EventKind::RefundCalled { .. }
            | EventKind::GatewayRefused { .. }
            | EventKind::RefundTimedOut { .. } => self.gateway_event(at, kind),
            EventKind::Step { worker, step } => self.step(at, *worker, step),
            EventKind::FaultFired { .. } | EventKind::Restarted { .. } | EventKind::Resumed { .. } => {
                self.fault_event(at, kind)
            }
            EventKind::SettlementEnrolled { .. }
            | EventKind::SettlementPosted { .. }
            | EventKind::SettlementLookup { .. } => self.settlement_event(at, kind),
        }
    }
}

/// The run as lines, routine stretches and idle repeats folded.
pub fn story(outcome: &Outcome) -> Vec<Line> {
    let mut narrator = Narrator::new(outcome, rhythm::plain_rows(&outcome.record.events));
    for (index, event) in outcome.record.events.iter().enumerate() {
        narrator.current = index;
        narrator.event(event);
    }
    narrator.close_fold();
    repeats::fold_repeats(outcome, narrator.lines)
}

/// The story as text, one line per event: `10:00:26.000  store    A claims r_815 ...`.
pub fn render_story(outcome: &Outcome, lines: &[Line], limit: usize) -> String {
    let mut out = String::new();
    for line in lines.iter().take(limit) {
        let _ = writeln!(out, "{}  {:<8} {}", outcome.scenario.base.plus(line.at_ms), line.actor, line.text);
    }
    if lines.len() > limit {
        let _ = writeln!(out, "... and {} more lines", lines.len() - limit);
    }
    out
}
