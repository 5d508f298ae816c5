//! The TTL lease alone: the protocol without the fence predicates. A write that matches
//! no row is skipped, because nothing tells the worker that its lease has ended.

use super::{Spec, Safety};

pub const SPEC: Spec = Spec {
    name: "ttl-only",
    promise: "liveness only: a crashed holder frees the merchant after the TTL; a paused one writes on",
    without_faults: Some("a batch longer than the TTL writes on after its lease ran out"),
    safety: Safety::Unsafe,
    ..Spec::BASE
};
