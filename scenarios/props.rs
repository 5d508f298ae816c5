//! Property tests over structured scenarios. A small world and its fault plan are values
//! proptest generates and shrinks: a failing case loses faults, workers and rows and its
//! pauses get shorter until nothing more can go, so what a failure reports is the smallest
//! plan that still fails (a shrunk seed would mean nothing; a shrunk plan does).

use crate::random::TRIGGER_STEPS;
use crate::replay::ReplayFile;
use crate::runner::{run, Outcome};
use crate::scenario::Scenario;
use fencesim_model::{Cents, Job, JobId, Mechanism, MerchantId, RefundId, RefundRow, RefundState, WorkerId};
use fencesim_sim::{
    Fault, FaultKind, FaultPlan, GatewayMode, Latency, Persistence, Trigger, WallMs, WorldConfig,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner};
use std::path::PathBuf;

/// A small world: one merchant, a few workers and rows, and a plan of faults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallWorld {
    pub workers: u32,
    pub rows: u32,
    pub ttl_ms: u64,
    pub latency_ms: u64,
    pub faults: Vec<Fault>,
}

impl SmallWorld {
    pub fn scenario(&self, mechanism: Mechanism, gateway: GatewayMode) -> Scenario {
        let merchant = MerchantId(7);
        let rows = (1..=self.rows)
            .map(|i| RefundRow {
                id: RefundId(i),
                merchant,
                amount: Cents(1_000 + i64::from(i)),
                state: RefundState::Pending,
                fence: 0,
            })
            .collect();
        let world = WorldConfig {
            workers: self.workers,
            mechanism,
            ttl_ms: self.ttl_ms,
            gateway_mode: gateway,
            refund_latency: Latency::flat(self.latency_ms),
            lookup_latency_ms: 2,
            db_latency_ms: 0,
            redis_latency_ms: 0,
            visibility_timeout_ms: self.ttl_ms + self.ttl_ms / 2,
            rows,
            jobs: vec![Job { id: JobId(1), merchant }],
            counters: vec![(merchant, 10)],
            faults: FaultPlan { faults: self.faults.clone() },
            settle_ms: 20 * self.ttl_ms + 20 * self.latency_ms * u64::from(self.rows) + 5_000,
        };
        Scenario { name: "random", base: WallMs::hms(9, 0, 0), world }
    }
}

fn fault(workers: u32, rows: u32, ttl: u64) -> impl Strategy<Value = Fault> {
    let worker = (0..workers).prop_map(WorkerId);
    let kind = prop_oneof![
        (worker.clone(), 0..=3 * ttl)
            .prop_map(|(worker, duration_ms)| FaultKind::Pause { worker, duration_ms }),
        (worker.clone(), 0..=ttl)
            .prop_map(|(worker, restart_after_ms)| FaultKind::Crash { worker, restart_after_ms }),
        worker.clone().prop_map(|worker| FaultKind::Redeliver { worker }),
        worker.clone().prop_map(|worker| FaultKind::DuplicateDelivery { worker }),
        prop_oneof![Just(Persistence::None), Just(Persistence::AofEverySec), Just(Persistence::AofAlways)]
            .prop_map(|persistence| FaultKind::RedisRestart { instance: 0, persistence }),
        Just(FaultKind::ExpireLease { instance: 0, merchant: MerchantId(7) }),
        (worker.clone(), 0..=2 * ttl).prop_map(|(worker, delay_ms)| FaultKind::DbDelay { worker, delay_ms }),
        worker.clone().prop_map(|worker| FaultKind::LostResponse { worker }),
    ];
    let step = (0..TRIGGER_STEPS.len()).prop_map(|i| TRIGGER_STEPS[i]);
    let trigger = prop_oneof![
        (worker, step, 1..=rows).prop_map(|(worker, step, nth)| Trigger::Step { worker, step, nth }),
        (0..=ttl * 2).prop_map(|at_ms| Trigger::At { at_ms }),
    ];
    (kind, trigger).prop_map(|(kind, trigger)| Fault { kind, trigger })
}

/// Small worlds: 2 to 4 workers, 1 to 8 rows, a TTL of 100 ms to 2 s, up to 4 faults.
pub fn small_world() -> impl Strategy<Value = SmallWorld> {
    (2u32..=4, 1u32..=8, 100u64..=2_000, 5u64..=60).prop_flat_map(|(workers, rows, ttl_ms, latency_ms)| {
        proptest::collection::vec(fault(workers, rows, ttl_ms), 0..=4).prop_map(move |faults| SmallWorld {
            workers,
            rows,
            ttl_ms,
            latency_ms,
            faults,
        })
    })
}

/// How many cases a property runs: `PROPTEST_CASES` deepens a run without a code change.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
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
    // The same cases every run, like everything else here; `PROPTEST_RNG_SEED` picks others.
    let defaults = Config::default();
    let rng_seed = match defaults.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0xFE4C_E51D),
        chosen => chosen,
    };
    let config = Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/properties.txt",
        ))),
        source_file: Some(file!()),
        test_name: Some(name),
        ..defaults
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&small_world(), |w| {
        let o = run(&w.scenario(mechanism, gateway), 1).map_err(TestCaseError::fail)?;
        holds(&o).map_err(TestCaseError::fail)
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
pub fn every_invariant_holds(o: &Outcome) -> Result<(), String> {
    match crate::checkers::violations(&o.checks).next() {
        None => Ok(()),
        Some((c, b)) => Err(format!("{} broken: {}", c.invariant, b.detail)),
    }
}

/// The property the TTL alone breaks: no refund is paid twice.
pub fn no_double_refund(o: &Outcome) -> Result<(), String> {
    let c = o.check("no-double-refund");
    match c.breaches.first() {
        None => Ok(()),
        Some(b) => Err(format!("no-double-refund broken: {}", b.detail)),
    }
}
