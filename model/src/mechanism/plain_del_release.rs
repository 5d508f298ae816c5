//! Fenced writes, but the lease is released with a plain `DEL`: a holder whose lease
//! expired deletes its successor's lease on the way out.

use super::{OnRejectedWrite, ReleasePolicy, Safety, Scripts, Spec, TokenPolicy, PLAIN_DEL_LUA};

pub const SPEC: Spec = Spec {
    name: "plain-del-release",
    promise: "rows stay fenced, but an expired holder's DEL frees the lock under its successor",
    without_faults: Some("a batch longer than the TTL deletes its successor's lock as it releases"),
    safety: Safety::Unsafe,
    tokens: TokenPolicy::RedisIncr,
    on_rejected_write: OnRejectedWrite::Abandon,
    on_row_already_sent: OnRejectedWrite::Abandon,
    release: ReleasePolicy::PlainDel,
    scripts: Scripts { release: PLAIN_DEL_LUA, ..Spec::BASE.scripts },
    ..Spec::BASE
};
