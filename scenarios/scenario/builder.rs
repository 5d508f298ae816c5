//! A world described the way the article tells it, one builder call per fact.

use fencesim_model::{
    Cents, Job, JobId, Mechanism, MerchantId, RefundId, RefundRow, RefundState, StepKind, WorkerId,
};
use fencesim_sim::{FaultKind, GatewayMode, Hop, Latency, Trigger, WallMs, WorldConfig};

/// A named world placed at a wall-clock time.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub base: WallMs,
    pub world: WorldConfig,
}

/// Builds a scenario in the article's order: the data, the lease, the workers, the faults.
pub struct ScenarioBuilder {
    scenario: Scenario,
}

impl Scenario {
    pub fn named(name: &'static str) -> ScenarioBuilder {
        ScenarioBuilder { scenario: Scenario { name, base: WallMs(0), world: WorldConfig::default() } }
    }

    /// The same world under another mechanism and gateway mode.
    /// A mechanism that is about the second store (it leaves it unfenced) brings the
    /// store with it, with no latency of its own, into a world that has none: the same
    /// story with one store more, which is what such a mechanism is measured on.
    pub fn with_mechanism(mut self, mechanism: Mechanism, gateway: GatewayMode) -> Scenario {
        self.world.mechanism = mechanism;
        self.world.gateway_mode = gateway;
        if !mechanism.spec().fence_settlement && self.world.settlement.is_none() {
            self.world.settlement = Some(fencesim_sim::Settlement { latency_ms: 0 });
        }
        self
    }
}

impl ScenarioBuilder {
    pub fn starts_at(mut self, base: WallMs) -> Self {
        self.scenario.base = base;
        self
    }

    /// The merchant's refunds, `r_001` upwards, all pending with fence 0, and one job to settle them.
    pub fn merchant_with_refunds(mut self, merchant: MerchantId, amounts: &[Cents]) -> Self {
        let first = self.scenario.world.rows.len() as u32 + 1;
        self.scenario.world.rows.extend(amounts.iter().enumerate().map(|(i, &amount)| RefundRow {
            id: RefundId(first + i as u32),
            merchant,
            amount,
            state: RefundState::Pending,
            fence: 0,
        }));
        let id = JobId(self.scenario.world.jobs.len() as u32 + 1);
        self.scenario.world.jobs.push(Job { id, merchant });
        self
    }

    /// `fence:settle:<merchant>` already stands at `value`: the next token is `value + 1`.
    pub fn fence_counter_stands_at(mut self, merchant: MerchantId, value: i64) -> Self {
        self.scenario.world.counters.push((merchant, value));
        self
    }

    pub fn lease_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.scenario.world.ttl_ms = ttl_ms;
        self
    }

    pub fn visibility_timeout_ms(mut self, ms: u64) -> Self {
        self.scenario.world.visibility_timeout_ms = ms;
        self
    }

    pub fn workers(mut self, count: u32) -> Self {
        self.scenario.world.workers = count;
        self
    }

    pub fn gateway_latency(mut self, latency: Latency) -> Self {
        self.scenario.world.refund_latency = latency;
        self
    }

    pub fn lookup_latency_ms(mut self, ms: u64) -> Self {
        self.scenario.world.lookup_latency_ms = ms;
        self
    }

    /// How far behind its ledger the copy the gateway answers lookups from runs.
    pub fn lookup_lag_ms(mut self, ms: u64) -> Self {
        self.scenario.world.lookup_lag_ms = ms;
        self
    }

    /// How long a restarting Redis instance refuses connections.
    pub fn redis_restart_ms(mut self, ms: u64) -> Self {
        self.scenario.world.redis_restart_ms = ms;
        self
    }

    /// Freezes `worker`'s whole process for `duration_ms` the `nth` time it reaches `step`.
    pub fn pause_at_step(mut self, worker: WorkerId, step: StepKind, nth: u32, duration_ms: u64) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults =
            plan.with(FaultKind::Pause { worker, duration_ms }, Trigger::Step { worker, step, nth });
        self
    }

    /// Freezes `worker`'s whole process for `duration_ms` right before its `nth` request on `hop`.
    pub fn pause_before_call(mut self, worker: WorkerId, hop: Hop, nth: u32, duration_ms: u64) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults =
            plan.with(FaultKind::Pause { worker, duration_ms }, Trigger::Call { worker, hop, nth });
        self
    }

    /// Freezes `worker`'s whole process for `duration_ms` at `at_ms` after the start.
    pub fn pause_at_time(mut self, worker: WorkerId, at_ms: u64, duration_ms: u64) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults =
            plan.with(FaultKind::Pause { worker, duration_ms }, Trigger::At { at_ms });
        self
    }

    /// Kills `worker`'s process the `nth` time it reaches `step`; a new one starts
    /// `restart_after_ms` later.
    pub fn crash_at_step(
        mut self,
        worker: WorkerId,
        step: StepKind,
        nth: u32,
        restart_after_ms: u64,
    ) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults =
            plan.with(FaultKind::Crash { worker, restart_after_ms }, Trigger::Step { worker, step, nth });
        self
    }

    /// Any fault of the catalogue, with its trigger.
    pub fn fault(mut self, kind: FaultKind, trigger: Trigger) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults = plan.with(kind, trigger);
        self
    }

    /// Leaves out every fault planned so far (a variation of a story starts from its world).
    pub fn without_faults(mut self) -> Self {
        self.scenario.world.faults.faults.clear();
        self
    }

    /// The world has the second store, the merchant's settlement ledger, each request to
    /// it taking `latency_ms`: settling a refund also posts it there.
    pub fn settlement_ledger(mut self, latency_ms: u64) -> Self {
        self.scenario.world.settlement = Some(fencesim_sim::Settlement { latency_ms });
        self
    }

    pub fn settles_within_ms(mut self, ms: u64) -> Self {
        self.scenario.world.settle_ms = ms;
        self
    }

    pub fn build(self) -> Scenario {
        self.scenario
    }
}

impl Scenario {
    /// This scenario again, to be changed fact by fact.
    pub fn to_builder(&self) -> ScenarioBuilder {
        ScenarioBuilder { scenario: self.clone() }
    }
}
