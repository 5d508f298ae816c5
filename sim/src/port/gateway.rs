//! The payment gateway as a worker reaches it: lookups by reference and refund calls, with
//! the latency, lost responses and conflicts that faults arm.

use super::Link;
use crate::fault::Hop;
use crate::gateway::CallOutcome;
use crate::history::EventKind;
use fencesim_model::{Cents, Gateway, GatewayError, IdempotencyKey, Receipt, RefundId};

#[derive(Clone)]
pub struct GatewayClient(pub(crate) Link);

impl Gateway for GatewayClient {
    async fn find(&self, reference: RefundId) -> Result<Option<Receipt>, GatewayError> {
        self.0.request(Hop::Gateway).await;
        let Link { world, worker } = &self.0;
        world.clock.sleep_ms(world.config.lookup_latency_ms).await;
        let mut state = world.lock();
        let now = world.clock.now_ms();
        let found = state.gateway.find(reference);
        let kind =
            EventKind::Lookup { worker: *worker, refund: reference, found: found.map(|r| r.gateway_ref) };
        state.record(now, kind);
        Ok(found)
    }

    async fn refund(
        &self,
        reference: RefundId,
        key: IdempotencyKey,
        amount: Cents,
    ) -> Result<Receipt, GatewayError> {
        self.0.request(Hop::Gateway).await;
        let Link { world, worker } = &self.0;
        let (respond_at, reply) = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let extra_ms = state.faults.take_delay(*worker, Hop::Gateway);
            let latency = world.config.refund_latency.of(reference) + extra_ms;
            let refuse = now < state.faults.conflicts_until_ms;
            let reply = state.gateway.refund(reference, key, amount, now, latency, refuse);
            let lost = reply.outcome != CallOutcome::Conflict && {
                let armed = &mut state.faults.armed[worker.0 as usize];
                let lost = armed.lost_responses > 0;
                armed.lost_responses = armed.lost_responses.saturating_sub(1);
                lost
            };
            let epoch = state.ledger.current(*worker);
            let kind = EventKind::RefundCalled {
                worker: *worker,
                epoch,
                refund: reference,
                amount,
                outcome: reply.outcome,
                gateway_ref: reply.receipt.gateway_ref,
                response_lost: lost,
            };
            state.record(now, kind);
            let result = match (reply.outcome, lost) {
                (CallOutcome::Conflict, _) => Err(GatewayError::Conflict),
                (CallOutcome::Created | CallOutcome::Replayed, true) => {
                    Err(GatewayError::Unavailable("the response was lost".to_owned()))
                }
                (CallOutcome::Created | CallOutcome::Replayed, false) => Ok(reply.receipt),
            };
            (reply.respond_at_ms, result)
        };
        world.clock.sleep_until_ms(respond_at).await;
        reply
    }
}
