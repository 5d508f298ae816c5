//! The gateway's events, in words: lookups by reference, and refund calls that pay, pay
//! again, replay an earlier refund or meet a conflict.

use crate::tell::story::narrator::{Narrator, RunKind};
use fencesim_model::GatewayRef;
use fencesim_sim::{Actor, CallOutcome, EventKind};

impl Narrator<'_> {
    pub(super) fn gateway_event(&mut self, at: u64, kind: &EventKind) {
        match kind {
            EventKind::Lookup { worker, refund, found } => {
                let answer = match found {
                    Some(number) => format!("{} exists", GatewayRef(*number)),
                    None => "none".to_owned(),
                };
                self.push(
                    at,
                    Actor::Gateway,
                    format!("{worker} asks for a refund with reference {refund}: {answer}"),
                    vec![format!("{worker}->>G: find {refund}"), format!("G-->>{worker}: {answer}")],
                )
            }
            EventKind::RefundCalled { .. } => self.refund_called(at, kind),
            EventKind::GatewayRefused { worker, refund, call } => self.push(
                at,
                Actor::Gateway,
                format!("{worker}'s {call} for {refund} is refused: the gateway is down, nothing moves"),
                vec![format!("{worker}->>G: {call} {refund}"), format!("G-->>{worker}: unavailable")],
            ),
            EventKind::RefundTimedOut { worker, refund, lands_at_ms } => self.push(
                at,
                Actor::Gateway,
                format!(
                    "{worker} pays {refund}, and the call is held up on the way: {worker} will hear nothing, and the call lands at {}",
                    self.wall(*lands_at_ms)
                ),
                vec![format!("{worker}-)G: refund {refund} (held up)")],
            ),
            // the other components' events are told by their own narrators
            _ => {}
        }
    }

    fn refund_called(&mut self, at: u64, kind: &EventKind) {
        let EventKind::RefundCalled { worker, refund, amount, outcome, gateway_ref, response_lost, .. } =
            kind
        else {
            return;
        };
        if self.plain.contains(refund) {
            self.fold(at, *worker, RunKind::Settled, *refund, false);
            return;
        }
        let gateway_ref = GatewayRef(*gateway_ref);
        let times_paid = self.paid.entry(*refund).or_default();
        if *outcome == CallOutcome::Created {
            *times_paid += 1;
        }
        let text = match (outcome, *times_paid) {
            (CallOutcome::Created, 1) => format!("{worker} pays {refund}: {amount} leaves ({gateway_ref})"),
            (CallOutcome::Created, _) => {
                format!("{worker} pays {refund} again: a second {amount} leaves ({gateway_ref})")
            }
            (CallOutcome::Replayed, _) => format!(
                "{worker} pays {refund} with idempotency key {refund}: the gateway returns {gateway_ref} and moves no money"
            ),
            (CallOutcome::Conflict, _) => {
                format!("{worker} pays {refund}: conflict, a call with that key is still in flight")
            }
        };
        let text = if *response_lost { format!("{text}; the answer is lost on the way back") } else { text };
        let reply = match (outcome, response_lost) {
            (_, true) => "(lost)".to_owned(),
            (CallOutcome::Created, _) => format!("{gateway_ref}, {amount}"),
            (CallOutcome::Replayed, _) => format!("existing {gateway_ref}"),
            (CallOutcome::Conflict, _) => "conflict".to_owned(),
        };
        self.push(
            at,
            Actor::Gateway,
            text,
            vec![format!("{worker}->>G: refund {refund}, key {refund}"), format!("G-->>{worker}: {reply}")],
        )
    }
}
