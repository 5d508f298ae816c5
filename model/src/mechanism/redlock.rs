//! The lease taken on a majority of five Redis instances within its validity time, and no
//! fencing token. A pause or a clock jump lets two workers hold majorities at once.

use super::{LeaseKind, Spec, Safety};

pub const SPEC: Spec = Spec {
    name: "redlock",
    promise: "tolerates a lost Redis instance; still no defence against a pause or a clock jump",
    without_faults: Some("its worker neither checks the validity left nor extends the lease, so a batch longer than the TTL writes on after every instance let it go"),
    safety: Safety::Unsafe,
    lease: LeaseKind::Redlock,
    ..Spec::BASE
};
