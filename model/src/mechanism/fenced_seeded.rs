//! Fenced, and when Redis starts the counter is seeded from `MAX(fence)` of the merchant's
//! rows. A token issued but not yet written to any row is invisible to that seed.

use super::{OnRejectedWrite, Spec, Safety, TokenPolicy};

pub const SPEC: Spec = Spec {
    name: "fenced-seeded",
    promise:
        "recovers from a lost counter, but may issue a token again that was handed out and not yet written",
    safety: Safety::Unsafe,
    tokens: TokenPolicy::RedisIncr,
    on_rejected_write: OnRejectedWrite::Abandon,
    on_row_already_sent: OnRejectedWrite::Abandon,
    seed_counter_on_restart: true,
    ..Spec::BASE
};
