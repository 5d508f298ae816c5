//! The TTL lease plus a fencing token from `INCR`: every claim needs `fence < token`,
//! every confirm `fence = token`, and a write that matches no row abandons the batch.

use super::{OnRejectedWrite, Policy, TokenPolicy};

pub const POLICY: Policy = Policy {
    name: "fenced",
    promise:
        "rows are safe: the store turns a stale token away; the gateway call still needs its idempotency key",
    tokens: TokenPolicy::Incr,
    on_rejected_write: OnRejectedWrite::Abandon,
};
