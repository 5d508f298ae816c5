//! The production profile: the seed's random world with faults as rare as their kind is in
//! production, beside the swarm's (which switches half the kinds on and draws one to six
//! faults, so that nearly every run has several). Here each kind has its own chance of
//! appearing in a run, one fault at most, drawn on a stream of its own: most runs have no
//! fault at all, a bug that needs one rare thing is found in tens to hundreds of runs, and
//! one that needs two rare things at once in thousands to hundreds of thousands.
//!
//! A run stands for one settlement round of a small fleet: a few workers, a few merchants'
//! batches, about a hundred requests. Each chance below is what one such round meets
//! (docs/rates.md says where each comes from).

use super::builder::Scenario;
use super::deployment::widen_settle_bound;
use super::random::{add_arrivals, any_fault, random_world, stream, swarm_plan, FaultMask};
use fencesim_model::Mechanism;
use fencesim_sim::{FaultName, FaultPlan, GatewayMode, WallMs, WorldConfig};
use rand::Rng;
use strum::EnumCount;

/// One kind's chance per run. Where each comes from, and whether it is a source's figure
/// or the project's assumption, is docs/rates.md's table, which a test holds to this one.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    pub kind: FaultName,
    /// A run has a fault of this kind once in this many runs.
    pub one_in: u32,
}

const fn rate(kind: FaultName, one_in: u32) -> Rate {
    Rate { kind, one_in }
}

/// Every kind's chance, in declaration order (checked when it compiles). A request's delay
/// or its answer's is the far tail of its service's latency; a pause, a redelivery, a
/// gateway timeout and a lagging lookup are as common as a slow batch; a restart and an
/// early expiry rarer; a clock jump and a failover the rarest.
pub const RATES: [Rate; FaultName::COUNT] = [
    rate(FaultName::Pause, 100),
    rate(FaultName::Crash, 200),
    rate(FaultName::ExpireLease, 500),
    rate(FaultName::RedisClockJump, 1_000),
    rate(FaultName::RedisRestart, 500),
    rate(FaultName::Redeliver, 100),
    rate(FaultName::DuplicateDelivery, 200),
    rate(FaultName::DbDelay, 50),
    rate(FaultName::GatewayLatency, 50),
    rate(FaultName::LostResponse, 200),
    rate(FaultName::GatewayConflicts, 200),
    rate(FaultName::RedisDelay, 50),
    rate(FaultName::GatewayTimeout, 100),
    rate(FaultName::GatewayOutage, 200),
    rate(FaultName::RedisReplyDelay, 50),
    rate(FaultName::DbReplyDelay, 50),
    rate(FaultName::SettlementDelay, 50),
    rate(FaultName::SettlementReplyDelay, 50),
    rate(FaultName::RedisFailover, 1_000),
    rate(FaultName::LookupLag, 100),
];

const _: () = {
    let mut at = 0;
    while at < RATES.len() {
        assert!(RATES[at].kind as usize == at, "RATES is in declaration order");
        assert!(RATES[at].one_in >= 2, "a production fault is rarer than one run in two");
        at += 1;
    }
};

/// The fault rates a search draws its plans under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rates {
    /// The swarm's: half the kinds on, one to six faults a run (the random scenario).
    Swarm,
    /// Each kind as rare as in production (this module's `RATES`).
    Production,
    /// The swarm's plans in production's worlds: where a bug that needs two rare things is
    /// caught often enough to be shrunk, in the world it would meet them in.
    ProductionSwarm,
}

