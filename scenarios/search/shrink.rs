//! The shrinker: a failing scenario made as small as it can be while it still fails the
//! same way. First the plan, by delta debugging (drop half the faults, then quarters, ...,
//! then one at a time); then the numbers, each fault's size and trigger halved while it
//! still fails; then the world (`smaller`): fewer workers, merchants and rows, arrivals
//! fewer and earlier; then the plan once more. Last, for a replay on real components
//! (`widen`): the settle window brought down to the shrunk world's and the races the
//! failure rests on widened.

use crate::files::replay_file::ReplayFile;
use crate::runner::{run_with, Outcome};
use crate::scenario::Scenario;
use crate::search::smaller::{
    condensed, cut_down, fewer_rows, first_batch, renames_agree, started_later, with_arrivals,
    without_merchant, without_worker, Rename,
};
use crate::search::widen::{shorter_settle, widen};
use fencesim_model::{MerchantId, RefundId, RefundRow, WorkerId};
use fencesim_sim::{Fault, FaultPlan, Trigger};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// "Does this smaller candidate still fail the same way?"
pub trait StillFails: FnMut(&Scenario) -> Result<bool, String> {}
impl<F: FnMut(&Scenario) -> Result<bool, String>> StillFails for F {}

/// Delta debugging: removes chunks of `items` while what is left still fails, halving the
/// chunk size whenever no chunk can go, down to single items.
pub fn ddmin<T: Clone>(
    items: &[T],
    mut still_fails: impl FnMut(&[T]) -> Result<bool, String>,
) -> Result<Vec<T>, String> {
    let mut items = items.to_vec();
    let mut chunks = 2;
    while items.len() >= 2 {
        let size = items.len().div_ceil(chunks);
        let mut removed = false;
        for start in (0..items.len()).step_by(size) {
            let mut rest = items.clone();
            rest.drain(start..(start + size).min(items.len()));
            if still_fails(&rest)? {
                items = rest;
                chunks = (chunks - 1).max(2);
                removed = true;
                break;
            }
        }
        if !removed {
            if chunks >= items.len() {
                break;
            }
            chunks = (chunks * 2).min(items.len());
        }
    }
    Ok(items)
}

/// Delta debugging over the plan's faults (first: does no fault at all still fail?).
pub fn shrink_plan(
    plan: &FaultPlan,
    mut still_fails: impl FnMut(&FaultPlan) -> Result<bool, String>,
) -> Result<FaultPlan, String> {
    if !plan.faults.is_empty() && still_fails(&FaultPlan::none())? {
        return Ok(FaultPlan::none());
    }
    let faults = ddmin(&plan.faults, |faults| still_fails(&FaultPlan { faults: faults.to_vec() }))?;
    Ok(FaultPlan { faults })
}

/// Smaller numbers for one fault: its size, then its trigger's time or arrival count, then
/// the worker it names.
fn smaller(fault: &Fault) -> Vec<Fault> {
    let mut candidates = Vec::new();
    let size = fault.kind.size();
    if size > 0 {
        for smaller_size in [0, size / 2, size * 3 / 4] {
            if smaller_size < size {
                candidates.push(Fault { kind: fault.kind.resized(smaller_size), trigger: fault.trigger });
            }
        }
    }
    let trigger = match fault.trigger {
        Trigger::At { at_ms } if at_ms > 0 => {
            vec![Trigger::At { at_ms: at_ms / 2 }, Trigger::At { at_ms: at_ms * 3 / 4 }]
        }
        Trigger::Step { worker, step, nth } if nth > 1 => {
            vec![Trigger::Step { worker, step, nth: 1 }, Trigger::Step { worker, step, nth: nth / 2 }]
        }
        Trigger::Call { worker, hop, nth } if nth > 1 => {
            vec![Trigger::Call { worker, hop, nth: 1 }, Trigger::Call { worker, hop, nth: nth / 2 }]
        }
        Trigger::Within { worker, hop, nth } if nth > 1 => {
            vec![Trigger::Within { worker, hop, nth: 1 }, Trigger::Within { worker, hop, nth: nth / 2 }]
        }
        Trigger::At { .. } | Trigger::Step { .. } | Trigger::Call { .. } | Trigger::Within { .. } => {
            Vec::new()
        }
    };
    candidates.extend(trigger.into_iter().map(|trigger| Fault { kind: fault.kind, trigger }));
    candidates.extend(lower_workers(fault));
    candidates
}

