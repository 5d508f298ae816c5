//! Everything a run needs, as data: the world's shape, its latencies, its rows and jobs,
//! and its fault plan. `WorldConfig::default()` is a small quiet world; a scenario changes
//! what its story needs. `validate` says what does not fit together.

use crate::fault::{FaultPlan, Trigger};
use crate::gateway::GatewayMode;
use crate::replica::Replication;
use fencesim_model::{Job, Mechanism, MerchantId, RefundId, RefundRow};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a world may ask for, whichever door it comes in by (the command line, a replay
/// file, a scenario): every run within them ends, in time and memory that grow with them.
pub struct Limits;

impl Limits {
    pub const WORKERS: u32 = 256;
    pub const JOBS: usize = 1_000;
    pub const ROWS: usize = 200_000;
    pub const FAULTS: usize = 1_000;
    /// Any duration of the world (TTL, visibility timeout, latencies, a fault's size, the
    /// settle bound, a timed trigger): one day.
    pub const DURATION_MS: u64 = 86_400_000;
    /// Events one run may record, beyond `EVENTS_PER_ITEM` for each row and job: a world
    /// that churns past it (a job handed back every millisecond for a day) is stopped and
    /// refused, not run for hours.
    pub const EVENTS: usize = 1_000_000;
    pub const EVENTS_PER_ITEM: usize = 20;
}

/// Gateway latency: per refund where the scenario says, else a default.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

/// Refunds that arrive while the run goes on, and the settlement job their arrival asks
/// for: the rows (named by id among the world's `rows`) are written to the store at
/// `at_ms`, and the job is queued at once. A batch selects its rows when it starts, so
/// rows that arrive during it wait for the next job, which may find the lease busy.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arrival {
    pub at_ms: u64,
    pub job: Job,
    pub rows: Vec<RefundId>,
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
    /// How long a Redis instance is down when it restarts: every command sent to it in
    /// that time fails, as a connection refused. 0 (the default) is an instant restart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redis_restart_ms: u64,
    /// Refunds and jobs that arrive later, in no particular order; none by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrivals: Vec<Arrival>,
    /// How far the copy the gateway answers lookups from lags its ledger: a refund becomes
    /// visible to a lookup this long after its money moved. 0 (the default, and what a
    /// file without it means) is a lookup that reads the ledger itself.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookup_lag_ms: u64,
    /// The second store, the merchant's settlement ledger: a SQLite database of its own
    /// that each settled refund is posted to. None (the default, and every file written
    /// before it existed): the world has one store only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settlement: Option<Settlement>,
    /// A primary with one replica, replicated asynchronously; none (the default): a
    /// single instance. Only a lease on one instance has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<Replication>,
}

/// The second store's shape: how long each request to it takes on its own hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settlement {
    pub latency_ms: u64,
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
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
            redis_restart_ms: 0,
            arrivals: Vec::new(),
            settlement: None,
            replica: None,
            lookup_lag_ms: 0,
        }
    }
}

impl WorldConfig {
    /// The events this world may record before it is stopped as churning without end.
    pub fn event_budget(&self) -> usize {
        Limits::EVENTS + Limits::EVENTS_PER_ITEM * (self.rows.len() + self.jobs.len() + self.arrivals.len())
    }

