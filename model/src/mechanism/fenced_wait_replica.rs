//! Fenced, on a primary with a replica: after the lease's `SET` and after the token's
//! `INCR` the worker waits for the replica to acknowledge (`WAIT 1 timeout`), and uses
//! neither until it has. A failover can then lose only a grant or a token nobody used yet:
//! the promoted replica's counter stands at least at every token that reached a row.

use super::{OnRejectedWrite, Spec, Safety, TokenPolicy};

pub const SPEC: Spec = Spec {
    name: "fenced-wait-replica",
    promise: "rows are safe through a failover: grants and tokens are used only once the replica has them; a counter lost with a restart stalls the merchant",
    safety: Safety::UnlessRestartLosesCounter,
    tokens: TokenPolicy::RedisIncr,
    on_rejected_write: OnRejectedWrite::Abandon,
    wait_replica: true,
    ..Spec::BASE
};
