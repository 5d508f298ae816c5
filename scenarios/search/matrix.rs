//! The matrix: every mechanism with both gateway modes over the same seeds of the random
//! scenario, each one's first failure shrunk; the TTL sweep: how a longer TTL trades
//! violations for an outage; the debate over majority leases (`debate`); the second
//! store under each fault kind alone (`second_store`); and the lookups answered from a
//! lagging copy (`lagging`).

use crate::check::coverage::Coverage;
use crate::check::table::INVARIANTS;
use crate::runner::{run, Costs, Outcome};
use crate::scenario::random::random_world;
use crate::scenario::{self, FaultMask, Scenario};
use crate::search::debate::{debate, DebateRow};
use crate::search::explore::{run_seed, run_seeds, SeedResult};
use crate::search::lagging::{lagging, LagRow};
use crate::search::pool::Pool;
use crate::search::second_store::{second_store, StoreRow};
use crate::search::seeds::SeedRange;
use crate::search::shrink::{shrink_scenario, size};
use crate::search::verdicts::Verdicts;
use fencesim_model::{Mechanism, Step, StepKind, WorkerId};
use fencesim_sim::{EventKind, Fault, FaultKind, FaultPlan, GatewayMode, Trigger, WallMs};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// Seeds per mechanism and gateway mode in the committed report.
pub const REPORT_SEEDS: u64 = 400;
/// Seeds per TTL in the committed sweep.
pub const SWEEP_SEEDS: u64 = 60;
pub const SWEEP_TTLS_MS: [u64; 4] = [1_000, 5_000, 30_000, 300_000];

/// How many seeds each part of a matrix run takes.
#[derive(Clone, Copy, Debug)]
pub struct MatrixSizes {
    /// Per mechanism and gateway mode.
    pub seeds: u64,
    /// Per mechanism and TTL of the sweep.
    pub sweep_seeds: u64,
    /// Per setting and mechanism of the debate.
    pub debate_seeds: u64,
    /// Per fault kind and mechanism of the second store's measurement.
    pub store_seeds: u64,
    /// Per setting, mechanism and gateway of the lagging lookups.
    pub lag_seeds: u64,
    /// Per mechanism and gateway mode, the seeds whose verdicts the report keeps (the
    /// table's seeds are the first of them; the more of the two is run).
    pub verdict_seeds: u64,
}

impl MatrixSizes {
    /// The seeds every cell runs: the table's and the verdicts'.
    pub fn cell_seeds(&self) -> Result<SeedRange, String> {
        SeedRange::first(self.seeds.max(self.verdict_seeds))
    }
}

/// Runs every part of the matrix over seeds 1 to its size, on `jobs` threads.
pub fn run_matrix(sizes: MatrixSizes, jobs: usize) -> Result<MatrixFound, String> {
    let mut coverage = Coverage::new();
    let cells = matrix(sizes.cell_seeds()?, sizes.seeds, jobs, &mut coverage)?;
    let sweep = sweep(sizes.sweep_seeds)?;
    let debate = debate(SeedRange::first(sizes.debate_seeds)?, jobs)?;
    let second_store = second_store(SeedRange::first(sizes.store_seeds)?, jobs)?;
    let lagging = lagging(SeedRange::first(sizes.lag_seeds)?, jobs)?;
    Ok(MatrixFound { cells, sweep, debate, second_store, lagging, coverage })
}

/// What one matrix run finds: the cells, the TTL sweep's rows, the debate's rows, and
/// the coverage of the cells' runs. The report and its shrunk failures are made from it.
pub struct MatrixFound {
    pub cells: Vec<Cell>,
    pub sweep: Vec<SweepRow>,
    pub debate: Vec<DebateRow>,
    /// The second store, unfenced and fenced, under each fault kind alone.
    pub second_store: Vec<StoreRow>,
    /// The lagging lookups' rows.
    pub lagging: Vec<LagRow>,
    pub coverage: Coverage,
}

/// One mechanism and gateway mode over the seeds.
pub struct Cell {
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    /// The table's seeds: those up to the table's size.
    pub seeds: u64,
    /// Per invariant: seeds that broke it, and the first such seed with its trace hash.
    pub broken: BTreeMap<&'static str, (u64, u64, u64)>,
    /// What the mechanism cost, summed over the seeds.
    pub costs: Costs,
    /// Every seed's verdict, the table's and the rest.
    pub verdicts: Verdicts,
}