    /// Every job of the run: those queued at the start, then those that arrive later.
    pub fn all_jobs(&self) -> impl Iterator<Item = Job> + '_ {
        self.jobs.iter().copied().chain(self.arrivals.iter().map(|arrival| arrival.job))
    }

    /// The rows that are not in the store when the run starts.
    pub fn arriving_rows(&self) -> BTreeSet<RefundId> {
        self.arrivals.iter().flat_map(|arrival| arrival.rows.iter().copied()).collect()
    }

    /// When the last arrival comes, if any does.
    pub fn last_arrival_ms(&self) -> Option<u64> {
        self.arrivals.iter().map(|arrival| arrival.at_ms).max()
    }

    /// Keeps the rows `keep` says yes to, and forgets the arrivals of those it drops.
    pub fn retain_rows(&mut self, mut keep: impl FnMut(&RefundRow) -> bool) {
        self.rows.retain(|row| keep(row));
        let left: BTreeSet<RefundId> = self.rows.iter().map(|row| row.id).collect();
        for arrival in &mut self.arrivals {
            arrival.rows.retain(|id| left.contains(id));
        }
    }

    /// Drops a merchant's rows, jobs and arrivals.
    pub fn drop_merchant(&mut self, merchant: MerchantId) {
        self.jobs.retain(|job| job.merchant != merchant);
        self.arrivals.retain(|arrival| arrival.job.merchant != merchant);
        self.retain_rows(|row| row.merchant != merchant);
    }

    /// Redis instances the lease lives on: as many as the mechanism asks for.
    pub fn redis_instances(&self) -> usize {
        self.mechanism.redis_instances()
    }

    /// The plan and the parameters make sense together and stay within `Limits`; a reason
    /// naming the field if not.
    pub fn validate(&self) -> Result<(), String> {
        if self.workers == 0 || self.workers > Limits::WORKERS {
            return Err(format!("workers must be between 1 and {}, got {}", Limits::WORKERS, self.workers));
        }
        let jobs = self.jobs.len() + self.arrivals.len();
        let counts = [("jobs", jobs, Limits::JOBS), ("rows", self.rows.len(), Limits::ROWS)];
        let faults = [("faults", self.faults.faults.len(), Limits::FAULTS)];
        for (field, count, most) in counts.into_iter().chain(faults) {
            if count > most {
                return Err(format!("{field}: at most {most}, got {count}"));
            }
        }
        if self.ttl_ms == 0 {
            return Err("the TTL must be a positive number of milliseconds".to_owned());
        }
        if self.visibility_timeout_ms == 0 {
            return Err("the visibility timeout must be a positive number of milliseconds".to_owned());
        }
        self.durations_within_limits()?;
        self.arrivals_fit()?;
        if self.settlement.is_none() && !self.mechanism.spec().fence_settlement {
            return Err(format!(
                "mechanism {} is about a second store it leaves unfenced: the world needs one (settlement: {{\"latency_ms\": ...}})",
                self.mechanism
            ));
        }
        if self.replica.is_some() && self.redis_instances() != 1 {
            return Err(format!(
                "replica: {} holds its lease on {} instances, each a single server; only a lease on one instance has a replica",
                self.mechanism,
                self.redis_instances()
            ));
        }
        self.faults.validate(self.workers, self.redis_instances() as u8, self.replica.is_some())
    }

    /// Each job id once, each arriving row a row of the world of its job's merchant and in
    /// one arrival only.
    fn arrivals_fit(&self) -> Result<(), String> {
        let mut jobs = BTreeSet::new();
        if let Some(job) = self.all_jobs().find(|job| !jobs.insert(job.id)) {
            return Err(format!("jobs: {} appears twice", job.id));
        }
        if self.arrivals.is_empty() {
            return Ok(()); // no map of the rows for a world whose rows are all there at the start
        }
        let merchants: BTreeMap<RefundId, MerchantId> =
            self.rows.iter().map(|row| (row.id, row.merchant)).collect();
        let mut arriving = BTreeSet::new();
        for arrival in &self.arrivals {
            if arrival.at_ms > Limits::DURATION_MS {
                return Err(format!(
                    "arrivals: {} comes at {} ms, after one day ({} ms)",
                    arrival.job.id,
                    arrival.at_ms,
                    Limits::DURATION_MS
                ));
            }
            for id in &arrival.rows {
                match merchants.get(id) {
                    None => {
                        return Err(format!(
                            "arrivals: {} brings {id}, which is not among the rows",
                            arrival.job.id
                        ))
                    }
                    Some(merchant) if *merchant != arrival.job.merchant => {
                        return Err(format!(
                            "arrivals: {} is for {} but brings {id} of {merchant}",
                            arrival.job.id, arrival.job.merchant
                        ))
                    }
                    Some(_) if !arriving.insert(*id) => {
                        return Err(format!("arrivals: {id} arrives twice"));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Every duration at most `Limits::DURATION_MS`.
    fn durations_within_limits(&self) -> Result<(), String> {
        let latencies = std::iter::once(self.refund_latency.default_ms)
            .chain(self.refund_latency.per_refund_ms.iter().copied());
        let durations = [
            ("ttl_ms", self.ttl_ms),
            ("visibility_timeout_ms", self.visibility_timeout_ms),
            ("settle_ms", self.settle_ms),
            ("lookup_latency_ms", self.lookup_latency_ms),
            ("db_latency_ms", self.db_latency_ms),
            ("redis_latency_ms", self.redis_latency_ms),
            ("redis_restart_ms", self.redis_restart_ms),
            ("settlement.latency_ms", self.settlement.map_or(0, |s| s.latency_ms)),
            ("replica.lag_ms", self.replica.map_or(0, |r| r.lag_ms)),
            ("replica.switch_over_ms", self.replica.map_or(0, |r| r.switch_over_ms)),
            ("lookup_lag_ms", self.lookup_lag_ms),
            ("refund_latency", latencies.max().unwrap_or(0)),
        ];
        let faults = self.faults.faults.iter().map(|fault| {
            let at = match fault.trigger {
                Trigger::At { at_ms } => at_ms,
                Trigger::Step { .. } | Trigger::Call { .. } | Trigger::Within { .. } => 0,
            };
            ("a fault's size or time", fault.kind.size().max(at))
        });
        match durations.into_iter().chain(faults).find(|(_, ms)| *ms > Limits::DURATION_MS) {
            Some((field, ms)) => {
                Err(format!("{field}: at most {} ms (one day), got {ms}", Limits::DURATION_MS))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::{Cents, JobId, RefundState};

    fn world_with_an_arrival() -> WorldConfig {
        let merchant = MerchantId(7);
        let row = |id| RefundRow {
            id: RefundId(id),
            merchant,
            amount: Cents(100),
            state: RefundState::Pending,
            fence: 0,
        };
        WorldConfig {
            rows: vec![row(1), row(2), row(3)],
            jobs: vec![Job { id: JobId(1), merchant }],
            arrivals: vec![Arrival {
                at_ms: 50,
                job: Job { id: JobId(2), merchant },
                rows: vec![RefundId(3)],
            }],
            ..WorldConfig::default()
        }
    }

    #[test]
    fn an_arrival_must_bring_rows_of_its_own_merchant_once_under_a_job_id_of_its_own() {
        assert_eq!(world_with_an_arrival().validate(), Ok(()));
        let broken = |change: fn(&mut WorldConfig)| {
            let mut world = world_with_an_arrival();
            change(&mut world);
            world.validate().unwrap_err()
        };
        assert!(broken(|w| w.arrivals[0].job.id = JobId(1)).contains("job#1 appears twice"));
        assert!(
            broken(|w| w.arrivals[0].rows.push(RefundId(9))).contains("r_009, which is not among the rows")
        );
        assert!(broken(|w| w.arrivals[0].job.merchant = MerchantId(8)).contains("brings r_003 of m_7"));
        let twice = broken(|w| {
            let again = Arrival {
                at_ms: 60,
                job: Job { id: JobId(3), merchant: MerchantId(7) },
                rows: vec![RefundId(3)],
            };
            w.arrivals.push(again);
        });
        assert!(twice.contains("r_003 arrives twice"), "{twice}");
        assert!(broken(|w| w.arrivals[0].at_ms = Limits::DURATION_MS + 1).contains("after one day"));
    }

    #[test]
    fn leaving_out_rows_or_a_merchant_leaves_the_arrivals_valid() {
        let mut world = world_with_an_arrival();
        world.retain_rows(|row| row.id != RefundId(3));
        assert_eq!(world.arrivals[0].rows, Vec::<RefundId>::new());
        assert_eq!(world.validate(), Ok(()));
        let mut world = world_with_an_arrival();
        world.drop_merchant(MerchantId(7));
        assert!(world.rows.is_empty() && world.jobs.is_empty() && world.arrivals.is_empty());
        assert_eq!(world.all_jobs().count(), 0);
        assert_eq!(world_with_an_arrival().all_jobs().count(), 2);
        assert_eq!(world_with_an_arrival().last_arrival_ms(), Some(50));
    }
}