impl Rates {
    /// The scenario that draws its plans.
    pub fn scenario(self) -> &'static str {
        match self {
            Rates::Swarm => "random",
            Rates::Production => "production",
            Rates::ProductionSwarm => "production-swarm",
        }
    }

    /// How many runs have a fault of `kind` for each one that does, under these rates:
    /// production's own chance; 1 under the swarm's plans, which draw every kind as often
    /// as any other.
    pub fn one_in(self, kind: FaultName) -> u64 {
        match self {
            Rates::Production => u64::from(RATES[kind as usize].one_in),
            Rates::Swarm | Rates::ProductionSwarm => 1,
        }
    }

    /// The rates a scenario draws its plans under: production's for its own scenario, the
    /// swarm's for every other.
    pub fn of_scenario(name: &str) -> Rates {
        [Rates::Production, Rates::ProductionSwarm]
            .into_iter()
            .find(|rates| rates.scenario() == name)
            .unwrap_or(Rates::Swarm)
    }
}

impl std::str::FromStr for Rates {
    type Err = String;

    fn from_str(text: &str) -> Result<Rates, String> {
        match text {
            "swarm" => Ok(Rates::Swarm),
            "production" => Ok(Rates::Production),
            "production-swarm" => Ok(Rates::ProductionSwarm),
            other => Err(format!("unknown rates '{other}': expected swarm, production or production-swarm")),
        }
    }
}

/// Where a kind's stream is numbered from (the random scenario's are below 2,000).
const PRODUCTION_KINDS: u64 = 3_000;

/// The production plan for a seed's world: each kind the world can have and `allowed`
/// allows, on a stream of its own, appears once with its chance, drawn as the swarm draws
/// a fault of that kind (targets, a trigger of any family, a size scaled to the TTL).
pub fn production_plan(seed: u64, world: &WorldConfig, allowed: FaultMask) -> FaultPlan {
    let mut faults = Vec::new();
    for rate in RATES.iter().filter(|rate| allowed.allows(rate.kind as usize)) {
        let mut rng = stream(seed, PRODUCTION_KINDS + rate.kind as u64);
        if rng.gen_ratio(1, rate.one_in) {
            faults.extend(any_fault(&mut rng, world, FaultMask(1 << rate.kind as u32)));
        }
    }
    FaultPlan { faults }
}

/// The lease's lengths a production world picks from: the random world's, and longer ones
/// for the batches that need them.
const TTLS_MS: [u64; 9] = [200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000];

/// How long the world's busiest merchant's batch takes with nothing going wrong, at the
/// slowest refund latency the world draws (half again its base) and every other latency.
fn batch_ms(world: &WorldConfig) -> u64 {
    let rows = |merchant| world.rows.iter().filter(|row| row.merchant == merchant).count() as u64;
    let most = world.jobs.iter().map(|job| rows(job.merchant)).max().unwrap_or(1);
    let per_row = world.refund_latency.default_ms * 3 / 2
        + 1
        + 2 * world.db_latency_ms
        + world.lookup_latency_ms
        + 6 * world.redis_latency_ms;
    most * per_row
}

/// Sizes the lease and the queue's visibility timeout as a team that runs the service
/// sizes them: the TTL at least twice a batch's normal length, the visibility timeout at
/// least a TTL and a batch. Without it a random world's TTL is often shorter than its
/// batch (under these rates, where most runs have no fault, a lease expired while held in
/// 635 of 1,000 `ttl-only` runs), and a lease that always runs out is not a rare event but
/// a misconfiguration.
fn sized(world: &mut WorldConfig) {
    let batch = batch_ms(world);
    let ttl = TTLS_MS.into_iter().find(|&ttl| ttl >= 2 * batch).unwrap_or(TTLS_MS[TTLS_MS.len() - 1]);
    let grown = world.ttl_ms.max(ttl);
    let visibility = world.visibility_timeout_ms.max(grown + batch);
    world.settle_ms += 4 * (grown - world.ttl_ms + visibility - world.visibility_timeout_ms);
    (world.ttl_ms, world.visibility_timeout_ms) = (grown, visibility);
}

/// The seed's random world (its shape, arrivals, replica and second store as the random
/// scenario draws them), its lease and visibility timeout sized for its batches (`sized`),
/// under the production plan; its lookups read the ledger except when a `lookup-lag`
/// fault holds them back.
pub fn production_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    production_world(seed, (mechanism, gateway), Rates::Production, |world| {
        production_plan(seed, world, allowed)
    })
}

