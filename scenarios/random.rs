//! The random scenario: the seed chooses the world (workers, merchants, refunds, TTL,
//! latencies) and a swarm fault plan (which kinds of fault are on for this seed, and how
//! many faults of them). Every choice comes from the seed, through its own stream.

use crate::scenario::Scenario;
use fencesim_model::{
    Cents, Job, JobId, Mechanism, MerchantId, RefundId, RefundRow, RefundState, StepKind, WorkerId,
};
use fencesim_sim::{
    Fault, FaultKind, FaultName, FaultPlan, GatewayMode, Latency, Persistence, Trigger, WallMs, WorldConfig,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strum::EnumCount;

/// A stream of the seed's randomness for one purpose, so that changing how one part is
/// drawn leaves the others alone.
fn stream(seed: u64, purpose: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(purpose);
    rng
}

const SHAPE: u64 = 1;
const AMOUNTS: u64 = 2;
const FAULTS: u64 = 3;

/// Which fault kinds the swarm may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultMask(pub u16);

impl FaultMask {
    pub const ALL: FaultMask = FaultMask((1 << FaultName::COUNT) - 1);
    pub const NONE: FaultMask = FaultMask(0);

    pub fn allows(self, kind: usize) -> bool {
        self.0 & (1 << kind) != 0
    }

    pub fn without(self, kind: usize) -> FaultMask {
        FaultMask(self.0 & !(1 << kind))
    }

    /// Parses `redis-restart,crash`: the kinds to switch off.
    pub fn without_names(self, names: &str) -> Result<FaultMask, String> {
        let mut mask = self;
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            mask = mask.without(FaultName::parse(name)? as usize);
        }
        Ok(mask)
    }
}

/// The steps a fault may be triggered at.
pub const TRIGGER_STEPS: [StepKind; 9] = [
    StepKind::JobReceived,
    StepKind::LeaseAcquired,
    StepKind::TokenTaken,
    StepKind::RowsSelected,
    StepKind::LeaseChecked,
    StepKind::AfterLookup,
    StepKind::AfterClaim,
    StepKind::AfterGatewayCall,
    StepKind::AfterConfirm,
];

/// The world the seed chooses, with no faults yet.
pub fn random_world(seed: u64, mechanism: Mechanism, gateway: GatewayMode) -> WorldConfig {
    let mut rng = stream(seed, SHAPE);
    let workers = rng.gen_range(2..=6);
    let merchants = rng.gen_range(1..=3u32);
    let ttl_ms = *[200u64, 500, 1_000, 2_000, 5_000].choose(&mut rng).expect("non-empty");
    let visibility_timeout_ms = rng.gen_range(ttl_ms / 2..=ttl_ms * 2);
    let base_latency = rng.gen_range(5..=60u64);
    let lookup_latency_ms = rng.gen_range(1..=10);
    let db_latency_ms = rng.gen_range(0..=3);
    let redis_latency_ms = rng.gen_range(0..=2);

    let mut amounts = stream(seed, AMOUNTS);
    let mut rows = Vec::new();
    let mut jobs = Vec::new();
    let mut counters = Vec::new();
    let mut most_rows = 0;
    for m in 0..merchants {
        let merchant = MerchantId(100 + m);
        let n = rng.gen_range(5..=80u32);
        most_rows = most_rows.max(n);
        for _ in 0..n {
            let id = RefundId(rows.len() as u32 + 1);
            let amount = Cents(amounts.gen_range(100..=20_000));
            rows.push(RefundRow { id, merchant, amount, state: RefundState::Pending, fence: 0 });
        }
        jobs.push(Job { id: JobId(m + 1), merchant });
        counters.push((merchant, rng.gen_range(0..=50)));
    }
    let per_refund_ms: Vec<u64> = std::iter::once(0)
        .chain((0..rows.len()).map(|_| rng.gen_range(base_latency / 2 + 1..=base_latency * 3 / 2 + 1)))
        .collect();
    let work_ms = u64::from(most_rows)
        * (base_latency * 2 + 2 * db_latency_ms + lookup_latency_ms + 6 * redis_latency_ms);
    WorldConfig {
        workers,
        mechanism,
        ttl_ms,
        gateway_mode: gateway,
        refund_latency: Latency { default_ms: base_latency, per_refund_ms },
        lookup_latency_ms,
        db_latency_ms,
        redis_latency_ms,
        visibility_timeout_ms,
        rows,
        jobs,
        counters,
        faults: FaultPlan::none(),
        settle_ms: 4 * (ttl_ms + visibility_timeout_ms) + 3 * work_ms + 5_000,
    }
}

/// How long the run is busy without faults, roughly: when timed faults may land.
fn horizon_ms(world: &WorldConfig) -> u64 {
    let most = world
        .jobs
        .iter()
        .map(|j| world.rows.iter().filter(|r| r.merchant == j.merchant).count())
        .max()
        .unwrap_or(1);
    (most as u64 * (world.refund_latency.default_ms + world.db_latency_ms * 2)).max(world.ttl_ms)
}

