//! The gateway's events, in words: lookups by reference, and refund calls that pay, pay
//! again, replay an earlier refund or meet a conflict.

use crate::tell::story::narrator::{fmt_ms, Narrator, RunKind};
use fencesim_model::{GatewayRef, RefundId, WorkerId};
use fencesim_sim::{Actor, CallOutcome, EventKind};

impl Narrator<'_> {
    pub(super) fn gateway_event(&mut self, at: u64, kind: &EventKind) {
        match kind {
            EventKind::Lookup { worker, refund, found } => self.lookup(at, *worker, *refund, *found),
            EventKind::LookupBehind { worker, refund, gateway_ref, paid_at_ms, behind_ms } => self.push(
                at,
                Actor::Gateway,
                format!(
                    "the lookup lied: it was answered from a copy {} ms behind the ledger, which has {} for {refund} since {}",
                    fmt_ms(*behind_ms),
                    GatewayRef(*gateway_ref),
                    self.wall(*paid_at_ms)
                ),
                vec![format!("Note over G,{worker}: the copy is {} ms behind", fmt_ms(*behind_ms))],
            ),
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

    /// A lookup by reference: before the claim of a row found in `sending`, or after a
    /// refund call that timed out (the row is then this worker's last claim).
    fn lookup(&mut self, at: u64, worker: WorkerId, refund: RefundId, found: Option<u32>) {
        let after_timeout = self.claimed.get(&worker) == Some(&refund);
        let answer = match found {
            Some(number) => format!("{} exists", GatewayRef(number)),
            None => "none".to_owned(),
        };
        let then = match (found, after_timeout) {
            (Some(_), false) => format!("so {worker} goes on to claim the row and confirm it without paying"),
            (None, false) => format!("so {worker} goes on to claim the row and pay it"),
            (Some(_), true) => {
                format!("so {worker} takes it as its receipt and confirms without paying again")
            }
            (None, true) => format!("so {worker} calls again with the same idempotency key"),
        };
        self.push(
            at,
            Actor::Gateway,
            format!("{worker} asks the gateway for a refund with reference {refund}: {answer}, {then}"),
            vec![format!("{worker}->>G: find {refund}"), format!("G-->>{worker}: {answer}")],
        )
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