/// Every mechanism with both gateway modes over `seeds` (the whole range, or a shard's
/// share): those up to `table_seeds` make the table, all of them the verdicts.
pub fn matrix(
    seeds: SeedRange,
    table_seeds: u64,
    jobs: usize,
    coverage: &mut Coverage,
) -> Result<Vec<Cell>, String> {
    matrix_of(&Mechanism::ALL, seeds, table_seeds, jobs, coverage)
}

/// The given mechanisms with both gateway modes over `seeds`; those up to `table_seeds`
/// make the table (and the coverage), all of them the verdicts.
pub fn matrix_of(
    mechanisms: &[Mechanism],
    seeds: SeedRange,
    table_seeds: u64,
    jobs: usize,
    coverage: &mut Coverage,
) -> Result<Vec<Cell>, String> {
    matrix_seen(mechanisms, seeds, table_seeds, jobs, coverage, |_, _, _| {})
}

/// `matrix_of`, showing `seen` each seed's result in seed order: a test holds another
/// run of the same seeds to them without running them again.
pub fn matrix_seen(
    mechanisms: &[Mechanism],
    seeds: SeedRange,
    table_seeds: u64,
    jobs: usize,
    coverage: &mut Coverage,
    mut seen: impl FnMut(Mechanism, GatewayMode, &SeedResult),
) -> Result<Vec<Cell>, String> {
    let never = AtomicBool::new(false);
    let pool = Pool { jobs, interrupted: &never };
    let mut cells = Vec::new();
    for &mechanism in mechanisms {
        for gateway in GatewayMode::ALL {
            let mut broken: BTreeMap<&'static str, (u64, u64, u64)> = BTreeMap::new();
            let (mut costs, mut verdicts, mut ran) = (Costs::default(), Verdicts::default(), 0);
            run_seeds(
                &pool,
                seeds,
                false,
                |seed| run_seed("random", seed, mechanism, gateway, FaultMask::ALL, None),
                |_| {},
                |result| {
                    seen(mechanism, gateway, &result);
                    verdicts.add(&result);
                    if result.seed > table_seeds {
                        return;
                    }
                    ran += 1;
                    coverage.add(&result.touched);
                    costs += result.costs;
                    for invariant in &result.violations {
                        broken.entry(invariant).or_insert((0, result.seed, result.trace_hash)).0 += 1;
                    }
                },
            )?;
            cells.push(Cell { mechanism, gateway, seeds: ran, broken, costs, verdicts });
        }
    }
    Ok(cells)
}

/// The sweep's world: the seed's random world with the TTL fixed, the visibility timeout
/// a little longer than the TTL, one crash of worker A right after its first claim, and
/// one stop-the-world pause of a length that does not depend on the TTL (100 ms to 60 s,
/// log-uniform): what a real process suffers, whatever lease it holds.
pub fn sweep_scenario(seed: u64, mechanism: Mechanism, ttl_ms: u64) -> Scenario {
    let mut world = random_world(seed, mechanism, GatewayMode::Idempotent);
    world.ttl_ms = ttl_ms;
    world.visibility_timeout_ms = ttl_ms + 1_000;
    world.settle_ms = 4 * (ttl_ms + world.visibility_timeout_ms) + 120_000;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5EED);
    let pause_ms = (100.0f64 * 600f64.powf(rng.gen::<f64>())) as u64;
    let paused = WorkerId(rng.gen_range(1..world.workers));
    world.faults = FaultPlan {
        faults: vec![
            Fault {
                kind: FaultKind::Crash { worker: WorkerId(0), restart_after_ms: 100 },
                trigger: Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: 1 },
            },
            Fault {
                kind: FaultKind::Pause { worker: paused, duration_ms: pause_ms },
                trigger: Trigger::Step {
                    worker: paused,
                    step: StepKind::AfterClaim,
                    nth: rng.gen_range(1..=5),
                },
            },
        ],
    };
    Scenario { name: "random", base: WallMs::hms(12, 0, 0), world }
}

