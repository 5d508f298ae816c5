//! Small worlds for the property suite and the exhaustive scope: one merchant, a few
//! workers and rows, and a plan of faults. The proptest strategies here generate them as
//! values that shrink: a failing case loses faults, workers and rows, and its pauses get
//! shorter, so what a failure reports is the smallest plan that still fails.

use crate::scenario::builder::Scenario;
use crate::scenario::random::TRIGGER_STEPS;
use fencesim_model::{
    Cents, Job, JobId, Mechanism, MerchantId, RefundId, RefundRow, RefundState, StepKind, WorkerId,
};
use fencesim_sim::{
    Aim, Fault, FaultKind, FaultName, FaultPlan, GatewayMode, Hop, Latency, Replication, Size, Trigger,
    WallMs, WorldConfig,
};
use proptest::prelude::*;
use strum::EnumCount;

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
        // a lease on one instance has a replica lagging a tenth of the TTL, promoted at
        // once; Redlock's instances are single servers, and a failover in its plan is left out
        let single = mechanism.redis_instances() == 1;
        let replica = single.then_some(Replication { lag_ms: (self.ttl_ms / 10).max(1), switch_over_ms: 0 });
        let faults =
            self.faults.iter().filter(|f| single || !f.kind.kind().needs_replica()).cloned().collect();
        let world = WorldConfig {
            workers: self.workers,
            mechanism,
            ttl_ms: self.ttl_ms,
            gateway_mode: gateway,
            refund_latency: Latency::flat(self.latency_ms),
            lookup_latency_ms: 2,
            db_latency_ms: 0,
            redis_latency_ms: 0,
            redis_restart_ms: 0,
            replica,
            visibility_timeout_ms: self.ttl_ms + self.ttl_ms / 2,
            rows,
            jobs: vec![Job { id: JobId(1), merchant }],
            counters: vec![(merchant, 10)],
            faults: FaultPlan { faults },
            settle_ms: 20 * self.ttl_ms + 20 * self.latency_ms * u64::from(self.rows) + 5_000,
            arrivals: Vec::new(),
            settlement: Some(fencesim_sim::Settlement { latency_ms: 0 }),
            lookup_lag_ms: 0,
        };
        Scenario { name: "random", base: WallMs::hms(9, 0, 0), world }
    }
}

/// The sizes of a kind as a strategy: milliseconds shrink toward the shortest, choices
/// toward the first.
fn size(kind: FaultName, ttl: u64) -> BoxedStrategy<u64> {
    match kind.sizes(ttl) {
        Size::None => Just(0).boxed(),
        Size::Ms(range) => range.boxed(),
        Size::OneOf(choices) => (0..choices as u64).boxed(),
    }
}

/// A fault of any kind but a failover, built the way every generator builds one
/// (`FaultName::make`), aimed at the world's one merchant and first Redis instance. A
/// failover is drawn apart (`small_world_failing_over`), so that these plans, and the
/// counterexamples the suite found in them, stay what they were.
fn fault(workers: u32, rows: u32, ttl: u64) -> impl Strategy<Value = Fault> {
    let worker = (0..workers).prop_map(WorkerId);
    let kinds: Vec<FaultName> = FaultName::all().filter(|kind| !kind.needs_replica()).collect();
    let sized = (0..kinds.len()).prop_flat_map(move |index| (Just(kinds[index]), size(kinds[index], ttl)));
    let kind = (sized, worker.clone()).prop_map(|((kind, size), worker)| {
        kind.make(Aim { worker, merchant: MerchantId(7), instance: 0 }, size)
    });
    let step = (0..TRIGGER_STEPS.len()).prop_map(|i| TRIGGER_STEPS[i]);
    let trigger = prop_oneof![
        (worker.clone(), step, 1..=rows).prop_map(|(worker, step, nth)| Trigger::Step { worker, step, nth }),
        (0..=ttl * 2).prop_map(|at_ms| Trigger::At { at_ms }),
        (worker.clone(), (0..Hop::COUNT).prop_map(|i| Hop::all().nth(i).expect("a hop")), 1..=2 * rows + 4)
            .prop_map(|(worker, hop, nth)| Trigger::Call { worker, hop, nth }),
    ];
    (kind, trigger).prop_map(|(kind, trigger)| Fault { kind, trigger })
}

/// Small worlds whose plan also fails the replica over, the first or second time a worker
/// has been granted the lease or taken its token: within the replica's lag of a write
/// that matters, where a failover loses it.
pub fn small_world_failing_over() -> impl Strategy<Value = SmallWorld> {
    let steps = [StepKind::LeaseAcquired, StepKind::TokenTaken];
    let at = (0u32..4, 0..steps.len(), 1u32..=2);
    (small_world(), at).prop_map(move |(mut world, (worker, step, nth))| {
        let worker = WorkerId(worker % world.workers);
        let trigger = Trigger::Step { worker, step: steps[step], nth };
        world.faults.push(Fault { kind: FaultKind::RedisFailover { instance: 0 }, trigger });
        world
    })
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
