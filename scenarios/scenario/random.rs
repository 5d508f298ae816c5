//! The random scenario: the seed chooses the world (workers, merchants, refunds, TTL,
//! latencies) and a swarm fault plan (which kinds of fault are on for this seed, and how
//! many faults of them). Every choice comes from the seed, through its own stream.

use crate::scenario::builder::Scenario;
use crate::scenario::deployment::{replica, settlement, widen_settle_bound};
use fencesim_model::{
    Cents, Job, JobId, Mechanism, MerchantId, RefundId, RefundRow, RefundState, StepKind, WorkerId,
};
use fencesim_sim::{
    Aim, Arrival, Fault, FaultName, FaultPlan, GatewayMode, Hop, Latency, Size, Trigger, WallMs, WorldConfig,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::RangeInclusive;
use strum::EnumCount;

/// A stream of the seed's randomness for one purpose, so that changing how one part is
/// drawn leaves the others alone.
pub(super) fn stream(seed: u64, purpose: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(purpose);
    rng
}

const SHAPE: u64 = 1;
const AMOUNTS: u64 = 2;
const FAULTS: u64 = 3;
const COUNTERS: u64 = 4;
const RESTART: u64 = 5;
const TRIGGERS: u64 = 6;
const ARRIVALS: u64 = 7;
const LOOKUP_LAG: u64 = 10;
/// The streams of the kinds added after the first `FIRST_KINDS`, one each, from here on.
const LATER_KINDS: u64 = 1_000;
/// How many kinds the swarm's first stream switches on or off (those it had when a new
/// kind first came with a stream of its own).
const FIRST_KINDS: usize = 16;
/// How far behind its ledger the copy a lagging gateway answers lookups from runs, in the
/// random worlds: a read replica or a search index hundreds of milliseconds behind.
const LOOKUP_LAG_MS: RangeInclusive<u64> = 100..=800;
/// The share of seeds whose refunds do not all arrive at the start.
const ARRIVAL_SHARE: f64 = 0.75;

/// The longest a restarting Redis instance is down, in the random worlds: a real server
/// with a small append-only file answers again within tens of milliseconds (measured in
/// `tests/conformance.rs`).
const RESTART_MS_MOST: u64 = 50;

/// Where counters cross a digit or a width: a token compared as text, or kept in a
/// narrower integer, goes wrong only when its counter crosses one while an older holder
/// still writes.
const BOUNDARIES: [i64; 8] = [9, 99, 999, 9_999, 32_767, 65_535, 2_147_483_647, 4_294_967_295];

/// Where a merchant's token counter starts: a quarter of the time just below a boundary
/// (0 to 2 short of it), else anywhere from 0 to 50.
pub fn counter_start(rng: &mut ChaCha8Rng) -> i64 {
    if rng.gen_bool(0.25) {
        BOUNDARIES[rng.gen_range(0..BOUNDARIES.len())] - rng.gen_range(0..=2)
    } else {
        rng.gen_range(0..=50)
    }
}

/// Which fault kinds the swarm may use: one bit per kind, by `FaultKind::index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultMask(pub u32);

const _: () = assert!(FaultName::COUNT < 32, "FaultMask has one bit per fault kind");

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
        for name in names.split(',').map(str::trim).filter(|name| !name.is_empty()) {
            let index = FaultName::parse(name)? as usize;
            mask = mask.without(index);
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

/// The world's rows, jobs and counters: merchant after merchant, 5 to 80 refunds each.
struct Merchants {
    rows: Vec<RefundRow>,
    jobs: Vec<Job>,
    counters: Vec<(MerchantId, i64)>,
    most_rows: u32,
}

fn merchants(
    count: u32,
    shape: &mut ChaCha8Rng,
    amounts: &mut ChaCha8Rng,
    counters: &mut ChaCha8Rng,
) -> Merchants {
    let mut drawn = Merchants { rows: Vec::new(), jobs: Vec::new(), counters: Vec::new(), most_rows: 0 };
    for number in 0..count {
        let merchant = MerchantId(100 + number);
        let refunds = shape.gen_range(5..=80u32);
        drawn.most_rows = drawn.most_rows.max(refunds);
        for _ in 0..refunds {
            let id = RefundId(drawn.rows.len() as u32 + 1);
            let amount = Cents(amounts.gen_range(100..=20_000));
            drawn.rows.push(RefundRow { id, merchant, amount, state: RefundState::Pending, fence: 0 });
        }
        drawn.jobs.push(Job { id: JobId(number + 1), merchant });
        drawn.counters.push((merchant, counter_start(counters)));
    }
    drawn
}

/// The world the seed chooses, with no faults yet.
pub fn random_world(seed: u64, mechanism: Mechanism, gateway: GatewayMode) -> WorldConfig {
    let mut shape = stream(seed, SHAPE);
    let workers = shape.gen_range(2..=6);
    let merchant_count = shape.gen_range(1..=3u32);
    let ttl_ms = *[200u64, 500, 1_000, 2_000, 5_000].choose(&mut shape).expect("non-empty");
    let visibility_timeout_ms = shape.gen_range(ttl_ms / 2..=ttl_ms * 2);
    let base_latency = shape.gen_range(5..=60u64);
    let lookup_latency_ms = shape.gen_range(1..=10);
    let db_latency_ms = shape.gen_range(0..=3);
    let redis_latency_ms = shape.gen_range(0..=2);
    let drawn =
        merchants(merchant_count, &mut shape, &mut stream(seed, AMOUNTS), &mut stream(seed, COUNTERS));
    let per_refund_ms: Vec<u64> = std::iter::once(0)
        .chain(
            (0..drawn.rows.len()).map(|_| shape.gen_range(base_latency / 2 + 1..=base_latency * 3 / 2 + 1)),
        )
        .collect();
    let work_ms = u64::from(drawn.most_rows)
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
        rows: drawn.rows,
        jobs: drawn.jobs,
        counters: drawn.counters,
        faults: FaultPlan::none(),
        settle_ms: 4 * (ttl_ms + visibility_timeout_ms) + 3 * work_ms + 5_000,
        redis_restart_ms: stream(seed, RESTART).gen_range(0..=RESTART_MS_MOST),
        arrivals: Vec::new(),
        settlement: settlement(seed, mechanism),
        replica: replica(seed, mechanism, ttl_ms),
        lookup_lag_ms: 0,
    }
}

/// Refunds that arrive while the run goes on, in three seeds of four: each merchant gets
/// 1 to 5 arrivals of 1 to 20 refunds, each with a job of its own, at any time within
/// twice the time its first batches take. A batch selects its rows when it starts, so the
/// next job finds work even after a batch completed, and two jobs of one merchant contend
/// for its lease: a successor holds the lease long enough for a stale release to hit it,
/// and one process takes the same merchant's lease again after another has written.
pub(super) fn add_arrivals(seed: u64, world: &mut WorldConfig) {
    let mut rng = stream(seed, ARRIVALS);
    if !rng.gen_bool(ARRIVAL_SHARE) {
        return;
    }
    let horizon = horizon_ms(world);
    let base_latency = world.refund_latency.default_ms;
    let merchants: Vec<MerchantId> = world.jobs.iter().map(|job| job.merchant).collect();
    for merchant in merchants {
        for _ in 0..rng.gen_range(1..=5) {
            let at_ms = rng.gen_range(1..=2 * horizon);
            let mut rows = Vec::new();
            for _ in 0..rng.gen_range(1..=20) {
                let id = RefundId(world.rows.len() as u32 + 1);
                let amount = Cents(rng.gen_range(100..=20_000));
                world.rows.push(RefundRow { id, merchant, amount, state: RefundState::Pending, fence: 0 });
                let latency = rng.gen_range(base_latency / 2 + 1..=base_latency * 3 / 2 + 1);
                world.refund_latency.per_refund_ms.push(latency);
                rows.push(id);
            }
            let job = Job { id: JobId(world.all_jobs().count() as u32 + 1), merchant };
            world.arrivals.push(Arrival { at_ms, job, rows });
        }
    }
}

/// How long the run is busy without faults, roughly: when timed faults may land.
pub fn horizon_ms(world: &WorldConfig) -> u64 {
    let most = world
        .jobs
        .iter()
        .map(|job| world.rows.iter().filter(|row| row.merchant == job.merchant).count())
        .max()
        .unwrap_or(1);
    (most as u64 * (world.refund_latency.default_ms + world.db_latency_ms * 2)).max(world.ttl_ms)
}

/// A size for a fault of `kind`, drawn from the seed's stream.
fn draw_size(kind: FaultName, ttl_ms: u64, rng: &mut ChaCha8Rng) -> u64 {
    match kind.sizes(ttl_ms) {
        Size::None => 0,
        Size::Ms(range) => rng.gen_range(range),
        Size::OneOf(choices) => {
            let indexes: Vec<u64> = (0..choices as u64).collect();
            *indexes.choose(rng).expect("a kind with choices has at least one")
        }
    }
}

/// How many arrivals at a step a trigger may wait for: the steps a worker reaches once per
/// row may fire late in a batch, a failed gateway request at one of its tries, the others
/// (and a lookup, made only for a row already in `sending`) once or twice per run.
fn nth_arrival(step: StepKind, rng: &mut ChaCha8Rng) -> u32 {
    if step == StepKind::GatewayFailed {
        rng.gen_range(1..=3)
    } else if step.per_row() && step != StepKind::AfterLookup {
        rng.gen_range(1..=20)
    } else {
        rng.gen_range(1..=2)
    }
}

/// How many requests on a hop a trigger may wait for: a batch sends a few Redis commands
/// and a few SQL statements and gateway calls per row.
fn nth_call(hop: Hop, rng: &mut ChaCha8Rng) -> u32 {
    match hop {
        Hop::Redis => rng.gen_range(1..=8),
        Hop::Database => rng.gen_range(1..=40),
        Hop::Gateway => rng.gen_range(1..=20),
        Hop::Settlement => rng.gen_range(1..=20),
    }
}

/// Which request inside an operation a trigger waits for: half the time the first (inside
/// the worker's first operation of several round trips, which every batch with one has),
/// else one of the first three.
fn nth_within(rng: &mut ChaCha8Rng) -> u32 {
    if rng.gen_bool(0.5) {
        1
    } else {
        rng.gen_range(1..=3)
    }
}

/// The ways a swarm fault may be triggered: at a time, at a protocol step, at a worker's
/// n-th request on a hop, or at its n-th request inside one operation of several round
/// trips (counted on Redis, where a lease operation split in two lives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TriggerFamily {
    At,
    Step,
    Call,
    Within,
}