/// How long the crashed worker's merchant waited for its next lease, in milliseconds.
pub fn blocked_after_crash_ms(outcome: &Outcome) -> Option<u64> {
    let events = &outcome.record.events;
    let crash = events.iter().position(|event| {
        matches!(event.kind, EventKind::FaultFired { fault: FaultKind::Crash { .. }, .. })
    })?;
    let merchant = events[..crash].iter().rev().find_map(|event| match &event.kind {
        EventKind::Step { worker: WorkerId(0), step: Step::LeaseAcquired { merchant, .. } } => {
            Some(*merchant)
        }
        _ => None,
    })?;
    let key = outcome.scenario.world.mechanism.spec().lease_key_of(merchant, WorkerId(0));
    let crashed_at = events[crash].at_ms;
    events[crash..].iter().find_map(|event| match &event.kind {
        EventKind::LeaseGranted { key: granted, epoch: Some(_), .. } if *granted == key => {
            Some(event.at_ms - crashed_at)
        }
        _ => None,
    })
}

pub struct SweepRow {
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    pub seeds: u64,
    pub violating: u64,
    pub blocked_median_ms: u64,
    pub blocked_max_ms: u64,
    /// Seed 1's trace hash, so that a test can tell a stale report.
    pub sample_hash: u64,
}

/// One mechanism and TTL of the sweep over some of its seeds: what a row is made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepShare {
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    pub seeds: u64,
    pub violating: u64,
    /// How long the crashed worker's merchant waited, for each seed where it got a lease again.
    pub blocked_ms: Vec<u64>,
    /// Seed 1's trace hash, if seed 1 was among the seeds.
    pub seed_one_hash: Option<u64>,
}

fn sweep_share(mechanism: Mechanism, ttl_ms: u64, seeds: SeedRange) -> Result<SweepShare, String> {
    let mut share = SweepShare {
        mechanism,
        ttl_ms,
        seeds: seeds.count,
        violating: 0,
        blocked_ms: Vec::new(),
        seed_one_hash: None,
    };
    for seed in seeds.positions().map(|position| seeds.seed(position)) {
        let outcome = run(&sweep_scenario(seed, mechanism, ttl_ms), seed)?;
        if seed == 1 {
            share.seed_one_hash = Some(outcome.trace_hash);
        }
        if !outcome.passed() {
            share.violating += 1;
        }
        share.blocked_ms.extend(blocked_after_crash_ms(&outcome));
    }
    Ok(share)
}

/// The sweep over `seeds` (the whole range, or a shard's share): the TTL alone and the
/// fence, at each TTL of `SWEEP_TTLS_MS`.
pub fn sweep_shares(seeds: SeedRange) -> Result<Vec<SweepShare>, String> {
    let mut shares = Vec::new();
    for mechanism in [Mechanism::TtlOnly, Mechanism::Fenced] {
        for ttl_ms in SWEEP_TTLS_MS {
            shares.push(sweep_share(mechanism, ttl_ms, seeds)?);
        }
    }
    Ok(shares)
}

/// The sweep's rows from the shares of every shard, in shard order (one share each for
/// one run of the whole range).
pub fn sweep_rows(parts: &[Vec<SweepShare>]) -> Result<Vec<SweepRow>, String> {
    let first = parts.first().ok_or("no sweep to put together")?;
    let mut rows = Vec::with_capacity(first.len());
    for (index, share) in first.iter().enumerate() {
        let mut all = share.clone();
        for part in &parts[1..] {
            let more = part
                .get(index)
                .filter(|more| (more.mechanism, more.ttl_ms) == (share.mechanism, share.ttl_ms));
            let more = more.ok_or("the shards' sweeps do not have the same rows")?;
            all.seeds += more.seeds;
            all.violating += more.violating;
            all.blocked_ms.extend(&more.blocked_ms);
            all.seed_one_hash = all.seed_one_hash.or(more.seed_one_hash);
        }
        all.blocked_ms.sort_unstable();
        rows.push(SweepRow {
            mechanism: all.mechanism,
            ttl_ms: all.ttl_ms,
            seeds: all.seeds,
            violating: all.violating,
            blocked_median_ms: all.blocked_ms.get(all.blocked_ms.len() / 2).copied().unwrap_or(0),
            blocked_max_ms: all.blocked_ms.last().copied().unwrap_or(0),
            sample_hash: all.seed_one_hash.unwrap_or(0),
        });
    }
    Ok(rows)
}

