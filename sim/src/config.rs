//! Everything a run needs, as data: the world's shape, its latencies, its rows and jobs,
//! and its fault plan. `WorldConfig::default()` is a small quiet world; a scenario changes
//! what its story needs. `validate` says what does not fit together.

use crate::fault::FaultPlan;
use crate::gateway::GatewayMode;
use fencesim_model::{Job, Mechanism, MerchantId, RefundId, RefundRow};
use serde::{Deserialize, Serialize};

/// Gateway latency: per refund where the scenario says, else a default.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Latency {
    pub default_ms: u64,
    /// Indexed by refund number; 0 means "use the default".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_refund_ms: Vec<u64>,
}

impl Latency {
    pub fn flat(ms: u64) -> Latency {
        Latency { default_ms: ms, per_refund_ms: Vec::new() }
    }

    pub fn of(&self, refund: RefundId) -> u64 {
        match self.per_refund_ms.get(refund.0 as usize) {
            Some(&ms) if ms > 0 => ms,
            _ => self.default_ms,
        }
    }
}

/// Everything a run needs, as data.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldConfig {
    pub workers: u32,
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    pub gateway_mode: GatewayMode,
    pub refund_latency: Latency,
    pub lookup_latency_ms: u64,
    pub db_latency_ms: u64,
    pub redis_latency_ms: u64,
    pub visibility_timeout_ms: u64,
    pub rows: Vec<RefundRow>,
    pub jobs: Vec<Job>,
    /// Where each merchant's token counter stands when the run starts (`m_4471: 32`).
    pub counters: Vec<(MerchantId, i64)>,
    pub faults: FaultPlan,
    /// How long after the last fault every job must be done.
    pub settle_ms: u64,
}

impl Default for WorldConfig {
    /// One fenced worker, the article's 30 s lease, an idempotent gateway answering in
    /// 30 ms, no rows, no jobs, no faults.
    fn default() -> WorldConfig {
        WorldConfig {
            workers: 1,
            mechanism: Mechanism::Fenced,
            ttl_ms: 30_000,
            gateway_mode: GatewayMode::Idempotent,
            refund_latency: Latency::flat(30),
            lookup_latency_ms: 5,
            db_latency_ms: 0,
            redis_latency_ms: 0,
            visibility_timeout_ms: 60_000,
            rows: Vec::new(),
            jobs: Vec::new(),
            counters: Vec::new(),
            faults: FaultPlan::none(),
            settle_ms: 120_000,
        }
    }
}

impl WorldConfig {
    /// Redis instances the lease lives on: as many as the mechanism asks for.
    pub fn redis_instances(&self) -> usize {
        self.mechanism.redis_instances()
    }

    /// The plan and the parameters make sense together; a reason if not.
    pub fn validate(&self) -> Result<(), String> {
        if self.workers == 0 || self.workers > 26 {
            return Err(format!("workers must be between 1 and 26, got {}", self.workers));
        }
        if self.ttl_ms == 0 {
            return Err("the TTL must be a positive number of milliseconds".to_owned());
        }
        if self.visibility_timeout_ms == 0 {
            return Err("the visibility timeout must be a positive number of milliseconds".to_owned());
        }
        self.faults.validate(self.workers, self.redis_instances() as u8)
    }
}
