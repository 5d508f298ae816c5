//! The random scenario's variants, each the seed's own world with one thing always on: a
//! replica, a gateway whose lookups lag, or the second store.

use super::builder::Scenario;
use super::deployment::{replica_drawn, settlement_drawn, widen_settle_bound};
use super::random::{
    add_arrivals, lookup_lag, random_scenario, random_world, scenario_of_world, swarm_plan, FaultMask,
};
use fencesim_model::Mechanism;
use fencesim_sim::{FaultName, GatewayMode, WallMs};

/// The replicated scenario: the seed's random world with a replica always (for a lease on
/// one instance; the one the random scenario draws where it draws one), and its swarm plan
/// drawn without restarts, so that a counter can go back only with a failover.
pub fn replicated_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    let mut world = random_world(seed, mechanism, gateway);
    if mechanism.redis_instances() == 1 {
        world.replica = Some(replica_drawn(seed, world.ttl_ms).1);
    }
    add_arrivals(seed, &mut world);
    world.faults = swarm_plan(seed, &world, allowed.without(FaultName::RedisRestart as usize));
    widen_settle_bound(&mut world);
    Scenario { name: "replicated", base: WallMs::hms(12, 0, 0), world }
}

/// The random scenario for a seed with its gateway's lookups always lagging (by the
/// seed's lag, which the random scenario has in half the seeds): the same world, faults
/// and all.
pub fn random_lagging_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    let mut scenario = random_scenario(seed, mechanism, gateway, allowed);
    scenario.world.lookup_lag_ms = lookup_lag(seed).1;
    Scenario { name: "random-lagging", ..scenario }
}

/// The random scenario for a seed with the second store always (the random scenario has it
/// in one seed of four): the seed's world, with the plan drawn for a world that has it.
pub fn random_two_stores_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    let mut world = random_world(seed, mechanism, gateway);
    world.settlement = Some(settlement_drawn(seed).1);
    Scenario { name: "random-two-stores", ..scenario_of_world(seed, world, allowed) }
}
