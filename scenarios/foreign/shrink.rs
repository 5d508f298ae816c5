//! A failing run of a team's worker program made small: `fencesim shrink FILE` on a replay
//! file that names a program. Each candidate is a controlled run of the program (the
//! file's seed, or its controlled seed), so that the same candidate fails the same way
//! every time it is tried; a run of a program costs a fraction of a second to seconds
//! where a simulated one costs a millisecond, so the steps are the simulation shrinker's
//! cheapest, within a budget of runs: the plan by delta debugging; the world cut down at
//! once to one merchant, two or three workers and a few rows; each worker and merchant
//! the plan does not need; the arrivals; the rows by delta debugging; the plan again.

use crate::files::replay_file::{ReplayFile, WorkerProgram};
use crate::foreign::controlled::Control;
use crate::foreign::kept::Kept;
use crate::foreign::run::foreign_scenario;
use crate::foreign::{run_foreign_kept, ForeignConfig};
use crate::runner::Outcome;
use crate::scenario::Scenario;
use crate::search::shrink::{ddmin, shrink_plan, shrunk_path, Shrunk};
use crate::search::smaller::{cut_down, with_arrivals, without_merchant, without_worker, Rename};
use fencesim_model::{MerchantId, RefundId, WorkerId};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// How many candidate runs a program's shrink may spend.
pub const PROGRAM_SHRINK_RUNS: u32 = 150;

/// The worlds a failing world is cut down to at once, smallest first: (workers, rows).
const CUT_DOWN_TO: [(u32, usize); 6] = [(2, 1), (2, 3), (3, 3), (2, 5), (3, 5), (2, 10)];

/// Runs the program through candidates, counting them against the budget.
struct Trials<'a> {
    config: ForeignConfig,
    invariant: &'a str,
    kept: Kept,
    runs: u32,
    budget: u32,
}

