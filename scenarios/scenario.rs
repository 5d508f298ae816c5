//! Scenarios: a world described the way the article tells it, one builder call per fact.

use crate::random::{random_scenario, FaultMask};
use fencesim_model::{
    Cents, Job, JobId, Mechanism, MerchantId, RefundId, RefundRow, RefundState, StepKind, WorkerId,
};
use fencesim_sim::{FaultKind, FaultPlan, GatewayMode, Latency, Trigger, WallMs, WorldConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Worker A and worker B of the story.
pub const A: WorkerId = WorkerId(0);
pub const B: WorkerId = WorkerId(1);

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
        ScenarioBuilder {
            scenario: Scenario {
                name,
                base: WallMs(0),
                world: WorldConfig {
                    workers: 1,
                    mechanism: Mechanism::Fenced,
                    ttl_ms: 30_000,
                    gateway_mode: GatewayMode::Idempotent,
                    refund_latency: Latency::flat(30),
                    lookup_latency_ms: 5,
                    db_latency_ms: 0,
                    visibility_timeout_ms: 60_000,
                    rows: Vec::new(),
                    jobs: Vec::new(),
                    redis_latency_ms: 0,
                    counters: Vec::new(),
                    faults: FaultPlan::none(),
                    settle_ms: 120_000,
                },
            },
        }
    }

    pub fn with_strategy(mut self, mechanism: Mechanism, gateway: GatewayMode) -> Scenario {
        self.world.mechanism = mechanism;
        self.world.gateway_mode = gateway;
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

    pub fn workers(mut self, n: u32) -> Self {
        self.scenario.world.workers = n;
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

    /// Freezes `worker`'s whole process for `duration_ms` the `nth` time it reaches `step`.
    pub fn pause_at_step(mut self, worker: WorkerId, step: StepKind, nth: u32, duration_ms: u64) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults =
            plan.with(FaultKind::Pause { worker, duration_ms }, Trigger::Step { worker, step, nth });
        self
    }

    /// Freezes `worker`'s whole process for `duration_ms` at `at_ms` after the start.
    pub fn pause_at_time(mut self, worker: WorkerId, at_ms: u64, duration_ms: u64) -> Self {
        let plan = std::mem::take(&mut self.scenario.world.faults);
        self.scenario.world.faults =
            plan.with(FaultKind::Pause { worker, duration_ms }, Trigger::At { at_ms });
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

/// The article's merchant.
pub const M_4471: MerchantId = MerchantId(4471);
pub const WORKED_EXAMPLE_REFUNDS: usize = 1200;
pub const WORKED_EXAMPLE_TOTAL: Cents = Cents(8_430_000);
/// The refund A stalls on.
pub const R_815: RefundId = RefundId(815);

/// 1,200 amounts that vary, come out the same every time, make `r_815` 70.25 EUR and add
/// up to exactly 84,300.00 EUR. The mean is 70.25 EUR, so each `r_i` and `r_(1201-i)`
/// are placed the same distance above and below it.
pub fn worked_example_amounts() -> Vec<Cents> {
    let n = WORKED_EXAMPLE_REFUNDS;
    let mean = WORKED_EXAMPLE_TOTAL.0 / n as i64;
    let mut rng = ChaCha8Rng::seed_from_u64(4471);
    let mut amounts = vec![Cents(0); n];
    for i in 1..=n / 2 {
        let mirror = n + 1 - i;
        let spread = if i == R_815.0 as usize || mirror == R_815.0 as usize {
            0
        } else {
            rng.gen_range(-5_500..=5_500)
        };
        amounts[i - 1] = Cents(mean + spread);
        amounts[mirror - 1] = Cents(mean - spread);
    }
    amounts
}

/// Gateway latencies for the worked example: they vary between 24 and 40 ms, and those of
/// `r_001` to `r_814` add up to exactly 26,000 ms, so that worker A, which starts at
/// 10:00:00.000, claims `r_815` at 10:00:26.000 by the simulation's own clock.
pub fn worked_example_latency() -> Latency {
    const BEFORE_STALL_MS: u64 = 26_000;
    let n = WORKED_EXAMPLE_REFUNDS;
    let mut rng = ChaCha8Rng::seed_from_u64(26_000);
    let mut per_refund_ms = vec![0u64; n + 1];
    for ms in per_refund_ms.iter_mut().skip(1) {
        *ms = rng.gen_range(24..=40);
    }
    let before = R_815.0 as usize;
    let mut sum: u64 = per_refund_ms[1..before].iter().sum();
    let mut i = 1;
    while sum != BEFORE_STALL_MS {
        let ms = &mut per_refund_ms[i];
        if sum < BEFORE_STALL_MS && *ms < 40 {
            *ms += 1;
            sum += 1;
        } else if sum > BEFORE_STALL_MS && *ms > 24 {
            *ms -= 1;
            sum -= 1;
        }
        i = if i + 1 == before { 1 } else { i + 1 };
    }
    Latency { default_ms: 30, per_refund_ms }
}

/// The article's worked example: A stalls after claiming `r_815` at 10:00:26, its lease
/// expires at 10:00:30, the queue hands the job to B at 10:00:31, A wakes at 10:00:34.
pub fn worked_example() -> Scenario {
    Scenario::named("worked-example")
        .starts_at(WallMs::hms(10, 0, 0))
        .merchant_with_refunds(M_4471, &worked_example_amounts())
        .fence_counter_stands_at(M_4471, 32)
        .lease_ttl_ms(30_000)
        .visibility_timeout_ms(31_000)
        .workers(2)
        .gateway_latency(worked_example_latency())
        .lookup_latency_ms(5)
        .pause_at_step(A, StepKind::AfterClaim, R_815.0, 8_000)
        .settles_within_ms(120_000)
        .build()
}

/// The scenarios the command line knows, by name.
pub const SCENARIOS: [&str; 2] = ["worked-example", "random"];

/// Checks a scenario name.
pub fn known(name: &str) -> Result<&'static str, String> {
    SCENARIOS
        .iter()
        .find(|s| **s == name)
        .copied()
        .ok_or_else(|| format!("unknown scenario '{name}': expected one of {}", SCENARIOS.join(", ")))
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
    match known(name)? {
        "worked-example" => Ok(worked_example().with_strategy(mechanism, gateway)),
        _ => Ok(random_scenario(seed, mechanism, gateway, allowed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_amounts_vary_total_84_300_eur_and_r_815_is_70_25() {
        let amounts = worked_example_amounts();
        assert_eq!(amounts.len(), 1200);
        assert_eq!(amounts.iter().copied().sum::<Cents>(), WORKED_EXAMPLE_TOTAL);
        assert_eq!(amounts[814], Cents(7025));
        assert!(amounts.iter().all(|a| a.0 > 0));
        let distinct: std::collections::BTreeSet<_> = amounts.iter().collect();
        assert!(distinct.len() > 500, "amounts should vary, got {} distinct", distinct.len());
        assert_eq!(amounts, worked_example_amounts());
    }

    #[test]
    fn the_latencies_before_the_stall_add_up_to_26_seconds() {
        let l = worked_example_latency();
        let before: u64 = (1..815).map(|i| l.of(RefundId(i))).sum();
        assert_eq!(before, 26_000);
        assert!((1..=1200).all(|i| (24..=40).contains(&l.of(RefundId(i)))));
    }

    #[test]
    fn an_unknown_scenario_is_named_with_the_choices() {
        let err = known("chaos").unwrap_err();
        assert!(err.contains("unknown scenario 'chaos'") && err.contains("worked-example, random"), "{err}");
    }
}
