//! What the command line and replay files choose by name: the scenarios and the mechanisms.

use crate::scenario::builder::Scenario;
use crate::scenario::lagging_lookup::lagging_lookup;
use crate::scenario::production::{production_scenario, production_swarm_scenario};
use crate::scenario::random::{random_scenario, FaultMask};
use crate::scenario::variants::{random_lagging_scenario, random_two_stores_scenario, replicated_scenario};
use crate::scenario::worked_example::{worked_example, worked_example_two_stores};
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;

/// The scenarios the command line knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioName {
    /// The article's worked example: the same world for every seed.
    WorkedExample,
    /// The seed's own world and swarm fault plan.
    Random,
    /// The worked example's second act: the batch also posts to a second store.
    WorkedExampleTwoStores,
    /// The seed's own world with a replica always, and its plan without restarts.
    Replicated,
    /// The random scenario with the gateway's lookups always answered from a lagging copy.
    RandomLagging,
    /// The worked example's world, where B's lookup of `r_815` reads a copy that lags.
    LaggingLookup,
    /// The random scenario with the second store always.
    RandomTwoStores,
    /// The seed's own world with faults as rare as in production (`scenario::production`).
    Production,
    /// Production's world (its lease sized for its batches, lookups that read the ledger)
    /// under the swarm's plan: where a deep bug's catches are found and shrunk.
    ProductionSwarm,
}

impl ScenarioName {
    pub const ALL: [ScenarioName; 9] = [
        ScenarioName::WorkedExample,
        ScenarioName::Random,
        ScenarioName::WorkedExampleTwoStores,
        ScenarioName::Replicated,
        ScenarioName::RandomLagging,
        ScenarioName::LaggingLookup,
        ScenarioName::RandomTwoStores,
        ScenarioName::Production,
        ScenarioName::ProductionSwarm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScenarioName::WorkedExample => "worked-example",
            ScenarioName::Random => "random",
            ScenarioName::WorkedExampleTwoStores => "worked-example-two-stores",
            ScenarioName::Replicated => "replicated",
            ScenarioName::RandomLagging => "random-lagging",
            ScenarioName::LaggingLookup => "lagging-lookup",
            ScenarioName::RandomTwoStores => "random-two-stores",
            ScenarioName::Production => "production",
            ScenarioName::ProductionSwarm => "production-swarm",
        }
    }

    /// Finds a scenario by name; an unknown name is refused with the choices.
    pub fn lookup(name: &str) -> Result<ScenarioName, String> {
        ScenarioName::ALL.into_iter().find(|known| known.name() == name).ok_or_else(|| {
            let names: Vec<&str> = ScenarioName::ALL.iter().map(|known| known.name()).collect();
            format!("unknown scenario '{name}': expected one of {}", names.join(", "))
        })
    }
}

/// Checks a scenario name.
pub fn known(name: &str) -> Result<&'static str, String> {
    ScenarioName::lookup(name).map(ScenarioName::name)
}

/// A scenario by name, for a seed, a mechanism and a gateway mode. The worked example is
/// the same world for every seed; the random scenario is the seed's own.
pub fn build(
    name: &str,
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Result<Scenario, String> {
    Ok(match ScenarioName::lookup(name)? {
        ScenarioName::WorkedExample => worked_example().with_mechanism(mechanism, gateway),
        ScenarioName::Random => random_scenario(seed, mechanism, gateway, allowed),
        ScenarioName::WorkedExampleTwoStores => {
            worked_example_two_stores().with_mechanism(mechanism, gateway)
        }
        ScenarioName::Replicated => replicated_scenario(seed, mechanism, gateway, allowed),
        ScenarioName::RandomLagging => random_lagging_scenario(seed, mechanism, gateway, allowed),
        ScenarioName::LaggingLookup => lagging_lookup().with_mechanism(mechanism, gateway),
        ScenarioName::RandomTwoStores => random_two_stores_scenario(seed, mechanism, gateway, allowed),
        ScenarioName::Production => production_scenario(seed, mechanism, gateway, allowed),
        ScenarioName::ProductionSwarm => production_swarm_scenario(seed, mechanism, gateway, allowed),
    })
}

/// A mechanism by name; an unknown name is refused with the choices.
pub fn mechanism_named(name: &str) -> Result<Mechanism, String> {
    name.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_scenario_is_named_with_the_choices() {
        let err = known("chaos").unwrap_err();
        assert!(err.contains("unknown scenario 'chaos'") && err.contains("worked-example, random"), "{err}");
    }

    #[test]
    fn an_unknown_mechanism_is_named_with_the_choices() {
        for mechanism in Mechanism::ALL {
            assert_eq!(mechanism_named(mechanism.name()), Ok(mechanism));
        }
        let err = mechanism_named("fencing").unwrap_err();
        assert!(err.contains("unknown mechanism 'fencing'") && err.contains("fenced-db-sequence"), "{err}");
    }
}
