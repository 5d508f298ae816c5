//! The shrinker: a failing scenario made as small as it can be while it still fails the
//! same way. First the plan, by delta debugging (drop half the faults, then quarters, ...,
//! then one at a time); then the numbers, each fault's size and trigger halved while it
//! still fails; then the world, fewer workers and fewer rows; then the plan once more.

use crate::runner::{run, Outcome};
use crate::scenario::Scenario;
use crate::tell::replay_file::ReplayFile;
use fencesim_model::{MerchantId, RefundId, WorkerId};
use fencesim_sim::{Fault, FaultPlan, Trigger};
use std::path::{Path, PathBuf};

/// "Does this smaller candidate still fail the same way?"
pub trait StillFails: FnMut(&Scenario) -> Result<bool, String> {}
impl<F: FnMut(&Scenario) -> Result<bool, String>> StillFails for F {}

/// Delta debugging over the plan's faults: removes chunks of the plan, halving the chunk
/// size whenever no chunk can go, down to single faults.
pub fn shrink_plan(
    plan: &FaultPlan,
    mut still_fails: impl FnMut(&FaultPlan) -> Result<bool, String>,
) -> Result<FaultPlan, String> {
    let mut faults = plan.faults.clone();
    if !faults.is_empty() && still_fails(&FaultPlan::none())? {
        return Ok(FaultPlan::none());
    }
    let mut chunks = 2;
    while faults.len() >= 2 {
        let size = faults.len().div_ceil(chunks);
        let mut removed = false;
        for start in (0..faults.len()).step_by(size) {
            let mut rest = faults.clone();
            rest.drain(start..(start + size).min(faults.len()));
            if still_fails(&FaultPlan { faults: rest.clone() })? {
                faults = rest;
                chunks = (chunks - 1).max(2);
                removed = true;
                break;
            }
        }
        if !removed {
            if chunks >= faults.len() {
                break;
            }
            chunks = (chunks * 2).min(faults.len());
        }
    }
    Ok(FaultPlan { faults })
}

/// Smaller numbers for one fault: its size, then its trigger's time or arrival count.
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
        Trigger::At { at_ms } if at_ms > 0 => vec![Trigger::At { at_ms: at_ms / 2 }],
        Trigger::Step { worker, step, nth } if nth > 1 => {
            vec![Trigger::Step { worker, step, nth: 1 }, Trigger::Step { worker, step, nth: nth / 2 }]
        }
        Trigger::Call { worker, hop, nth } if nth > 1 => {
            vec![Trigger::Call { worker, hop, nth: 1 }, Trigger::Call { worker, hop, nth: nth / 2 }]
        }
        Trigger::At { .. } | Trigger::Step { .. } | Trigger::Call { .. } => Vec::new(),
    };
    candidates.extend(trigger.into_iter().map(|trigger| Fault { kind: fault.kind, trigger }));
    candidates
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

/// One worker fewer, if no fault names the last one.
fn fewer_workers(scenario: &Scenario) -> Option<Scenario> {
    let last = WorkerId(scenario.world.workers.checked_sub(1)?);
    let named = |fault: &Fault| fault.kind.worker() == Some(last) || fault.trigger.worker() == Some(last);
    if scenario.world.workers <= 1 || scenario.world.faults.faults.iter().any(named) {
        return None;
    }
    let mut trial = scenario.clone();
    trial.world.workers -= 1;
    Some(trial)
}

/// The merchant's rows without its last `count` (none if it would be left with none).
fn fewer_rows(scenario: &Scenario, merchant: MerchantId, count: usize) -> Option<Scenario> {
    let ids: Vec<RefundId> =
        scenario.world.rows.iter().filter(|row| row.merchant == merchant).map(|row| row.id).collect();
    if count == 0 || ids.len() <= count {
        return None;
    }
    let dropped = &ids[ids.len() - count..];
    let mut trial = scenario.clone();
    trial.world.rows.retain(|row| !dropped.contains(&row.id));
    Some(trial)
}

/// Drops the merchant's last rows, half at a time and then one at a time, while it fails.
fn shrink_rows(
    scenario: &mut Scenario,
    merchant: MerchantId,
    still_fails: &mut impl StillFails,
) -> Result<(), String> {
    let count =
        |scenario: &Scenario| scenario.world.rows.iter().filter(|row| row.merchant == merchant).count();
    for halving in [true, false] {
        loop {
            let drop = if halving { count(scenario) / 2 } else { 1 };
            let Some(trial) = fewer_rows(scenario, merchant, drop) else { break };
            if !still_fails(&trial)? {
                break;
            }
            *scenario = trial;
        }
    }
    Ok(())
}

/// Fewer workers, then fewer rows per merchant, while the scenario still fails.
fn shrink_world(scenario: &mut Scenario, still_fails: &mut impl StillFails) -> Result<(), String> {
    while let Some(trial) = fewer_workers(scenario) {
        if !(trial.world.validate().is_ok() && still_fails(&trial)?) {
            break;
        }
        *scenario = trial;
    }
    let merchants: Vec<MerchantId> = scenario.world.jobs.iter().map(|job| job.merchant).collect();
    for merchant in merchants {
        shrink_rows(scenario, merchant, still_fails)?;
    }
    Ok(())
}

/// The smallest scenario found that still fails: plan, numbers, world, plan again.
pub fn shrink_scenario(scenario: &Scenario, mut still_fails: impl StillFails) -> Result<Scenario, String> {
    let mut smallest = scenario.clone();
    for round in 0..2 {
        let plan = shrink_plan(&smallest.world.faults, |plan| {
            let mut trial = smallest.clone();
            trial.world.faults = plan.clone();
            still_fails(&trial)
        })?;
        smallest.world.faults = plan;
        if round == 0 {
            shrink_numbers(&mut smallest, &mut still_fails)?;
            shrink_world(&mut smallest, &mut still_fails)?;
        }
    }
    Ok(smallest)
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
        format!(
            "faults {} -> {}, workers {} -> {}, rows {} -> {}",
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
/// file's first), and writes the smaller file beside it.
pub fn shrink_file(file: &Path, invariant: Option<&str>) -> Result<Shrunk, String> {
    let replay = ReplayFile::load(file)?;
    let invariant = invariant
        .map(str::to_owned)
        .or_else(|| replay.violations.first().cloned())
        .ok_or_else(|| format!("{}: the file records no broken invariant to keep", file.display()))?;
    let before = replay.scenario().map_err(|error| format!("{}: {error}", file.display()))?;
    let seed = replay.seed;
    let breaks =
        |candidate: &Scenario| run(candidate, seed).map(|outcome| outcome.check(&invariant).is_violation());
    if !breaks(&before)? {
        return Err(format!("{}: the run does not break {invariant}", file.display()));
    }
    let after = run(&shrink_scenario(&before, breaks)?, seed)?;
    let path = ReplayFile::from_outcome(&after).write_as(&shrunk_path(file))?;
    Ok(Shrunk { invariant, before, after, path })
}
