//! The fenced protocol as a production team would run it: the lease renewed from a
//! background task every third of the TTL, so that a batch longer than the TTL keeps its
//! lease instead of handing the job over for nothing, and the fence for what renewal
//! cannot see (a stall that outlasts the lease, a lease cut short).

use super::{OnRejectedWrite, Spec, Safety, TokenPolicy, RENEWALS_PER_TTL};

pub const SPEC: Spec = Spec {
    name: "fenced-renewal",
    promise: "rows are safe and a long batch keeps its lease; a counter lost with Redis stalls the merchant, and one a failover sends back reissues tokens",
    safety: Safety::UnlessCounterLost,
    tokens: TokenPolicy::RedisIncr,
    on_rejected_write: OnRejectedWrite::Abandon,
    on_row_already_sent: OnRejectedWrite::Abandon,
    renewals_per_ttl: RENEWALS_PER_TTL,
    ..Spec::BASE
};
