//! The mutant measurement in shards: `mutants --shard K/N` measures its contiguous block
//! of the catalogue, of the small scope's plans and of the false-alarm seeds, and prints
//! what it found as JSON (each mutant's shrunk run with it); `fencesim merge` puts the
//! shards back together into what one run measured, from which the report and the shrunk
//! files are written as that run writes them.

use crate::check::known_invariant;
use crate::files::replay_file::ReplayFile;
use crate::mutant::Mutant;
use crate::scenario::production::Rates;
use crate::search::exhaustive::{plans, scope_from, scope_share, ScopeShare, SmallScope};
use crate::search::false_alarms::{false_alarm_share, false_alarms_from, FalseAlarmRun};
use crate::search::merge::{in_order, ShardReport};
use crate::search::mutants::{evaluate_all, MutantReport, Searches};
use crate::search::seeds::{SeedRange, Shard};
use serde::Deserialize;
use serde_json::{json, Value};

/// What one mutant run measures: the same for every shard of it.
#[derive(Clone, Copy, Debug)]
pub struct MutantsRun {
    pub starts: u64,
    pub budget: u64,
    pub false_alarm_seeds: u64,
    pub exhaustive: bool,
    /// Whether the guided search is measured beside the uniform one.
    pub guided: bool,
}

impl MutantsRun {
    /// What a shard says about its run: a merge refuses shards whose runs differ.
    fn identity(self, shard: Shard) -> Value {
        json!({
            "command": "mutants",
            "version": env!("CARGO_PKG_VERSION"),
            "starts": self.starts,
            "budget": self.budget,
            "false_alarm_seeds": self.false_alarm_seeds,
            "exhaustive": self.exhaustive,
            "guided": self.guided,
            "shard": shard,
        })
    }
}

/// Shard `shard`'s block of `0..count`.
fn block(count: usize, shard: Shard) -> Result<std::ops::Range<usize>, String> {
    let share = SeedRange::new(0, count as u64)?.shard(shard)?;
    Ok(share.from as usize..(share.from + share.count) as usize)
}

/// Runs shard `shard` of a mutant run: its JSON, for `fencesim merge`.
pub fn mutants_shard(run: MutantsRun, shard: Shard, jobs: usize) -> Result<Value, String> {
    let mutants = &Mutant::SWARM[block(Mutant::SWARM.len(), shard)?];
    let searches =
        Searches { starts: run.starts, budget: run.budget, guided: run.guided, rates: Rates::Swarm };
    let reports = evaluate_all(mutants, searches, jobs)?;
    let reports: Vec<Value> = reports
        .iter()
        .map(|report| {
            let mut value = json!(report);
            value["shrunk_file"] = json!(report.shrunk_file);
            value
        })
        .collect();
    let scope = match run.exhaustive {
        true => Some(scope_share(block(plans().len(), shard)?, jobs)?),
        false => None,
    };
    let alarm_seeds = SeedRange::first(run.false_alarm_seeds)?.shard(shard)?;
    let false_alarms = false_alarm_share(alarm_seeds, jobs, run.guided)?;
    Ok(json!({
        "run": run.identity(shard),
        "mutants": reports,
        "small_scope": scope,
        "false_alarms": false_alarms,
    }))
}

/// A mutant's row as a shard printed it.
#[derive(Deserialize)]
struct MutantShare {
    name: Mutant,
    caught: bool,
    invariant: Option<String>,
    seeds_to_detect: Vec<u64>,
    seeds_to_detect_median: u64,
    shrunk_faults: Option<usize>,
    shrunk_workers: Option<u32>,
    shrunk_rows: Option<usize>,
    shrunk_file: Option<ReplayFile>,
    first_seed: Option<u64>,
    trace_hash: Option<String>,
    wall_ms: u64,
    old_rule_only: u64,
    #[serde(default)]
    guided_runs_to_detect: Option<Vec<u64>>,
    #[serde(default)]
    guided_median: Option<u64>,
}

impl MutantShare {
    fn report(self) -> Result<MutantReport, String> {
        let mutant = self.name;
        let invariant = self.invariant.as_deref().map(known_invariant).transpose()?;
        Ok(MutantReport {
            name: mutant.name(),
            baseline: mutant.baseline().name(),
            gateway: mutant.gateway().name(),
            source: mutant.source(),
            caught: self.caught,
            invariant,
            seeds_to_detect: self.seeds_to_detect,
            seeds_to_detect_median: self.seeds_to_detect_median,
            shrunk_faults: self.shrunk_faults,
            shrunk_workers: self.shrunk_workers,
            shrunk_rows: self.shrunk_rows,
            shrunk_file: self.shrunk_file,
            first_seed: self.first_seed,
            trace_hash: self.trace_hash,
            wall_ms: self.wall_ms,
            old_rule_only: self.old_rule_only,
            guided_runs_to_detect: self.guided_runs_to_detect,
            guided_median: self.guided_median,
        })
    }
}

/// What one mutant run measured, put back together from its shards.
pub struct MutantsMerged {
    pub run: MutantsRun,
    pub reports: Vec<MutantReport>,
    pub scope: Option<SmallScope>,
    pub false_alarms: Vec<FalseAlarmRun>,
}

/// The run the shards belong to, as its identity says.
fn run_of(identity: &Value) -> Result<MutantsRun, String> {
    let number = |key: &str| identity[key].as_u64().ok_or(format!("a mutant shard without {key}"));
    Ok(MutantsRun {
        starts: number("starts")?,
        budget: number("budget")?,
        false_alarm_seeds: number("false_alarm_seeds")?,
        exhaustive: identity["exhaustive"].as_bool().ok_or("a mutant shard without exhaustive")?,
        // shards written before the guided search was measured measured the uniform one alone
        guided: identity["guided"].as_bool().unwrap_or(false),
    })
}

/// What one mutant run would have measured, from the `--json` of each of its shards.
pub fn merge_mutants(shards: &[ShardReport]) -> Result<MutantsMerged, String> {
    let (shards, identity) = in_order(shards)?;
    let run = run_of(&identity)?;
    let (mut reports, mut scopes) = (Vec::new(), Vec::new());
    for shard in &shards {
        let name = &shard.name;
        let unreadable = |what: &str, error: serde_json::Error| format!("{name}: unreadable {what}: {error}");
        let shares: Vec<MutantShare> =
            serde_json::from_value(shard.report["mutants"].clone()).map_err(|e| unreadable("mutants", e))?;
        for share in shares {
            reports.push(share.report()?);
        }
        if run.exhaustive {
            let scope: ScopeShare = serde_json::from_value(shard.report["small_scope"].clone())
                .map_err(|e| unreadable("small scope", e))?;
            scopes.push(scope);
        }
    }
    if reports.iter().map(|report| report.name).ne(Mutant::SWARM.iter().map(|mutant| mutant.name())) {
        return Err("the shards' mutants are not this build's catalogue, once each".to_owned());
    }
    let scope = if run.exhaustive { Some(scope_from(&scopes)?) } else { None };
    let alarms: Vec<&Value> = shards.iter().map(|shard| &shard.report["false_alarms"]).collect();
    Ok(MutantsMerged { run, reports, scope, false_alarms: false_alarms_from(&alarms, run.guided)? })
}