/// The fault aimed at a worker with a lower name (A, then the one just below): once no
/// fault names the later workers, the world can do without them.
fn lower_workers(fault: &Fault) -> Vec<Fault> {
    let named = fault.kind.worker().into_iter().chain(fault.trigger.worker()).max();
    let Some(worker) = named.filter(|worker| worker.0 > 0) else { return Vec::new() };
    let mut lower = vec![WorkerId(0)];
    if worker.0 > 1 {
        lower.push(WorkerId(worker.0 - 1));
    }
    let moved = |to: WorkerId| {
        let kind = if fault.kind.worker() == Some(worker) { fault.kind.for_worker(to) } else { fault.kind };
        let trigger =
            if fault.trigger.worker() == Some(worker) { fault.trigger.for_worker(to) } else { fault.trigger };
        Fault { kind, trigger }
    };
    lower.into_iter().map(moved).collect()
}

/// Halves each fault's numbers while the scenario still fails; repeats until none moves.
fn shrink_numbers(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    loop {
        let mut moved = false;
        for index in 0..scenario.world.faults.faults.len() {
            for candidate in smaller(&scenario.world.faults.faults[index]) {
                let mut trial = scenario.clone();
                trial.world.faults.faults[index] = candidate;
                if trial.world.validate().is_ok() && still_fails(&trial)? {
                    *scenario = trial;
                    moved = true;
                    break;
                }
            }
        }
        if !moved {
            return Ok(());
        }
    }
}

/// The fewest rows a merchant's batch is condensed into, tried smallest first, and how
/// long the condensed batch lasts at the gateway against the whole one, in percent, the
/// same first: a race often hangs on a batch outlasting a timeout by a few milliseconds,
/// and a batch of fewer rows loses their SQL and lookup time, so both ways are tried.
const CONDENSED_ROWS: [usize; 4] = [1, 2, 3, 5];
const CONDENSED_PERCENT: [u64; 8] = [100, 50, 150, 75, 200, 25, 300, 500];

/// Both ways of renaming the workers of a world cut down.
const RENAMES: [Rename; 2] = [Rename::InOrder, Rename::Modulo];

/// Each merchant's batch condensed into as few slower rows as still fail, then started as
/// many rows later as still fails, then delta debugging over the rows (any rows, of any
/// merchant), then one merchant's rows at a time from either end, while the scenario still
/// fails.
fn shrink_rows(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    let merchants: Vec<MerchantId> = scenario.world.jobs.iter().map(|job| job.merchant).collect();
    for merchant in &merchants {
        'condense: for keep in CONDENSED_ROWS {
            for percent in CONDENSED_PERCENT {
                if keep_if_fails(scenario, condensed(scenario, *merchant, keep, percent), still_fails)? {
                    break 'condense;
                }
            }
        }
    }
    for merchant in &merchants {
        start_later(scenario, *merchant, still_fails)?;
    }
    let only = |scenario: &Scenario, rows: &[RefundRow]| {
        let mut trial = scenario.clone();
        let kept: BTreeSet<RefundId> = rows.iter().map(|row| row.id).collect();
        trial.world.retain_rows(|row| kept.contains(&row.id));
        trial
    };
    let rows = ddmin(&scenario.world.rows, |rows| {
        let trial = only(scenario, rows);
        Ok(trial.world.validate().is_ok() && still_fails(&trial)?)
    })?;
    *scenario = only(scenario, &rows);
    for merchant in merchants {
        for from_end in [true, false] {
            while keep_if_fails(scenario, fewer_rows(scenario, merchant, 1, from_end), still_fails)? {}
        }
    }
    Ok(())
}

/// How far off the estimate of the rows' time a batch started later may be.
const START_SLACK_MS: [i64; 7] = [0, -2, 2, -5, 5, -10, 10];