/// A swarm fault plan: the seed switches each allowed kind on or off, then draws 1 to 6
/// faults of the kinds that are on. Durations are scaled to the TTL, where races live.
pub fn swarm_plan(seed: u64, world: &WorldConfig, allowed: FaultMask) -> FaultPlan {
    let mut rng = stream(seed, FAULTS);
    let on: Vec<usize> = (0..FaultName::COUNT).filter(|&k| allowed.allows(k) && rng.gen_bool(0.5)).collect();
    if on.is_empty() {
        return FaultPlan::none();
    }
    let ttl = world.ttl_ms;
    let horizon = horizon_ms(world);
    let instances = world.redis_instances() as u8;
    let count = rng.gen_range(1..=6);
    let mut faults = Vec::with_capacity(count);
    for _ in 0..count {
        let worker = WorkerId(rng.gen_range(0..world.workers));
        let merchant = world.jobs[rng.gen_range(0..world.jobs.len())].merchant;
        let instance = rng.gen_range(0..5u8) % instances;
        let kind = match on[rng.gen_range(0..on.len())] {
            0 => FaultKind::Pause { worker, duration_ms: rng.gen_range(ttl / 4..=ttl * 3) },
            1 => FaultKind::Crash { worker, restart_after_ms: rng.gen_range(0..=ttl * 2) },
            2 => FaultKind::ExpireLease { instance, merchant },
            3 => FaultKind::RedisClockJump { instance, by_ms: rng.gen_range(ttl / 2..=ttl * 2) },
            4 => {
                let persistence = *[Persistence::None, Persistence::AofEverySec, Persistence::AofAlways]
                    .choose(&mut rng)
                    .expect("non-empty");
                FaultKind::RedisRestart { instance, persistence }
            }
            5 => FaultKind::Redeliver { worker },
            6 => FaultKind::DuplicateDelivery { worker },
            7 => FaultKind::DbDelay { worker, delay_ms: rng.gen_range(ttl / 4..=ttl * 2) },
            8 => FaultKind::GatewayLatency { worker, extra_ms: rng.gen_range(ttl / 4..=ttl * 2) },
            9 => FaultKind::LostResponse { worker },
            _ => FaultKind::GatewayConflicts { for_ms: rng.gen_range(ttl..=ttl * 3) },
        };
        let trigger = if rng.gen_bool(0.5) {
            Trigger::At { at_ms: rng.gen_range(0..=horizon) }
        } else {
            let step = TRIGGER_STEPS[rng.gen_range(0..TRIGGER_STEPS.len())];
            let nth = match step {
                StepKind::AfterClaim
                | StepKind::AfterGatewayCall
                | StepKind::AfterConfirm
                | StepKind::LeaseChecked => rng.gen_range(1..=20),
                _ => rng.gen_range(1..=2),
            };
            Trigger::Step { worker, step, nth }
        };
        faults.push(Fault { kind, trigger });
    }
    FaultPlan { faults }
}

/// The random scenario for a seed, with its swarm plan.
pub fn random_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    let mut world = random_world(seed, mechanism, gateway);
    world.faults = swarm_plan(seed, &world, allowed);
    Scenario { name: "random", base: WallMs::hms(12, 0, 0), world }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_chooses_within_the_stated_ranges_and_always_the_same() {
        for seed in 0..200 {
            let s = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            let w = &s.world;
            assert!((2..=6).contains(&w.workers));
            assert!((1..=3).contains(&w.jobs.len()));
            for job in &w.jobs {
                let n = w.rows.iter().filter(|r| r.merchant == job.merchant).count();
                assert!((5..=80).contains(&n), "{n}");
            }
            assert!(w.faults.faults.len() <= 6);
            assert!(w.validate().is_ok(), "seed {seed}: {:?}", w.validate());
            let again = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            assert_eq!(again.world, s.world);
        }
    }

    #[test]
    fn the_mechanism_changes_only_which_instance_a_fault_names() {
        for seed in 0..50 {
            let one = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            let five = random_scenario(seed, Mechanism::Redlock, GatewayMode::Idempotent, FaultMask::ALL);
            assert_eq!(one.world.rows, five.world.rows);
            assert_eq!(one.world.faults.faults.len(), five.world.faults.faults.len());
        }
    }

    #[test]
    fn a_masked_kind_never_appears() {
        let mask = FaultMask::ALL.without_names("redis-restart, crash").unwrap();
        for seed in 0..300 {
            let s = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, mask);
            assert!(s
                .world
                .faults
                .faults
                .iter()
                .all(|f| !matches!(f.kind, FaultKind::RedisRestart { .. } | FaultKind::Crash { .. })));
        }
        assert!(FaultMask::ALL.without_names("meteor").unwrap_err().contains("unknown fault kind 'meteor'"));
    }
}
