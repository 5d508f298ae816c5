//! What a random world has beside its shape, each drawn on a stream of its own so that
//! the rest of the world is what the seed drew before it existed: the second store, a
//! replica of its Redis, and the settle bound its jobs need.

use super::random::stream;
use fencesim_model::Mechanism;
use fencesim_sim::{FaultKind, FaultPlan, Replication, Settlement, WorldConfig};
use rand::Rng;

const SETTLEMENT: u64 = 8;
const REPLICA: u64 = 9;
/// The share of seeds whose Redis (a lease on one instance) is a primary with a replica.
const REPLICA_SHARE: f64 = 0.25;
/// The share of seeds whose batch also posts to the second store.
const SETTLEMENT_SHARE: f64 = 0.25;

/// The second store in one seed of four, drawn on a stream of its own so that the rest of
/// the world is what the seed drew before it existed. Not in every seed: its own fence,
/// taken per merchant at the batch's start, turns a stale holder away before the rows'
/// fences are tried, so a world that always had it would hide a bug in the rows' fences.
/// A mechanism about the second store always has one.
pub(super) fn settlement(seed: u64, mechanism: Mechanism) -> Option<Settlement> {
    let (drawn, settlement) = settlement_drawn(seed);
    (drawn || !mechanism.spec().fence_settlement).then_some(settlement)
}

/// Whether the seed draws the second store, and the one it has when it has one.
pub(super) fn settlement_drawn(seed: u64) -> (bool, Settlement) {
    let mut rng = stream(seed, SETTLEMENT);
    let latency_ms = rng.gen_range(0..=3);
    (rng.gen_bool(SETTLEMENT_SHARE), Settlement { latency_ms })
}

/// A replica in one seed of four, for a lease on one instance (Redlock's instances are
/// single servers), and in every seed for a mechanism that waits for it: it lags the
/// primary by up to a tenth of the TTL, and a failover to it takes up to half the TTL to
/// switch the clients over. A worker that waits for it waits a fifth of the TTL, so a wait times out only when a failover breaks it.
pub(super) fn replica(seed: u64, mechanism: Mechanism, ttl_ms: u64) -> Option<Replication> {
    let (drawn, replica) = replica_drawn(seed, ttl_ms);
    let wanted = drawn || mechanism.spec().wait_replica;
    (wanted && mechanism.redis_instances() == 1).then_some(replica)
}

/// Whether the seed draws a replica, and the one it has when it has one.
pub(super) fn replica_drawn(seed: u64, ttl_ms: u64) -> (bool, Replication) {
    let mut rng = stream(seed, REPLICA);
    let drawn = rng.gen_bool(REPLICA_SHARE);
    let replica = Replication {
        lag_ms: rng.gen_range(1..=(ttl_ms / 10).max(1)),
        switch_over_ms: rng.gen_range(0..=ttl_ms / 2),
    };
    (drawn, replica)
}

/// The jobs of one merchant take its lease in turn, and a job handed out while another
/// holds the lease waits out its visibility timeout before it is handed out again: the
/// settle bound grows by a visibility timeout and a TTL for every job the busiest merchant
/// has beyond its first and for every delivery the plan adds. Without it, one merchant with
/// six jobs and two duplicate deliveries outlasted the bound under a mechanism that makes
/// progress (5 of 200,000 seeds under the fenced mechanisms; each finished with the bound
/// widened so).
pub(super) fn widen_settle_bound(world: &mut WorldConfig) {
    let jobs = |merchant| world.all_jobs().filter(|job| job.merchant == merchant).count() as u64;
    let busiest = world.jobs.iter().map(|job| jobs(job.merchant)).max().unwrap_or(1);
    let copies = world.faults.faults.iter().filter(|fault| adds_a_delivery(&fault.kind)).count() as u64;
    let turns = busiest.saturating_sub(1) + copies;
    world.settle_ms += turns * (world.visibility_timeout_ms + world.ttl_ms);
}

/// The world with another fault plan, its settle bound widened for that plan's deliveries
/// instead of the old one's (what a guided search runs a mutated plan in).
pub fn replan(world: &mut WorldConfig, plan: FaultPlan) {
    let copies =
        |plan: &FaultPlan| plan.faults.iter().filter(|fault| adds_a_delivery(&fault.kind)).count() as u64;
    let turn = world.visibility_timeout_ms + world.ttl_ms;
    world.settle_ms = world.settle_ms.saturating_sub(copies(&world.faults) * turn) + copies(&plan) * turn;
    world.faults = plan;
}

fn adds_a_delivery(kind: &FaultKind) -> bool {
    matches!(kind, FaultKind::DuplicateDelivery { .. } | FaultKind::Redeliver { .. })
}
