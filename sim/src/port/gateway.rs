//! The payment gateway as a worker reaches it: lookups by reference and refund calls, with
//! the latency, outages, timeouts, lost answers and conflicts that faults arm.

use super::Link;
use crate::fault::Hop;
use crate::gateway::CallReply;
use crate::history::{CallOutcome, EventKind};
use crate::world::{RefundCall, State, World};
use fencesim_model::{
    Cents, Gateway, GatewayCall, GatewayError, IdempotencyKey, Receipt, RefundId, WorkerId,
};

#[derive(Clone)]
pub struct GatewayClient(pub(crate) Link);

/// How long an outage takes to refuse a request.
const REFUSAL_MS: u64 = 1;

impl Gateway for GatewayClient {
    async fn find(&self, reference: RefundId) -> Result<Option<Receipt>, GatewayError> {
        self.0.request(Hop::Gateway).await;
        let Link { world, worker } = &self.0;
        if world.refused(*worker, reference, GatewayCall::Lookup) {
            world.clock.sleep_ms(REFUSAL_MS).await;
            return Err(GatewayError::Unavailable);
        }
        world.clock.sleep_ms(world.config.lookup_latency_ms).await;
        let mut state = world.lock();
        let now = world.clock.now_ms();
        let horizon = state.faults.lookup.horizon(now, world.config.lookup_lag_ms);
        let (found, told) = state.gateway.look_up(*worker, reference, now, horizon);
        for kind in told {
            state.record(now, kind);
        }
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
        if world.refused(*worker, reference, GatewayCall::Refund) {
            world.clock.sleep_ms(REFUSAL_MS).await;
            return Err(GatewayError::Unavailable);
        }
        let (respond_at, reply) = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let extra_ms = state.faults.take_delay(*worker, Hop::Gateway);
            let latency = world.config.refund_latency.of(reference) + extra_ms;
            let call = RefundCall {
                lands_at_ms: now,
                worker: *worker,
                epoch: state.ledger.current(*worker),
                reference,
                key,
                amount,
                latency_ms: latency,
            };
            match state.faults.armed[worker.0 as usize].late_ms.take() {
                Some(late_ms) => (now + latency, world.send_late(&mut state, call, late_ms)),
                None => world.call_gateway(&mut state, call),
            }
        };
        world.clock.sleep_until_ms(respond_at).await;
        reply
    }
}

impl World {
    /// During an outage the gateway refuses the request at once; records it if so.
    fn refused(&self, worker: WorkerId, refund: RefundId, call: GatewayCall) -> bool {
        let mut state = self.lock();
        let now = self.clock.now_ms();
        let refused = now < state.faults.outage_until_ms;
        if refused {
            state.record(now, EventKind::GatewayRefused { worker, refund, call });
        }
        refused
    }

    /// The call is held up for `late_ms` on its way: the worker will hear a timeout.
    fn send_late(
        &self,
        state: &mut State,
        mut call: RefundCall,
        late_ms: u64,
    ) -> Result<Receipt, GatewayError> {
        let now = call.lands_at_ms;
        call.lands_at_ms = now + late_ms;
        let kind = EventKind::RefundTimedOut {
            worker: call.worker,
            refund: call.reference,
            lands_at_ms: now + late_ms,
        };
        state.record(now, kind);
        state.faults.late_calls.push(call);
        self.changed.notify_one();
        Err(GatewayError::Timeout)
    }

    /// The call reaches the gateway now: money moves (or an earlier call's record answers),
    /// and the answer is due at the returned time, unless a fault loses it.
    fn call_gateway(&self, state: &mut State, call: RefundCall) -> (u64, Result<Receipt, GatewayError>) {
        let armed = &mut state.faults.armed[call.worker.0 as usize];
        let lose = armed.lost_responses > 0;
        let reply = self.reach(state, &call, lose);
        let lost = lose && reply.outcome != CallOutcome::Conflict;
        if lost {
            state.faults.armed[call.worker.0 as usize].lost_responses -= 1;
        }
        let result = match (reply.outcome, lost) {
            (CallOutcome::Conflict, _) => Err(GatewayError::Conflict),
            (CallOutcome::Created | CallOutcome::Replayed, true) => Err(GatewayError::Timeout),
            (CallOutcome::Created | CallOutcome::Replayed, false) => Ok(reply.receipt),
        };
        (reply.respond_at_ms, result)
    }

    /// A call lands at the gateway at `call.lands_at_ms` and is recorded; `lost`: nobody
    /// hears its answer (a conflict is always heard when anyone waits).
    pub(crate) fn reach(&self, state: &mut State, call: &RefundCall, lost: bool) -> CallReply {
        let now = call.lands_at_ms;
        let refuse = now < state.faults.conflicts_until_ms;
        let reply =
            state.gateway.refund(call.reference, call.key.clone(), call.amount, now, call.latency_ms, refuse);
        let kind = EventKind::RefundCalled {
            worker: call.worker,
            epoch: call.epoch,
            refund: call.reference,
            amount: call.amount,
            outcome: reply.outcome,
            gateway_ref: reply.receipt.gateway_ref,
            response_lost: lost && reply.outcome != CallOutcome::Conflict,
        };
        state.record(now, kind);
        reply
    }
}
