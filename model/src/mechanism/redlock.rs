//! Redlock as its algorithm asks to be used, and no fencing token: the lease taken on a
//! majority of five Redis instances within its validity time, extended on a majority by a
//! background task while the batch runs, and its validity checked on the worker's own
//! clock before every write (`model/src/lease.rs` names each choice). A pause after the
//! check, or a clock jump on the instances, still lets two workers hold majorities at
//! once, and nothing downstream can tell them apart.

use super::{LeaseKind, Spec, Safety, RENEWALS_PER_TTL};

pub const SPEC: Spec = Spec {
    name: "redlock",
    promise: "tolerates a lost Redis instance; still no defence against a pause or a clock jump",
    safety: Safety::Unsafe,
    lease: LeaseKind::Redlock,
    renewals_per_ttl: RENEWALS_PER_TTL,
    check_before_write: true,
    ..Spec::BASE
};
