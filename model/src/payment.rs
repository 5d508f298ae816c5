//! How a worker talks to the payment gateway when it does not answer as it should. A
//! gateway error says different things by kind, and each gets its own answer:
//!
//! - `Unavailable` (refused, nothing moved) and `Conflict` (a call with the same key is in
//!   flight): wait, then send the same request again; the wait doubles each time;
//! - `Timeout` on a refund call (the money may have moved, now or later): wait, then look
//!   the refund up by its reference. Found: the refund is made and that is its receipt.
//!   Not found: call again with the same idempotency key, so that a call still on its way
//!   and the new one are one refund to a gateway that honours the key;
//! - give up, and abandon the batch, when the tries run out or no lookup can tell.

use crate::ids::RefundId;
use crate::ports::{Clock, Gateway, IdempotencyKey, Probe};
use crate::refund::{GatewayCall, GatewayError, Receipt, RefundRow};
use crate::step::{AbandonReason, Step};

/// How often a gateway request is tried, and how long the worker waits after the first
/// failure (the wait doubles after each later one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    pub tries: u32,
    pub first_wait_ms: u64,
}

/// The worker's policy: 4 tries, waiting 20, 40 and 80 ms between them.
pub const RETRY: Retry = Retry { tries: 4, first_wait_ms: 20 };

impl Retry {
    /// The wait after the `attempt`-th failure (from 1).
    pub fn wait_ms(self, attempt: u32) -> u64 {
        self.first_wait_ms << attempt.saturating_sub(1).min(16)
    }
}

/// The worker's connection to the gateway, with the probe and clock its retries need.
pub(crate) struct Payer<'a, G, P, K> {
    pub gateway: &'a G,
    pub probe: &'a P,
    pub clock: &'a K,
}

impl<G, P, K> Payer<'_, G, P, K>
where
    G: Gateway + Sync,
    P: Probe + Sync,
    K: Clock + Sync,
{
    /// Is there a refund with this reference already? `Err` when the gateway could not say.
    pub async fn look_up(&self, refund: RefundId) -> Result<Option<Receipt>, AbandonReason> {
        for attempt in 1..=RETRY.tries {
            match self.gateway.find(refund).await {
                Ok(found) => return Ok(found),
                Err(error) => self.failed(refund, GatewayCall::Lookup, error, attempt).await,
            }
        }
        Err(AbandonReason::GatewayUnavailable)
    }

    /// Refunds `row` under its own idempotency key, retrying as the module says.
    pub async fn pay(&self, row: &RefundRow) -> Result<Receipt, AbandonReason> {
        let mut last = GatewayError::Unavailable;
        for attempt in 1..=RETRY.tries {
            last = match self.gateway.refund(row.id, IdempotencyKey::of(row.id), row.amount).await {
                Ok(receipt) => return Ok(receipt),
                Err(error) => error,
            };
            self.failed(row.id, GatewayCall::Refund, last, attempt).await;
            if last == GatewayError::Timeout {
                match self.look_up(row.id).await {
                    Ok(Some(receipt)) => return Ok(receipt),
                    Ok(None) => {}
                    Err(_) => return Err(AbandonReason::OutcomeUnknown),
                }
            }
        }
        Err(match last {
            GatewayError::Timeout => AbandonReason::OutcomeUnknown,
            GatewayError::Unavailable | GatewayError::Conflict => AbandonReason::GatewayUnavailable,
        })
    }

    /// Tells the probe, then waits before the next try (if there is one).
    async fn failed(&self, refund: RefundId, call: GatewayCall, error: GatewayError, attempt: u32) {
        self.probe.reached(Step::GatewayFailed { refund, call, error, attempt }).await;
        if attempt < RETRY.tries {
            self.clock.sleep_ms(RETRY.wait_ms(attempt)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_after_each_failure() {
        let waits: Vec<u64> = (1..RETRY.tries).map(|a| RETRY.wait_ms(a)).collect();
        assert_eq!(waits, [20, 40, 80]);
        assert_eq!(Retry { tries: 99, first_wait_ms: 1 }.wait_ms(90), 1 << 16);
    }
}
