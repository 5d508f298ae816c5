//! An exploration's JUnit report, from its `--json` object (one run's, or the merge of its
//! shards'): one case per invariant of its mechanism and gateway. A broken invariant's
//! case is failed with the first breach of its first failing seed's run (its shrunk file's
//! when one was kept), that run's plan and the command that replays it.

use super::{failure_body, judged_invariants, Case, Failure, Suite};
use crate::files::replay_file::ReplayFile;
use crate::runner::{run_with, Outcome};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A failing run kept as a file, run again to tell its breach.
struct Kept {
    path: PathBuf,
    file: ReplayFile,
    outcome: Outcome,
}

fn kept(path: &Path) -> Result<Kept, String> {
    let file = ReplayFile::load(path)?;
    let scenario = file.scenario().map_err(|e| format!("{}: {e}", path.display()))?;
    let outcome = run_with(&scenario, file.seed, file.mutant)?;
    Ok(Kept { path: path.to_owned(), file, outcome })
}

fn paths(value: &Value, key: &str) -> Vec<PathBuf> {
    value[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(PathBuf::from).collect()
}

/// The kept run that tells `invariant`'s failure best: a shrunk file that breaks it, else
/// the replay file of the first seed that broke it.
fn telling(value: &Value, invariant: &str, first_seed: u64) -> Result<Kept, String> {
    for path in paths(value, "shrunk_files") {
        if let Ok(found) = kept(&path) {
            if found.outcome.check(invariant).is_violation() {
                return Ok(found);
            }
        }
    }
    let suffix = format!("-seed-{first_seed}.json");
    let path = paths(value, "replay_files")
        .into_iter()
        .find(|path| path.to_string_lossy().ends_with(&suffix))
        .ok_or(format!("no replay file of seed {first_seed} is listed"))?;
    kept(&path)
}

/// The failure of a broken invariant, and the trace hash of the run that tells it.
fn failure(value: &Value, invariant: &str, count: u64) -> (Failure, Option<String>) {
    let first_seed = value["first_seeds"][invariant][0].as_u64().unwrap_or_default();
    let seeds_run = value["seeds_run"].as_u64().unwrap_or_default();
    let broken = format!("broken in {count} of {seeds_run} seeds, first by seed {first_seed}");
    let found = telling(value, invariant, first_seed).and_then(|found| {
        match found.outcome.check(invariant).breaches.first() {
            Some(breach) => Ok((breach.clone(), found)),
            None => Err(format!("{} no longer breaks it with this build", found.path.display())),
        }
    });
    match found {
        Ok((breach, found)) => {
            let at = found.outcome.scenario.base.plus(breach.at_ms);
            let plan = serde_json::to_string_pretty(&found.file.fault_plan).expect("a plan serializes");
            let what = format!(
                "{invariant}: {broken}; {} (seed {}), at {at}:",
                found.path.display(),
                found.file.seed
            );
            let body =
                failure_body(&format!("{what} {}", breach.detail), &plan, &ReplayFile::command(&found.path));
            let message = format!("{invariant} broken at {at}: {}", breach.detail);
            (Failure { message, body }, Some(format!("{:016x}", found.outcome.trace_hash)))
        }
        Err(error) => {
            let body = format!("{invariant}: {broken}\n\nthe failing run cannot be told here: {error}\n");
            (Failure { message: format!("{invariant} {broken}"), body }, None)
        }
    }
}

/// The suite of an exploration's `--json` object.
pub fn explore_suite(value: &Value) -> Suite {
    let run = &value["run"];
    let text = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
    let (mechanism, gateway) = (text(&run["mechanism"]), text(&run["gateway"]));
    let (from, seeds) = (run["from"].as_u64().unwrap_or(1), run["seeds"].as_u64().unwrap_or(0));
    let mut properties = vec![
        ("scenario".to_owned(), text(&run["scenario"])),
        ("mechanism".to_owned(), mechanism.clone()),
        ("gateway".to_owned(), gateway.clone()),
        ("seed-range".to_owned(), format!("{from}..={}", from + seeds.saturating_sub(1))),
        ("seeds-run".to_owned(), text(&value["seeds_run"])),
    ];
    if let Some(shard) = run["shard"].as_object() {
        properties.push(("shard".to_owned(), format!("{}/{}", shard["index"], shard["of"])));
    }
    for key in ["without", "mutant"] {
        if run[key].as_str().is_some_and(|v| !v.is_empty()) {
            properties.push((key.to_owned(), text(&run[key])));
        }
    }
    let classname = format!("{mechanism}.{gateway}");
    let mut cases = Vec::new();
    for invariant in judged_invariants() {
        let count = value["violations"][invariant].as_u64().unwrap_or(0);
        let failure = (count > 0).then(|| failure(value, invariant, count)).map(|(failure, hash)| {
            if let Some(hash) = hash {
                properties.push((format!("trace-hash.{invariant}"), hash));
            }
            failure
        });
        cases.push(Case { name: invariant.to_owned(), classname: classname.clone(), failure, output: None });
    }
    Suite { name: format!("explore {mechanism} {gateway}"), properties, cases }
}