const TRIGGER_FAMILIES: [TriggerFamily; 4] =
    [TriggerFamily::At, TriggerFamily::Step, TriggerFamily::Call, TriggerFamily::Within];

/// The trigger families a seed's faults use: each on or off by a coin, as the fault kinds
/// are (all of them when the coins leave none on). A plan whose faults all land inside
/// operations, or all at steps, reaches races that a plan spread over every family reaches
/// a few times more rarely, as each of its faults is in the right family only now and then.
fn trigger_families(seed: u64) -> Vec<TriggerFamily> {
    let mut rng = stream(seed, TRIGGERS);
    let on: Vec<TriggerFamily> = TRIGGER_FAMILIES.into_iter().filter(|_| rng.gen_bool(0.5)).collect();
    if on.is_empty() {
        TRIGGER_FAMILIES.to_vec()
    } else {
        on
    }
}

/// When a swarm fault fires, in one of the seed's trigger families: at a time, at a
/// protocol step, right before one of the worker's requests on any hop, or right before
/// one of its Redis requests inside an operation (a batch sends only a few Redis commands,
/// each a lease operation, so the places where one operation takes two round trips are
/// where a fault there matters).
fn swarm_trigger(rng: &mut ChaCha8Rng, swarm: &Swarm<'_>, worker: WorkerId) -> Trigger {
    let (families, horizon) = (&swarm.families, swarm.horizon);
    match families[rng.gen_range(0..families.len())] {
        TriggerFamily::At => Trigger::At { at_ms: rng.gen_range(0..=horizon) },
        TriggerFamily::Step => {
            let step = TRIGGER_STEPS[rng.gen_range(0..TRIGGER_STEPS.len())];
            let nth = nth_arrival(step, rng);
            Trigger::Step { worker, step, nth }
        }
        TriggerFamily::Call => {
            // a world without the second store has no settlement statements to count
            let has = |hop: &Hop| *hop != Hop::Settlement || swarm.world.settlement.is_some();
            let hops: Vec<Hop> = Hop::all().filter(has).collect();
            let hop = hops[rng.gen_range(0..hops.len())];
            Trigger::Call { worker, hop, nth: nth_call(hop, rng) }
        }
        TriggerFamily::Within => Trigger::Within { worker, hop: Hop::Redis, nth: nth_within(rng) },
    }
}

