//! A settlement job and one delivery of it.

use crate::ids::{JobId, MerchantId};
use serde::{Deserialize, Serialize};

/// A settlement job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub id: JobId,
    pub merchant: MerchantId,
}

/// One delivery of a job; the receipt names this delivery, so that a stale ack is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Delivery {
    pub job: Job,
    pub receipt: u32,
}
