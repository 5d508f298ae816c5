//! The TTL lease renewed from a background task every third of the TTL. A paused process
//! cannot renew, and when it resumes it does not know that time passed.

use super::{Spec, Safety, RENEWALS_PER_TTL};

pub const SPEC: Spec = Spec {
    name: "ttl-renewal",
    promise: "keeps a slow batch's lease alive; a pause longer than the TTL still loses it unnoticed",
    safety: Safety::Unsafe,
    renewals_per_ttl: RENEWALS_PER_TTL,
    ..Spec::BASE
};