/// Which worker a fault aims at. The queue hands the first jobs to the lowest ids and a
/// redelivery to the next idle worker, so in a world of six workers and one merchant four
/// of them never hold a lease: three faults in four aim at the workers that get the jobs
/// and the first redelivery, the rest at any worker.
fn aim_worker(rng: &mut ChaCha8Rng, world: &WorldConfig) -> WorkerId {
    let busy = world.workers.min(world.all_jobs().count() as u32 + 1);
    if rng.gen_bool(0.75) {
        WorkerId(rng.gen_range(0..busy))
    } else {
        WorkerId(rng.gen_range(0..world.workers))
    }
}

/// The kinds of those on that a fault fired by `trigger` may be: inside an operation on a
/// hop, only a kind that acts on that hop, on the worker's process or on the queue (a
/// gateway outage between two Redis commands is the same fault as one at the next step, so
/// drawing it there would only spend the trigger).
fn fitting_kinds(on: &[FaultName], trigger: Trigger) -> Vec<FaultName> {
    match trigger {
        Trigger::Within { hop, .. } => {
            on.iter().copied().filter(|kind| kind.hop().is_none_or(|acts| acts == hop)).collect()
        }
        Trigger::At { .. } | Trigger::Step { .. } | Trigger::Call { .. } => on.to_vec(),
    }
}

