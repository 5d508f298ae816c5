//! Scenarios: the worlds a run starts from. The builder tells a world the way the article
//! does, one call per fact; the worked example, the random scenario and the small worlds
//! of the property suite are built here, and the registry names the ones the command line
//! and replay files choose by name.

pub mod builder;
pub mod deployment;
pub mod lagging_lookup;
pub mod production;
pub mod random;
pub mod registry;
pub mod small;
pub mod variants;
pub mod worked_example;

pub use builder::{Scenario, ScenarioBuilder};
pub use random::{random_scenario, FaultMask};
pub use registry::{build, known, mechanism_named, ScenarioName};
pub use worked_example::{worked_example, worked_example_two_stores, A, B, M_4471, R_815};
