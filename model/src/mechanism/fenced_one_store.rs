//! `fenced` on the refund rows, and a second store written without a fence: the settlement
//! ledger's postings carry no predicate. The article's fourth weak point: a batch that
//! writes two stores needs a fence on each, and the store without one takes a stale
//! holder's write however carefully the other store turns it away.

use super::{OnRejectedWrite, Safety, Spec, TokenPolicy};

pub const SPEC: Spec = Spec {
    name: "fenced-one-store",
    promise: "the refund rows are as safe as under fenced; the settlement ledger is not: a holder whose lease ended posts a refund its successor posts too",
    without_faults: Some("a batch longer than the TTL posts a refund that its successor posts again"),
    safety: Safety::Unsafe,
    tokens: TokenPolicy::RedisIncr,
    on_rejected_write: OnRejectedWrite::Abandon,
    fence_settlement: false,
    ..Spec::BASE
};
