//! Redlock with a fencing token, the answer the token side of the debate proposes:
//! Redlock's majority, validity check and extension as in `redlock`, and a token from a
//! sequence in the refund database that every write carries and the store checks. A
//! pause after the validity check or a clock jump on the instances can still give two
//! workers a majority at once; the store then turns the older token away.

use super::{LeaseKind, OnRejectedWrite, Spec, Safety, TokenPolicy, RENEWALS_PER_TTL};

pub const SPEC: Spec = Spec {
    name: "redlock-fenced",
    promise: "Redlock's majority, and rows safe through a pause or a clock jump: the store turns the older token away",
    safety: Safety::Safe,
    tokens: TokenPolicy::DbSequence,
    on_rejected_write: OnRejectedWrite::Abandon,
    on_row_already_sent: OnRejectedWrite::Abandon,
    lease: LeaseKind::Redlock,
    renewals_per_ttl: RENEWALS_PER_TTL,
    check_before_write: true,
    ..Spec::BASE
};