/// The merchant's batch started as many rows later as still fails, the most first: all
/// but one row, all but two, three, five, then half.
fn start_later(
    scenario: &mut Scenario,
    merchant: MerchantId,
    still_fails: &mut impl StillFails,
) -> Result<(), String> {
    let own = first_batch(&scenario.world, merchant).len();
    let counts =
        [own.saturating_sub(1), own.saturating_sub(2), own.saturating_sub(3), own.saturating_sub(5), own / 2];
    for count in counts {
        for slack in START_SLACK_MS {
            if keep_if_fails(scenario, started_later(scenario, merchant, count, slack), still_fails)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Keeps `trial` if it is a valid world that still fails.
fn keep_if_fails(
    scenario: &mut Scenario,
    trial: Option<Scenario>,
    still_fails: &mut impl StillFails,
) -> Result<bool, String> {
    let Some(trial) = trial else { return Ok(false) };
    if trial.world.validate().is_ok() && still_fails(&trial)? {
        *scenario = trial;
        return Ok(true);
    }
    Ok(false)
}

/// The small worlds a failing world is cut down to at once, smallest first: (workers, rows).
const CUT_DOWN_TO: [(u32, usize); 9] =
    [(1, 1), (2, 1), (1, 3), (2, 3), (3, 1), (3, 3), (1, 5), (2, 5), (3, 5)];

/// The smallest world of `CUT_DOWN_TO` that still fails, if one does.
fn cut_down_world(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    let merchants: Vec<MerchantId> = scenario.world.jobs.iter().map(|job| job.merchant).collect();
    for (workers, rows) in CUT_DOWN_TO {
        let ways = merchants
            .iter()
            .flat_map(|m| RENAMES.iter().flat_map(move |r| CONDENSED_PERCENT.map(|p| (*m, *r, p))));
        let same_either_way = renames_agree(scenario, workers);
        for (merchant, rename, percent) in ways {
            if matches!(rename, Rename::Modulo) && same_either_way {
                continue; // the plan names no worker that the two ways rename apart
            }
            let trial = cut_down(scenario, merchant, workers, rows, percent, rename);
            if keep_if_fails(scenario, trial, still_fails)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The world without its arrivals, or else delta debugging over them, each dropped with
/// its rows.
fn shrink_arrivals(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    if scenario.world.arrivals.is_empty() {
        return Ok(());
    }
    let before = scenario.clone();
    if keep_if_fails(scenario, Some(with_arrivals(&before, &[])), still_fails)? {
        return Ok(());
    }
    let kept = ddmin(&before.world.arrivals, |kept| still_fails(&with_arrivals(&before, kept)))?;
    if kept.len() < before.world.arrivals.len() {
        *scenario = with_arrivals(&before, &kept);
    }
    Ok(())
}

/// Each arrival brought earlier while the scenario still fails: to the arrival before it
/// (or the start), or halfway, a quarter or an eighth of the way there, until none moves.
/// A random world spreads its arrivals over seconds, and a shrunk failure often has its
/// one arrival seconds after everything before it has come to rest: the story is no
/// clearer for the wait, and a live replay waits it out at its time scale.
fn earlier_arrivals(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    'again: loop {
        for index in 0..scenario.world.arrivals.len() {
            let at = scenario.world.arrivals[index].at_ms;
            let floor = index.checked_sub(1).map_or(0, |before| scenario.world.arrivals[before].at_ms);
            let gap = at.saturating_sub(floor);
            let mut tried = BTreeSet::new();
            for earlier in [floor, floor + gap / 2, at - gap / 4, at - gap / 8] {
                if earlier >= at || !tried.insert(earlier) {
                    continue;
                }
                let mut trial = scenario.clone();
                trial.world.arrivals[index].at_ms = earlier;
                if keep_if_fails(scenario, Some(trial), still_fails)? {
                    continue 'again;
                }
            }
        }
        return Ok(());
    }
}

/// The world without a replica, a second store or a lagging lookup its failure does not
/// need (a plan with a failover needs a replica; a mechanism about the second store needs
/// one), cut down at once, then its arrivals (fewer, then earlier), then fewer workers (any
/// the plan does not name), fewer merchants, then fewer rows per merchant, while the
/// scenario still fails.
/// A world with less in it is shorter to read, and more of them can be played live.
fn shrink_world(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    if scenario.world.replica.is_some() {
        let mut single = scenario.clone();
        single.world.replica = None;
        keep_if_fails(scenario, Some(single), still_fails)?;
    }
    if scenario.world.settlement.is_some() && scenario.world.mechanism.spec().fence_settlement {
        let mut one_store = scenario.clone();
        one_store.world.settlement = None;
        keep_if_fails(scenario, Some(one_store), still_fails)?;
    }
    if scenario.world.lookup_lag_ms > 0 {
        let mut current = scenario.clone();
        current.world.lookup_lag_ms = 0;
        keep_if_fails(scenario, Some(current), still_fails)?;
    }
    cut_down_world(scenario, still_fails)?;
    shrink_arrivals(scenario, still_fails)?;
    earlier_arrivals(scenario, still_fails)?;
    let mut worker = scenario.world.workers;
    while worker > 0 {
        worker -= 1;
        keep_if_fails(scenario, without_worker(scenario, WorkerId(worker)), still_fails)?;
    }
    let merchants: Vec<MerchantId> = scenario.world.jobs.iter().map(|job| job.merchant).collect();
    for merchant in &merchants {
        keep_if_fails(scenario, without_merchant(scenario, *merchant), still_fails)?;
    }
    shrink_rows(scenario, still_fails)
}

/// The shortest TTL and visibility timeout a shrunk world gets: below them a run is all
/// lease churn and redelivery, slow to run and no easier to read.
const SHORTEST_TTL_MS: u64 = 10;
const SHORTEST_VISIBILITY_MS: u64 = 40;

/// How many candidate runs one shrink may spend in each order: shrinking stops there with
/// the smallest failing scenario found so far.
pub const SHRINK_RUNS: u32 = 1000;

/// The world's own durations halved, one at a time: the lease's TTL and the queue's
/// visibility timeout (a shorter run needs fewer rows to reach the same race); a replica
/// gone, or its lag halved; and the settle window brought down towards the floor the
/// shrunk world's shape gives it.
fn shorter_times(scenario: &Scenario) -> Vec<Scenario> {
    let mut candidates = Vec::new();
    let world = &scenario.world;
    if world.ttl_ms / 2 >= SHORTEST_TTL_MS {
        let mut trial = scenario.clone();
        trial.world.ttl_ms /= 2;
        candidates.push(trial);
    }
    if world.visibility_timeout_ms / 2 >= SHORTEST_VISIBILITY_MS {
        let mut trial = scenario.clone();
        trial.world.visibility_timeout_ms /= 2;
        candidates.push(trial);
    }
    if let Some(replica) = world.replica {
        let mut single = scenario.clone();
        single.world.replica = None;
        candidates.push(single);
        if replica.lag_ms > 1 {
            let mut trial = scenario.clone();
            trial.world.replica = Some(fencesim_sim::Replication { lag_ms: replica.lag_ms / 2, ..replica });
            candidates.push(trial);
        }
    }
    candidates.extend(shorter_settle(scenario));
    candidates
}

/// Halves the world's durations while the scenario still fails.
fn shrink_times(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    'again: loop {
        for trial in shorter_times(scenario) {
            if keep_if_fails(scenario, Some(trial), still_fails)? {
                continue 'again;
            }
        }
        return Ok(());
    }
}

/// The two orders a round may take: the world's durations before its size, or after.
/// Greedy shrinking stops in a local minimum, and which one depends on the order: a shorter
/// visibility timeout first lets most rows go, while rows first can keep a race that a
/// shorter timeout would lose. Both are tried and the smaller result kept.
#[derive(Clone, Copy)]
enum Order {
    TimesFirst,
    WorldFirst,
}

/// One shrink in one order, within `SHRINK_RUNS` candidate runs.
fn shrink_in_order(
    scenario: &Scenario,
    order: Order,
    still_fails: &mut impl StillFails,
) -> Result<Scenario, String> {
    let mut runs = 0;
    let mut still_fails = |trial: &Scenario| {
        runs += 1;
        if runs > SHRINK_RUNS {
            return Ok(false);
        }
        still_fails(trial)
    };
    let mut smallest = scenario.clone();
    for _round in 0..6 {
        let before = smallest.clone();
        let plan = shrink_plan(&smallest.world.faults, |plan| {
            let mut trial = smallest.clone();
            trial.world.faults = plan.clone();
            still_fails(&trial)
        })?;
        smallest.world.faults = plan;
        shrink_numbers(&mut smallest, &mut still_fails)?;
        match order {
            Order::TimesFirst => {
                shrink_times(&mut smallest, &mut still_fails)?;
                shrink_world(&mut smallest, &mut still_fails)?;
            }
            Order::WorldFirst => {
                shrink_world(&mut smallest, &mut still_fails)?;
                shrink_times(&mut smallest, &mut still_fails)?;
            }
        }
        if smallest.world == before.world {
            break;
        }
    }
    Ok(smallest)
}

/// How big a failing scenario is: its faults, workers, rows and arrivals together (a story
/// with one worker more and ten rows fewer is the smaller one to read).
pub fn size(scenario: &Scenario) -> usize {
    let world = &scenario.world;
    world.faults.faults.len() + world.workers as usize + world.rows.len() + world.arrivals.len()
}

/// The smallest scenario found that still fails: the plan, the numbers, the world and its
/// durations, round after round while any of them gets smaller, in both orders; then its
/// races widened (`widen`). `run` plays a candidate under a seed (`seed` is the failure's).
pub fn shrink_scenario(
    scenario: &Scenario,
    seed: u64,
    mut still_fails: impl StillFails,
    run: impl FnMut(&Scenario, u64) -> Result<Outcome, String>,
) -> Result<Scenario, String> {
    let times_first = shrink_in_order(scenario, Order::TimesFirst, &mut still_fails)?;
    let world_first = shrink_in_order(scenario, Order::WorldFirst, &mut still_fails)?;
    let smallest = if size(&world_first) < size(&times_first) { world_first } else { times_first };
    widen(&smallest, seed, still_fails, run)
}

/// A replay file made small.
pub struct Shrunk {
    pub invariant: String,
    pub before: Scenario,
    pub after: Outcome,
    pub path: PathBuf,
}

impl Shrunk {
    /// What shrinking took away, in one line.
    pub fn removed(&self) -> String {
        let (before, after) = (&self.before.world, &self.after.scenario.world);
        let arrivals = if before.arrivals.is_empty() {
            String::new()
        } else {
            format!(", arrivals {} -> {}", before.arrivals.len(), after.arrivals.len())
        };
        format!(
            "faults {} -> {}, workers {} -> {}, rows {} -> {}{arrivals}",
            before.faults.faults.len(),
            after.faults.faults.len(),
            before.workers,
            after.workers,
            before.rows.len(),
            after.rows.len()
        )
    }
}

/// `failure.json` becomes `failure.shrunk.json`, beside it.
pub fn shrunk_path(file: &Path) -> PathBuf {
    let stem = file.file_stem().map_or("replay".into(), |stem| stem.to_string_lossy().into_owned());
    file.with_file_name(format!("{stem}.shrunk.json"))
}

/// Shrinks the failure a replay file holds while it still breaks `invariant` (default: the
/// file's first), and writes the smaller file beside it (a team's program's run is shrunk
/// by `foreign::shrink`).
pub fn shrink_file(file: &Path, invariant: Option<&str>) -> Result<Shrunk, String> {
    let replay = ReplayFile::load(file)?;
    let invariant = invariant
        .map(str::to_owned)
        .or_else(|| replay.violations.first().cloned())
        .ok_or_else(|| format!("{}: the file records no broken invariant to keep", file.display()))?;
    let before = replay.scenario().map_err(|error| format!("{}: {error}", file.display()))?;
    let seed = replay.seed;
    let breaks = |candidate: &Scenario| {
        run_with(candidate, seed, replay.mutant).map(|outcome| outcome.check(&invariant).is_violation())
    };
    if !breaks(&before)? {
        return Err(format!("{}: the run does not break {invariant}", file.display()));
    }
    let run = |candidate: &Scenario, seed: u64| run_with(candidate, seed, replay.mutant);
    let after = run_with(&shrink_scenario(&before, seed, breaks, run)?, seed, replay.mutant)?;
    let path = ReplayFile::from_outcome(&after).write_as(&shrunk_path(file))?;
    Ok(Shrunk { invariant, before, after, path })
}
