//! The random worlds a team's worker program is run through: the random scenario's world
//! (two to six workers, one to three merchants, refunds arriving while batches run, the
//! swarm's faults), with what a team's program cannot be given taken out: the second store
//! and the replica (the run has one database and one Redis), and each fault of a kind the
//! proxies and the supervisor cannot give from outside. A fault of a kind they can give,
//! at a trigger they cannot see (a step only the worker knows), is given at a time instead,
//! drawn from the seed within the world's busy time. Every restart of Redis keeps what the
//! first one's persistence mode keeps (a real server runs under one). The lease and counter
//! keys are those `fenced` names, as the contract says.

use crate::foreign::faults::givable;
use crate::scenario::random::horizon_ms;
use crate::scenario::{random_scenario, FaultMask, Scenario};
use fencesim_model::Mechanism;
use fencesim_sim::{Fault, FaultKind, GatewayMode, Trigger};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The stream the times of re-triggered faults are drawn from, beside the seed's others.
const AT_A_TIME: u64 = 0x6f75_7473_6964_6531;

/// The world `seed` draws, as a team's program is run through it.
pub fn random_world(seed: u64, gateway: GatewayMode) -> Scenario {
    let mut scenario = random_scenario(seed, Mechanism::Fenced, gateway, FaultMask::ALL);
    let world = &mut scenario.world;
    world.settlement = None;
    world.replica = None;
    let horizon = horizon_ms(world);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ AT_A_TIME);
    let faults = std::mem::take(&mut world.faults.faults);
    world.faults.faults = faults
        .into_iter()
        .filter_map(|fault| {
            let at = Fault { trigger: Trigger::At { at_ms: rng.gen_range(0..=horizon) }, ..fault.clone() };
            [fault, at].into_iter().find(givable)
        })
        .collect();
    let mut modes = world.faults.faults.iter_mut().filter_map(|fault| match &mut fault.kind {
        FaultKind::RedisRestart { persistence, .. } => Some(persistence),
        _ => None,
    });
    if let Some(first) = modes.next().copied() {
        modes.for_each(|mode| *mode = first);
    }
    scenario
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::foreign::faults::outside_plan;

    #[test]
    fn every_drawn_world_can_be_given_and_keeps_faults() {
        let mut faults = 0;
        for seed in 1..=50 {
            let scenario = random_world(seed, GatewayMode::Idempotent);
            assert!(scenario.world.validate().is_ok(), "seed {seed}");
            assert!(outside_plan(&scenario.world).is_ok(), "seed {seed}");
            assert!(crate::live::plan::world_refusal(&scenario.world).is_none(), "seed {seed}");
            assert!(
                crate::live::servers::restart_mode(&scenario.world).is_ok(),
                "seed {seed}: one persistence mode"
            );
            faults += scenario.world.faults.faults.len();
        }
        assert!(faults >= 100, "the worlds keep faults to give: {faults} in 50 worlds");
    }
}