/// What one seed's swarm draws its faults from: the kinds and trigger families it has on.
struct Swarm<'a> {
    world: &'a WorldConfig,
    kinds: Vec<FaultName>,
    families: Vec<TriggerFamily>,
    horizon: u64,
}

impl Swarm<'_> {
    /// One fault: its targets, its trigger, then its kind among those on that can act
    /// where the trigger lands (when none can, it fires at the worker's n-th request on
    /// that hop instead, which any kind can), then its size.
    fn draw(&self, rng: &mut ChaCha8Rng) -> Fault {
        let worker = aim_worker(rng, self.world);
        let merchant = self.world.jobs[rng.gen_range(0..self.world.jobs.len())].merchant;
        let instance = rng.gen_range(0..5u8) % self.world.redis_instances() as u8;
        let mut trigger = swarm_trigger(rng, self, worker);
        let mut fitting = fitting_kinds(&self.kinds, trigger);
        if fitting.is_empty() {
            if let Trigger::Within { worker, hop, nth } = trigger {
                trigger = Trigger::Call { worker, hop, nth };
            }
            fitting = self.kinds.clone();
        }
        let kind = fitting[rng.gen_range(0..fitting.len())];
        let size = draw_size(kind, self.world.ttl_ms, rng);
        Fault { kind: kind.make(Aim { worker, merchant, instance }, size), trigger }
    }
}

/// Whether the world can have a fault of `kind`: a failover needs a replica, a held-up
/// settlement statement the second store.
fn fits(world: &WorldConfig, kind: FaultName) -> bool {
    (!kind.needs_replica() || world.replica.is_some())
        && (kind.hop() != Some(Hop::Settlement) || world.settlement.is_some())
}

/// One fault for this world, drawn as a swarm draws its faults but from every allowed kind
/// the world can have and every trigger family: what a guided search adds to a plan.
pub fn any_fault(rng: &mut ChaCha8Rng, world: &WorldConfig, allowed: FaultMask) -> Option<Fault> {
    let kinds: Vec<FaultName> =
        FaultName::all().filter(|&kind| allowed.allows(kind as usize) && fits(world, kind)).collect();
    if kinds.is_empty() || world.jobs.is_empty() {
        return None;
    }
    let swarm = Swarm { world, kinds, families: TRIGGER_FAMILIES.to_vec(), horizon: horizon_ms(world) };
    Some(swarm.draw(rng))
}