/// The sweep over seeds 1 to `seeds`.
pub fn sweep(seeds: u64) -> Result<Vec<SweepRow>, String> {
    sweep_rows(&[sweep_shares(SeedRange::first(seeds)?)?])
}

/// A mechanism's first failure over the matrix's seeds, shrunk.
pub struct ShrunkFailure {
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    pub invariant: &'static str,
    pub seed: u64,
    /// The shrunk run: its scenario is what the replay file keeps.
    pub outcome: Outcome,
}

/// Where the shrunk first failures are kept, from the project root.
pub const SHRUNK_DIR: &str = "reports/shrunk";

/// Where a cell's shrunk first failure is kept, from the project root.
pub fn shrunk_file(mechanism: Mechanism, gateway: GatewayMode) -> String {
    format!("{SHRUNK_DIR}/{mechanism}-{gateway}.json")
}

/// The invariant a cell broke first (the smallest seed; ties go by the invariant table).
fn first_broken(cell: &Cell) -> Option<(&'static str, u64)> {
    INVARIANTS
        .iter()
        .filter_map(|invariant| cell.broken.get(invariant.name).map(|(_, seed, _)| (invariant.name, *seed)))
        .min_by_key(|(_, seed)| *seed)
}

/// Whether a shrunk world is as small as the suite's target: at most 3 faults, 3 workers
/// and 5 rows.
pub fn within_target(world: &fencesim_sim::WorldConfig) -> bool {
    world.faults.faults.len() <= 3 && world.workers <= 3 && world.rows.len() <= 5
}

/// How many seeds after a cell's first failure are tried when that one does not shrink to
/// the target (a race that needs every row of its world to fall as it does).
pub const NEXT_SEEDS: u64 = 40;

/// `seed` of a cell shrunk while it still breaks `invariant`, or none if it does not break it.
fn shrunk_seed(cell: &Cell, invariant: &str, seed: u64) -> Result<Option<Outcome>, String> {
    let found = scenario::build("random", seed, cell.mechanism, cell.gateway, FaultMask::ALL)?;
    if !run(&found, seed)?.check(invariant).is_violation() {
        return Ok(None);
    }
    let breaks = |trial: &Scenario| run(trial, seed).map(|outcome| outcome.check(invariant).is_violation());
    Ok(Some(run(&shrink_scenario(&found, seed, breaks, run)?, seed)?))
}

/// A cell's first failure shrunk; when it stays over the target, the first of the next
/// `NEXT_SEEDS` failing seeds that shrinks within it, else the smallest of them.
fn shrink_cell(cell: &Cell, invariant: &'static str, first: u64) -> Result<ShrunkFailure, String> {
    let mut best =
        (first, shrunk_seed(cell, invariant, first)?.ok_or("the first failing seed no longer fails")?);
    for seed in first + 1..=first + NEXT_SEEDS {
        if within_target(&best.1.scenario.world) {
            break;
        }
        if let Some(outcome) = shrunk_seed(cell, invariant, seed)? {
            if size(&outcome.scenario) < size(&best.1.scenario) {
                best = (seed, outcome);
            }
        }
    }
    let (seed, outcome) = best;
    Ok(ShrunkFailure { mechanism: cell.mechanism, gateway: cell.gateway, invariant, seed, outcome })
}

/// Each cell's first failure, shrunk while it still breaks the same invariant (or the next
/// failing seed that shrinks to the target, when the first does not).
pub fn shrink_first_failures(cells: &[Cell], jobs: usize) -> Result<Vec<ShrunkFailure>, String> {
    let failing: Vec<(&Cell, &'static str, u64)> =
        cells.iter().filter_map(|cell| first_broken(cell).map(|(name, seed)| (cell, name, seed))).collect();
    let never = AtomicBool::new(false);
    let mut shrunk = Vec::with_capacity(failing.len());
    Pool { jobs, interrupted: &never }.run(
        0..failing.len() as u64,
        |_| false,
        |index| {
            let (cell, invariant, seed) = failing[index as usize];
            shrink_cell(cell, invariant, seed)
        },
        |_, _| {},
        |_, failure| shrunk.push(failure),
    )?;
    Ok(shrunk)
}
