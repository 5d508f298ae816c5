//! The TTL lease alone: the protocol without the fence predicates. A write that matches
//! no row is skipped, because nothing tells the worker that its lease has ended.

use super::{Spec, Safety};

pub const SPEC: Spec = Spec {
    name: "ttl-only",
    promise: "liveness only: a crashed holder frees the merchant after the TTL; a paused one writes on",
    safety: Safety::Unsafe,
    ..Spec::BASE
};