/// A size for a fault of `kind` in a world whose lease lives `ttl_ms`, as the swarm draws it.
pub fn any_size(kind: FaultName, ttl_ms: u64, rng: &mut ChaCha8Rng) -> u64 {
    draw_size(kind, ttl_ms, rng)
}

/// A swarm fault plan: the seed switches each allowed kind and each trigger family on or
/// off, then draws from 1 to 6 faults, or to as many as there are kinds on, of the kinds
/// and families that are on (so that each kind on has a fair chance to appear however
/// many are). Durations are scaled to the TTL, where races live. A kind added after the
/// first `FIRST_KINDS` is switched on by a coin of its own stream and then adds one fault
/// of its kind after the others: a new kind leaves every seed's plan of the earlier kinds
/// as it was, and the seeds the reports name keep their meaning.
pub fn swarm_plan(seed: u64, world: &WorldConfig, allowed: FaultMask) -> FaultPlan {
    let mut rng = stream(seed, FAULTS);
    // a kind the world cannot have (a failover without a replica, a held-up settlement
    // statement without the second store) draws no coin, so that the plans of the worlds
    // without one are what they were before the kind existed
    let fits = |kind: FaultName| fits(world, kind);
    let first = FaultName::all().take(FIRST_KINDS);
    let kinds: Vec<FaultName> =
        first.filter(|&kind| allowed.allows(kind as usize) && rng.gen_bool(0.5)).collect();
    let families = trigger_families(seed);
    let mut faults = Vec::new();
    if !kinds.is_empty() {
        let count = rng.gen_range(1..=kinds.len().max(6));
        let swarm = Swarm { world, kinds, families: families.clone(), horizon: horizon_ms(world) };
        faults.extend((0..count).map(|_| swarm.draw(&mut rng)));
    }
    for kind in FaultName::all().skip(FIRST_KINDS).filter(|&kind| allowed.allows(kind as usize) && fits(kind))
    {
        let mut rng = stream(seed, LATER_KINDS + kind as u64);
        if rng.gen_bool(0.5) {
            let swarm =
                Swarm { world, kinds: vec![kind], families: families.clone(), horizon: horizon_ms(world) };
            faults.push(swarm.draw(&mut rng));
        }
    }
    FaultPlan { faults }
}

/// How far the seed's gateway answers lookups behind its ledger: whether it lags at all
/// (half the seeds), and by how much when it does (in `LOOKUP_LAG_MS`).
pub fn lookup_lag(seed: u64) -> (bool, u64) {
    let mut rng = stream(seed, LOOKUP_LAG);
    let lags = rng.gen_bool(0.5);
    (lags, rng.gen_range(LOOKUP_LAG_MS))
}

/// The random scenario for a seed, with its swarm plan. A lagging lookup belongs with the
/// `lookup-lag` fault kind: with that kind switched off, lookups read the ledger itself.
pub fn random_scenario(
    seed: u64,
    mechanism: Mechanism,
    gateway: GatewayMode,
    allowed: FaultMask,
) -> Scenario {
    scenario_of_world(seed, random_world(seed, mechanism, gateway), allowed)
}

