//! Fenced, with tokens from a sequence in the refund database: Redis keeps only the lease,
//! and the counter lives and dies with the rows it protects.

use super::{OnRejectedWrite, Policy, Safety, TokenPolicy};

pub const POLICY: Policy = Policy {
    name: "fenced-db-sequence",
    promise: "safe and live: tokens rise with the database that checks them, whatever happens to Redis",
    safety: Safety::Safe,
    tokens: TokenPolicy::DbSequence,
    on_rejected_write: OnRejectedWrite::Abandon,
    ..Policy::BASE
};