/// Production's world for the seed (`production_scenario`'s: sized, its lookups reading
/// the ledger) under the swarm's plan: one to six faults, so that a bug which needs two rare
/// things is caught in hundreds to a few thousand runs (`reports/deep.md`), and its catch
/// shrinks in the world it would meet them in (where a random world's short lease or
/// lagging lookups would give one of the two for free).
pub fn production_swarm_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    production_world(seed, (mechanism, gateway), Rates::ProductionSwarm, |world| {
        swarm_plan(seed, world, allowed)
    })
}

/// The seed's world sized as production sizes it, with arrivals, under the plan `plan`
/// draws for it, named for `rates`.
fn production_world(
    seed: u64,
    (mechanism, gateway): (Mechanism, GatewayMode),
    rates: Rates,
    plan: impl FnOnce(&WorldConfig) -> FaultPlan,
) -> Scenario {
    let mut world = random_world(seed, mechanism, gateway);
    sized(&mut world);
    add_arrivals(seed, &mut world);
    world.faults = plan(&world);
    widen_settle_bound(&mut world);
    Scenario { name: rates.scenario(), base: WallMs::hms(12, 0, 0), world }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_as_rare_as_its_rate_says_under_production_and_none_is_under_the_swarm() {
        assert_eq!(Rates::Production.one_in(FaultName::Crash), 200);
        assert_eq!(Rates::Production.one_in(FaultName::RedisFailover), 1_000);
        for kind in FaultName::all() {
            assert_eq!(Rates::Swarm.one_in(kind), 1);
            assert_eq!(Rates::ProductionSwarm.one_in(kind), 1);
            assert_eq!(Rates::Production.one_in(kind), u64::from(RATES[kind as usize].one_in));
        }
    }

    #[test]
    fn most_runs_have_no_fault_and_each_kind_appears_near_its_chance() {
        let runs = 20_000u64;
        let mut counts = [0u64; FaultName::COUNT];
        let mut without = 0;
        for seed in 1..=runs {
            let scenario =
                production_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            let faults = &scenario.world.faults.faults;
            without += u64::from(faults.is_empty());
            for fault in faults {
                counts[fault.kind.kind() as usize] += 1;
            }
        }
        // 83% expected: the product of every kind's chance of not appearing (docs/rates.md)
        assert!((16_200..=17_200).contains(&without), "{without} of {runs} runs without a fault");
        // 0.18 faults a run expected: the sum of the chances
        let total: u64 = counts.iter().sum();
        assert!((3_300..=3_900).contains(&total), "{total} faults in {runs} runs");
        for rate in RATES {
            let expected = runs as f64 / f64::from(rate.one_in);
            let got = counts[rate.kind as usize] as f64;
            // a failover needs a replica (a quarter of the worlds), a settlement delay the
            // second store (a quarter): those kinds appear about four times as rarely
            let expected = match rate.kind {
                FaultName::RedisFailover | FaultName::SettlementDelay | FaultName::SettlementReplyDelay => {
                    expected / 4.0
                }
                _ => expected,
            };
            let spread = 4.0 * expected.sqrt() + 3.0;
            assert!(
                (got - expected).abs() <= spread,
                "{}: {got} where {expected:.0} expected",
                rate.kind.name()
            );
        }
    }

    #[test]
    fn a_switched_off_kind_never_appears_and_the_others_are_unchanged() {
        for seed in 1..=2_000 {
            let all = production_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            let mask = FaultMask::ALL.without(FaultName::Pause as usize);
            let some = production_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, mask);
            let kept: Vec<_> = all
                .world
                .faults
                .faults
                .iter()
                .filter(|f| f.kind.kind() != FaultName::Pause)
                .cloned()
                .collect();
            assert_eq!(some.world.faults.faults, kept, "seed {seed}");
        }
    }
}
