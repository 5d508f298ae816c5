//! Property tests over structured scenarios: proptest generates small worlds and their
//! fault plans and shrinks a failing one, so what a failure reports is the smallest plan
//! that still fails (a shrunk seed would mean nothing; a shrunk plan does).

use crate::check::violations;
use crate::files::replay_file::ReplayFile;
use crate::runner::{run, Outcome};
use crate::scenario::small::{small_world, SmallWorld};
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner};
use std::path::PathBuf;

/// How many cases a property runs: `PROPTEST_CASES` deepens a run without a code change.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// A property that failed, shrunk.
pub struct Counterexample {
    pub world: SmallWorld,
    pub outcome: Outcome,
    pub replay_file: PathBuf,
    pub reason: String,
}

impl Counterexample {
    /// What a failing property prints: why, the shrunk plan, and the command to replay it.
    pub fn report(&self) -> String {
        let plan =
            serde_json::to_string_pretty(&self.outcome.scenario.world.faults).expect("a plan serializes");
        format!(
            "{}\nshrunk to {} worker(s), {} row(s), TTL {} ms, {} fault(s):\n{plan}\nreplay with: {}",
            self.reason,
            self.world.workers,
            self.world.rows,
            self.world.ttl_ms,
            self.world.faults.len(),
            ReplayFile::command(&self.replay_file)
        )
    }
}

/// The same cases every run, like everything else here; `PROPTEST_RNG_SEED` picks others.
fn config(name: &'static str, cases: u32) -> Config {
    let defaults = Config::default();
    let rng_seed = match defaults.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0xFE4C_E51D),
        chosen => chosen,
    };
    Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/properties.txt",
        ))),
        source_file: Some(file!()),
        test_name: Some(name),
        ..defaults
    }
}

/// Checks `holds` on small worlds under a mechanism and a gateway mode. `Ok(None)`: it
/// held in every case; `Ok(Some(_))`: the shrunk counterexample, written as a replay file
/// into `out`.
pub fn check(
    name: &'static str,
    mechanism: Mechanism,
    gateway: GatewayMode,
    cases: u32,
    out: &std::path::Path,
    holds: impl Fn(&Outcome) -> Result<(), String>,
) -> Result<Option<Counterexample>, String> {
    check_over(small_world(), name, mechanism, gateway, cases, out, holds)
}

/// `check` over the worlds `worlds` draws (`small_world_failing_over`, say).
pub fn check_over(
    worlds: impl Strategy<Value = SmallWorld>,
    name: &'static str,
    mechanism: Mechanism,
    gateway: GatewayMode,
    cases: u32,
    out: &std::path::Path,
    holds: impl Fn(&Outcome) -> Result<(), String>,
) -> Result<Option<Counterexample>, String> {
    let mut runner = TestRunner::new(config(name, cases));
    let result = runner.run(&worlds, |world| {
        let outcome = run(&world.scenario(mechanism, gateway), 1).map_err(TestCaseError::fail)?;
        holds(&outcome).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => Ok(None),
        Err(TestError::Abort(why)) => Err(format!("{name}: aborted: {why}")),
        Err(TestError::Fail(reason, world)) => {
            let outcome = run(&world.scenario(mechanism, gateway), 1)?;
            let replay_file = ReplayFile::from_outcome(&outcome).write_into(out)?;
            Ok(Some(Counterexample { world, outcome, replay_file, reason: format!("{name}: {reason}") }))
        }
    }
}

/// The property most properties are: every invariant holds.
pub fn every_invariant_holds(outcome: &Outcome) -> Result<(), String> {
    match violations(&outcome.checks).next() {
        None => Ok(()),
        Some((check, breach)) => Err(format!("{} broken: {}", check.invariant, breach.detail)),
    }
}

/// The property the TTL alone breaks: no refund is paid twice.
pub fn no_double_refund(outcome: &Outcome) -> Result<(), String> {
    match outcome.check("no-double-refund").breaches.first() {
        None => Ok(()),
        Some(breach) => Err(format!("no-double-refund broken: {}", breach.detail)),
    }
}