/// The random scenario's arrivals, swarm plan and lookup lag, for a world the seed drew.
pub(super) fn scenario_of_world(seed: u64, mut world: WorldConfig, allowed: FaultMask) -> Scenario {
    add_arrivals(seed, &mut world);
    world.faults = swarm_plan(seed, &world, allowed);
    widen_settle_bound(&mut world);
    let (lags, lag_ms) = lookup_lag(seed);
    if lags && allowed.allows(FaultName::LookupLag as usize) {
        world.lookup_lag_ms = lag_ms;
    }
    Scenario { name: "random", base: WallMs::hms(12, 0, 0), world }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_sim::FaultKind;

    #[test]
    fn the_seed_chooses_within_the_stated_ranges_and_always_the_same() {
        let mut with_arrivals = 0;
        for seed in 0..200 {
            let scenario = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            let world = &scenario.world;
            assert!((2..=6).contains(&world.workers));
            assert!((1..=3).contains(&world.jobs.len()));
            let arriving = world.arriving_rows();
            for job in &world.jobs {
                let rows = world
                    .rows
                    .iter()
                    .filter(|row| row.merchant == job.merchant && !arriving.contains(&row.id))
                    .count();
                assert!((5..=80).contains(&rows), "{rows}");
                let arrivals = world.arrivals.iter().filter(|arrival| arrival.job.merchant == job.merchant);
                assert!(arrivals.clone().count() <= 5);
                assert!(arrivals.clone().all(|arrival| (1..=20).contains(&arrival.rows.len())));
                assert!(arrivals
                    .clone()
                    .all(|arrival| arrival.at_ms >= 1 && arrival.at_ms <= 2 * horizon_ms(world)));
            }
            with_arrivals += usize::from(!world.arrivals.is_empty());
            assert!(world.faults.faults.len() <= FaultName::COUNT.max(6));
            assert!(world.validate().is_ok(), "seed {seed}: {:?}", world.validate());
            let again = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            assert_eq!(again.world, scenario.world);
        }
        assert!((120..=180).contains(&with_arrivals), "three seeds in four have arrivals: {with_arrivals}");
    }

    #[test]
    fn the_mechanism_changes_only_which_instance_a_fault_names_and_whether_redis_has_a_replica() {
        let mut replicated = 0;
        for seed in 0..200 {
            let one = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            let five = random_scenario(seed, Mechanism::Redlock, GatewayMode::Idempotent, FaultMask::ALL);
            assert_eq!(one.world.rows, five.world.rows);
            assert_eq!(five.world.replica, None, "Redlock's instances are single servers");
            if one.world.replica.is_some() {
                replicated += 1;
                continue; // a replicated world may draw a failover as well
            }
            assert_eq!(one.world.faults.faults.len(), five.world.faults.faults.len());
        }
        assert!((30..=70).contains(&replicated), "one world in four has a replica: {replicated}");
    }

    #[test]
    fn every_kind_is_drawn_by_some_seed_within_its_sizes() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..300 {
            let scenario = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            for fault in &scenario.world.faults.faults {
                seen.insert(fault.kind.kind());
                let size = fault.kind.size();
                let within = match fault.kind.kind().sizes(scenario.world.ttl_ms) {
                    Size::None => size == 0,
                    Size::Ms(range) => range.contains(&size),
                    Size::OneOf(choices) => size < choices as u64,
                };
                assert!(within, "seed {seed}: {:?} outside its sizes", fault.kind);
            }
        }
        assert_eq!(seen.len(), FaultName::COUNT, "kinds drawn: {seen:?}");
    }

    #[test]
    fn a_fault_inside_an_operation_acts_on_its_hop_the_worker_or_the_queue() {
        let (mut within, mut families_alone) = (0, 0);
        for seed in 0..400 {
            let scenario = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL);
            for fault in &scenario.world.faults.faults {
                if let Trigger::Within { hop, .. } = fault.trigger {
                    within += 1;
                    let acts = fault.kind.kind().hop();
                    assert!(acts.is_none_or(|acts| acts == hop), "seed {seed}: {fault:?}");
                }
            }
            families_alone += usize::from(trigger_families(seed).len() == 1);
        }
        assert!(within > 100, "faults inside an operation are common: {within}");
        assert!(families_alone > 40, "some seeds use one trigger family alone: {families_alone}");
    }

    #[test]
    fn a_masked_kind_never_appears() {
        let mask = FaultMask::ALL.without_names("redis-restart, crash").unwrap();
        for seed in 0..300 {
            let scenario = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, mask);
            assert!(scenario.world.faults.faults.iter().all(|fault| !matches!(
                fault.kind,
                FaultKind::RedisRestart { .. } | FaultKind::Crash { .. }
            )));
        }
        assert!(FaultMask::ALL.without_names("meteor").unwrap_err().contains("unknown fault kind 'meteor'"));
    }
}