impl Trials<'_> {
    /// Whether `candidate` still breaks the invariant (a candidate the run cannot give, or
    /// one past the budget, does not).
    fn fails(&mut self, candidate: &Scenario) -> Result<bool, String> {
        if self.runs >= self.budget || candidate.world.validate().is_err() {
            return Ok(false);
        }
        if foreign_scenario(&self.config_of(candidate)).is_err() {
            return Ok(false);
        }
        self.runs += 1;
        let world = &candidate.world;
        eprintln!(
            "shrink: run {} of at most {}: {} fault(s), {} worker(s), {} row(s)",
            self.runs,
            self.budget,
            world.faults.faults.len(),
            world.workers,
            world.rows.len()
        );
        Ok(self.run(candidate)?.check(self.invariant).is_violation())
    }

    /// The run's configuration with `candidate`'s world, under the file's seed.
    fn config_of(&self, candidate: &Scenario) -> ForeignConfig {
        let seed = self.config.replay.as_ref().map_or(1, |(_, seed)| *seed);
        ForeignConfig { replay: Some((candidate.clone(), seed)), ..self.config.clone() }
    }

    /// Runs the program through `candidate`.
    fn run(&mut self, candidate: &Scenario) -> Result<Outcome, String> {
        Ok(run_foreign_kept(&self.config_of(candidate), &mut self.kept)?.outcome)
    }

    /// Keeps `trial` in `scenario` if it still fails.
    fn keep(&mut self, scenario: &mut Scenario, trial: Option<Scenario>) -> Result<bool, String> {
        match trial {
            Some(trial) if self.fails(&trial)? => {
                *scenario = trial;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The plan made as small as it still fails with.
fn smaller_plan(trials: &mut Trials, scenario: &mut Scenario) -> Result<(), String> {
    let plan = shrink_plan(&scenario.world.faults, |plan| {
        let mut trial = scenario.clone();
        trial.world.faults = plan.clone();
        trials.fails(&trial)
    })?;
    scenario.world.faults = plan;
    Ok(())
}

/// The world made as small as it still fails with.
fn smaller_world(trials: &mut Trials, scenario: &mut Scenario) -> Result<(), String> {
    let merchants: Vec<MerchantId> = scenario.world.jobs.iter().map(|job| job.merchant).collect();
    'cut: for (workers, rows) in CUT_DOWN_TO {
        for merchant in &merchants {
            for rename in [Rename::InOrder, Rename::Modulo] {
                if trials.keep(scenario, cut_down(scenario, *merchant, workers, rows, 100, rename))? {
                    break 'cut;
                }
            }
        }
    }
    for worker in (0..scenario.world.workers).rev() {
        trials.keep(scenario, without_worker(scenario, WorkerId(worker)))?;
    }
    for merchant in merchants {
        trials.keep(scenario, without_merchant(scenario, merchant))?;
    }
    if !scenario.world.arrivals.is_empty() && !trials.keep(scenario, Some(with_arrivals(scenario, &[])))? {
        let before = scenario.clone();
        let kept = ddmin(&before.world.arrivals, |kept| trials.fails(&with_arrivals(&before, kept)))?;
        *scenario = with_arrivals(&before, &kept);
    }
    let only = |scenario: &Scenario, kept: &[RefundId]| {
        let mut trial = scenario.clone();
        let kept: BTreeSet<RefundId> = kept.iter().copied().collect();
        trial.world.retain_rows(|row| kept.contains(&row.id));
        trial
    };
    let ids: Vec<RefundId> = scenario.world.rows.iter().map(|row| row.id).collect();
    let rows = ddmin(&ids, |kept| trials.fails(&only(scenario, kept)))?;
    *scenario = only(scenario, &rows);
    Ok(())
}

/// Shrinks the program's failing run that `file` holds while it still breaks `invariant`
/// (default: the file's first), and writes the smaller file beside it.
pub fn shrink_program_file(
    file: &Path,
    replay: &ReplayFile,
    invariant: Option<&str>,
) -> Result<Shrunk, String> {
    let program =
        replay.worker.clone().ok_or_else(|| format!("{}: names no worker program", file.display()))?;
    let invariant = invariant
        .map(str::to_owned)
        .or_else(|| replay.violations.first().cloned())
        .ok_or_else(|| format!("{}: the file records no broken invariant to keep", file.display()))?;
    let before = replay.scenario().map_err(|error| format!("{}: {error}", file.display()))?;
    let seed = program.controlled.unwrap_or(replay.seed);
    let config = ForeignConfig {
        command: program.command.clone(),
        gateway: replay.gateway,
        time_scale: program.time_scale,
        replay: Some((before.clone(), replay.seed)),
        keep: None,
        first_take_within: Duration::from_secs(20),
        control: Some(Control::of_program(&program, seed)),
    };
    let mut trials =
        Trials { config, invariant: &invariant, kept: Kept::new(), runs: 0, budget: PROGRAM_SHRINK_RUNS };
    if !trials.fails(&before)? {
        return Err(format!(
            "{}: a controlled run (seed {seed}) of the program does not break {invariant}",
            file.display()
        ));
    }
    let mut smallest = before.clone();
    smaller_plan(&mut trials, &mut smallest)?;
    smaller_world(&mut trials, &mut smallest)?;
    smaller_plan(&mut trials, &mut smallest)?;
    let after = last_run(&mut trials, &smallest)?;
    let program = WorkerProgram { controlled: Some(seed), ..program };
    let path = ReplayFile::of_worker(&after, program).write_as(&shrunk_path(file))?;
    Ok(Shrunk { invariant, before, after, path })
}

/// The smallest failing world run once more, for its file: its verdict is the file's.
fn last_run(trials: &mut Trials, smallest: &Scenario) -> Result<Outcome, String> {
    let outcome = trials.run(smallest)?;
    if !outcome.check(trials.invariant).is_violation() {
        return Err(format!(
            "the smallest world found no longer breaks {} on its last run",
            trials.invariant
        ));
    }
    Ok(outcome)
}
