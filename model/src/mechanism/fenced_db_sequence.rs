//! Fenced, with tokens from a sequence in the refund database: Redis keeps only the lease,
//! and the counter lives and dies with the rows it protects.

use super::{OnRejectedWrite, Spec, Safety, TokenPolicy};

pub const SPEC: Spec = Spec {
    name: "fenced-db-sequence",
    promise: "safe and live: tokens rise with the database that checks them, whatever happens to Redis",
    safety: Safety::Safe,
    tokens: TokenPolicy::DbSequence,
    on_rejected_write: OnRejectedWrite::Abandon,
    on_row_already_sent: OnRejectedWrite::Abandon,
    ..Spec::BASE
};
