//! The queue's events, in words: jobs queued, handed out, timed out and acked.

use crate::tell::story::narrator::Narrator;
use fencesim_sim::{Actor, EventKind};

impl Narrator<'_> {
    pub(super) fn queue_event(&mut self, at: u64, kind: &EventKind) {
        let (text, diagram) = match kind {
            EventKind::JobEnqueued { job, merchant } => {
                (format!("{job} is queued: settle every open refund of {merchant}"), vec![])
            }
            EventKind::JobDelivered { job, worker, delivery, .. } => {
                let text = if *delivery == 1 {
                    format!("hands {job} to {worker}")
                } else {
                    format!("hands {job} to {worker} (delivery {delivery})")
                };
                (text, vec![format!("Q->>{worker}: {job}")])
            }
            EventKind::VisibilityExpired { job, worker, .. } => (
                format!(
                    "{worker} has not acked {job} within the visibility timeout: the job is visible again"
                ),
                vec![format!("Note over Q: {worker}'s delivery timed out")],
            ),
            EventKind::JobAcked { job, worker, accepted, .. } => {
                let text = if *accepted {
                    format!("{worker} acks {job}: done")
                } else {
                    format!("refuses {worker}'s ack of {job}: that delivery was handed on")
                };
                (text, vec![format!("{worker}->>Q: ack {job}")])
            }
            // the other components' events are told by their own narrators
            _ => return,
        };
        self.push(at, Actor::Queue, text, diagram)
    }
}
