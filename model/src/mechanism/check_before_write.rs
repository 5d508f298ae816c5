//! The TTL lease plus a `GET` of the lock key before every write. It narrows the window;
//! the key can still expire between the check and the write.

use super::{Spec, Safety};

pub const SPEC: Spec = Spec {
    name: "check-before-write",
    promise: "catches a lease lost before the check, not one lost between the check and the write",
    safety: Safety::Unsafe,
    check_before_write: true,
    ..Spec::BASE
};
