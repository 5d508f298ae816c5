//! How good the suite is at finding real bugs. Each mutant plants one realistic bug in the
//! worker or lock code of the mechanism that has that line; the suite's search (the
//! random scenario, seed after seed) runs the same seed with and without the bug, and the
//! mutant is caught when the bug breaks an invariant the correct code does not break on
//! that seed. The catching scenario is then shrunk (the plan by delta debugging, then its
//! numbers, then the world) to the smallest that still catches it.

use crate::files::replay_file::ReplayFile;
use crate::mutant::Mutant;
use crate::runner::{run, run_planted, Outcome};
use crate::scenario::production::Rates;
use crate::scenario::{self, FaultMask, Scenario};
use crate::search::guided::{self, features::Features, Bounds, Judged};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use crate::search::shrink::{shrink_scenario, size};
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Where each mutant's shrunk catching run is kept, from the project root.
pub const MUTANT_FILES: &str = "reports/mutants";

/// Where each search starts: the seeds are far apart so that the searches are independent.
pub const START_STRIDE: u64 = 100_000;

/// Invariants newly broken, each with whether its chain passes through the bug's act.
type NewBreaches = Vec<(&'static str, bool)>;

/// The invariants the bug breaks on this scenario that the correct code does not, in the
/// table's order, each with whether its first breach's chain passes through the bug's
/// act; and the run with the bug.
fn newly_broken(scenario: &Scenario, seed: u64, mutant: Mutant) -> Result<(NewBreaches, Outcome), String> {
    let right = run(scenario, seed)?;
    let wrong = run_planted(scenario, seed, mutant)?;
    let before = right.broken();
    let new = wrong.checks.iter().filter(|check| check.is_violation() && !before.contains(&check.invariant));
    let new = new.map(|check| (check.invariant, wrong.through_the_bug(check))).collect();
    Ok((new, wrong))
}

/// What one seed says of a mutant: caught (by this invariant, through the bug's chain),
/// caught only by the old rule (a new breach whose chain misses the bug), or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Caught(&'static str, u64),
    OldRuleOnly(&'static str),
    Missed,
}

/// Whether the bug breaks, on this scenario, an invariant that the correct code does not,
/// through a chain that passes through the bug's act.
pub fn verdict(scenario: &Scenario, seed: u64, mutant: Mutant) -> Result<Verdict, String> {
    Ok(verdict_and_run(scenario, seed, mutant)?.0)
}

/// `verdict`, with the run with the bug (what a guided search reads its features from).
pub fn verdict_and_run(scenario: &Scenario, seed: u64, mutant: Mutant) -> Result<(Verdict, Outcome), String> {
    let (new, wrong) = newly_broken(scenario, seed, mutant)?;
    let verdict = match (new.iter().find(|(_, through)| *through), new.first()) {
        (Some((invariant, _)), _) => Verdict::Caught(invariant, wrong.trace_hash),
        (None, Some((invariant, _))) => Verdict::OldRuleOnly(invariant),
        (None, None) => Verdict::Missed,
    };
    Ok((verdict, wrong))
}

/// The invariant that catches the bug on this scenario (see `verdict`), if any.
pub fn catches(
    scenario: &Scenario,
    seed: u64,
    mutant: Mutant,
) -> Result<Option<(&'static str, u64)>, String> {
    Ok(match verdict(scenario, seed, mutant)? {
        Verdict::Caught(invariant, hash) => Some((invariant, hash)),
        Verdict::OldRuleOnly(_) | Verdict::Missed => None,
    })
}

/// The scenario a mutant is searched on: the seed's random world, under the mechanism the
/// bug is planted in.
pub fn scenario_for(mutant: Mutant, seed: u64) -> Result<Scenario, String> {
    scenario_under(mutant, seed, Rates::Swarm)
}

/// The scenario a mutant is searched on under `rates`: the seed's random world with the
/// swarm's plan or the production profile's.
pub fn scenario_under(mutant: Mutant, seed: u64, rates: Rates) -> Result<Scenario, String> {
    scenario::build(rates.scenario(), seed, mutant.baseline(), mutant.gateway(), FaultMask::ALL)
}

/// The smallest scenario (plan, numbers, world) on which the mutant still breaks the same
/// invariant and the correct code does not (a smaller story may break others too).
pub fn shrink(scenario: &Scenario, seed: u64, mutant: Mutant, invariant: &str) -> Result<Scenario, String> {
    let still_fails =
        |trial: &Scenario| Ok(newly_broken(trial, seed, mutant)?.0.contains(&(invariant, true)));
    shrink_scenario(scenario, seed, still_fails, |trial, seed| run_planted(trial, seed, mutant))
}

/// One search's result: the first seed from its start that catches the mutant (with the
/// invariant and the buggy run's trace hash), and how many seeds before it the old rule (a
/// new breach, wherever its chain goes) would have counted as a catch.
pub struct Search {
    pub catch: Option<(u64, &'static str, u64)>,
    pub old_rule_only: u64,
}

/// One search: the first seed from `start` (within `budget` seeds) that catches it.
pub fn search(mutant: Mutant, start: u64, budget: u64, rates: Rates) -> Result<Search, String> {
    let seeds = SeedRange::new(start, budget)?;
    let mut old_rule_only = 0;
    for seed in seeds.positions().map(|position| seeds.seed(position)) {
        match verdict(&scenario_under(mutant, seed, rates)?, seed, mutant)? {
            Verdict::Caught(invariant, hash) => {
                return Ok(Search { catch: Some((seed, invariant, hash)), old_rule_only })
            }
            Verdict::OldRuleOnly(_) => old_rule_only += 1,
            Verdict::Missed => {}
        }
    }
    Ok(Search { catch: None, old_rule_only })
}

/// One guided search for the mutant (`search::guided`): fresh seeds from `start`, at most
/// `budget` runs, each judged as `verdict` judges a seed, on one thread (the catalogue's
/// mutants share the pool's). The run, from 1, that first caught it, if one did.
pub fn search_guided(mutant: Mutant, start: u64, budget: u64, rates: Rates) -> Result<Option<u64>, String> {
    let never = AtomicBool::new(false);
    let bounds = Bounds { from: start, runs: budget, allowed: FaultMask::ALL, stop_at_first: true, rates };
    let mut caught = None;
    guided::search(
        &bounds,
        &Pool { jobs: 1, interrupted: &never },
        |seed| scenario_under(mutant, seed, rates),
        |candidate| {
            let (verdict, wrong) = verdict_and_run(&candidate.scenario, candidate.seed, mutant)?;
            let (features, _) = Features::of(&wrong.record, &wrong.scenario.world);
            Ok(Judged { features, found: matches!(verdict, Verdict::Caught(..)), result: verdict })
        },
        |_, _| {},
        |candidate, verdict| {
            if matches!(verdict, Verdict::Caught(..)) {
                caught.get_or_insert(candidate.run + 1);
            }
        },
    )?;
    Ok(caught)
}

/// The middle of some counts (the upper one of an even number).
pub fn median(counts: &[u64]) -> u64 {
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}

#[derive(Clone, Debug, Serialize)]
pub struct MutantReport {
    pub name: &'static str,
    pub baseline: &'static str,
    pub gateway: &'static str,
    /// The public report a field mutant is modelled on (none for the catalogue's own).
    pub source: Option<&'static str>,
    pub caught: bool,
    /// The invariant that caught it in the first search.
    pub invariant: Option<&'static str>,
    /// Seeds run until it was caught, in each search (a search that did not catch it
    /// counts its whole budget).
    pub seeds_to_detect: Vec<u64>,
    pub seeds_to_detect_median: u64,
    /// The smallest shrunk catching scenario (of `SHRINK_STARTS` searches' catches): faults,
    /// workers and rows left.
    pub shrunk_faults: Option<usize>,
    pub shrunk_workers: Option<u32>,
    pub shrunk_rows: Option<usize>,
    /// The shrunk catching run, with the mutant planted, as a replay file.
    #[serde(skip)]
    pub shrunk_file: Option<ReplayFile>,
    /// The first search's catching seed and the buggy run's trace hash.
    pub first_seed: Option<u64>,
    pub trace_hash: Option<String>,
    pub wall_ms: u64,
    /// Seeds, over all its searches up to each one's catch, that the old rule (a new breach,
    /// wherever its chain goes) counted as a catch and this one does not.
    pub old_rule_only: u64,
    /// With `--search uniform,guided`: the guided search's runs until it caught the mutant,
    /// from the same starts with the same budget (a search that did not catch it counts its
    /// whole budget), and their median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guided_runs_to_detect: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guided_median: Option<u64>,
}

/// How many searches' catching scenarios are shrunk, of those that caught the mutant by
/// the first search's invariant: greedy shrinking stops in a local minimum that depends on
/// where it starts, and a race reached through a long batch in one seed may be reached
/// with a few rows in another.
pub const SHRINK_STARTS: usize = 5;

/// The smallest of the shrunk catching runs of the first `SHRINK_STARTS` catches by the
/// first catch's invariant (the earliest among equals).
fn smallest_catch(
    mutant: Mutant,
    catches: &[(u64, &'static str, u64)],
    rates: Rates,
) -> Result<Option<Outcome>, String> {
    let Some(&(_, invariant, _)) = catches.first() else { return Ok(None) };
    let mut smallest: Option<Outcome> = None;
    for &(seed, _, _) in catches.iter().filter(|catch| catch.1 == invariant).take(SHRINK_STARTS) {
        let outcome = run_planted(
            &shrink(&scenario_under(mutant, seed, rates)?, seed, mutant, invariant)?,
            seed,
            mutant,
        )?;
        if smallest.as_ref().is_none_or(|kept| size(&outcome.scenario) < size(&kept.scenario)) {
            smallest = Some(outcome);
        }
    }
    Ok(smallest)
}

/// Runs to the first catch by the guided search, from each search's start.
fn guided_searches(mutant: Mutant, starts: u64, budget: u64, rates: Rates) -> Result<Vec<u64>, String> {
    (0..starts.max(1))
        .map(|search_number| {
            Ok(search_guided(mutant, 1 + search_number * START_STRIDE, budget, rates)?.unwrap_or(budget))
        })
        .collect()
}

/// How a catalogue is searched: `starts` searches of at most `budget` seeds each, the
/// guided search beside the uniform one when `guided`, under `rates`.
#[derive(Clone, Copy, Debug)]
pub struct Searches {
    pub starts: u64,
    pub budget: u64,
    pub guided: bool,
    pub rates: Rates,
}

/// The mutant searched for from `starts` starts of at most `budget` seeds, its catch
/// shrunk; with `guided`, searched for by the guided search from the same starts as well.
pub fn evaluate(mutant: Mutant, searches: Searches) -> Result<MutantReport, String> {
    let Searches { starts, budget, guided, rates } = searches;
    let clock = Instant::now();
    let guided_runs_to_detect = guided.then(|| guided_searches(mutant, starts, budget, rates)).transpose()?;
    let mut seeds_to_detect = Vec::new();
    let mut catches = Vec::new();
    let mut old_rule_only = 0;
    for search_number in 0..starts.max(1) {
        let start = 1 + search_number * START_STRIDE;
        let found = search(mutant, start, budget, rates)?;
        old_rule_only += found.old_rule_only;
        match found.catch {
            Some(catch) => {
                seeds_to_detect.push(catch.0 - start + 1);
                catches.push(catch);
            }
            None => seeds_to_detect.push(budget),
        }
    }
    let first = catches.first().copied();
    let shrunk = smallest_catch(mutant, &catches, rates)?;
    let shrunk_file = shrunk.as_ref().map(ReplayFile::from_outcome);
    let shrunk = shrunk.as_ref().map(|outcome| &outcome.scenario.world);
    Ok(MutantReport {
        name: mutant.name(),
        baseline: mutant.baseline().name(),
        gateway: mutant.gateway().name(),
        source: mutant.source(),
        caught: first.is_some(),
        invariant: first.map(|found| found.1),
        seeds_to_detect_median: median(&seeds_to_detect),
        seeds_to_detect,
        shrunk_faults: shrunk.map(|world| world.faults.faults.len()),
        shrunk_workers: shrunk.map(|world| world.workers),
        shrunk_rows: shrunk.map(|world| world.rows.len()),
        shrunk_file,
        first_seed: first.map(|found| found.0),
        trace_hash: first.map(|found| format!("{:016x}", found.2)),
        wall_ms: clock.elapsed().as_millis() as u64,
        old_rule_only,
        guided_median: guided_runs_to_detect.as_deref().map(median),
        guided_runs_to_detect,
    })
}

/// The mutants given (a catalogue: `&Mutant::SWARM` or `&Mutant::DEEP`), on the pool's threads, in the
/// order given.
pub fn evaluate_all(
    mutants: &[Mutant],
    searches: Searches,
    jobs: usize,
) -> Result<Vec<MutantReport>, String> {
    let Searches { starts, budget, .. } = searches;
    // the last search's last seed must be a seed
    let span = (starts.max(1) - 1).checked_mul(START_STRIDE).and_then(|span| span.checked_add(budget));
    span.map_or(
        Err(format!("{starts} searches of {budget} seeds run past the last seed")),
        SeedRange::first,
    )?;
    let never = AtomicBool::new(false);
    let mut reports = Vec::with_capacity(mutants.len());
    Pool { jobs, interrupted: &never }.run(
        0..mutants.len() as u64,
        |_| false,
        |index| evaluate(mutants[index as usize], searches),
        |_, _| {},
        |_, report| reports.push(report),
    )?;
    Ok(reports)
}
