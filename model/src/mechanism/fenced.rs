//! The TTL lease plus a fencing token from `INCR`: every claim needs `fence < token`,
//! every confirm `fence = token`, and a write that matches no row abandons the batch.

use super::{OnRejectedWrite, Spec, Safety, TokenPolicy};

pub const SPEC: Spec = Spec {
    name: "fenced",
    promise:
        "rows are safe: the store turns a stale token away; a counter lost with Redis stalls the merchant, and one a failover sends back reissues tokens",
    safety: Safety::UnlessCounterLost,
    tokens: TokenPolicy::RedisIncr,
    on_rejected_write: OnRejectedWrite::Abandon,
    on_row_already_sent: OnRejectedWrite::Abandon,
    ..Spec::BASE
};
