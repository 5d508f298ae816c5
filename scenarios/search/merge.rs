//! Shards of one exploration back into one answer. Each shard (`explore --shard K/N
//! --keep-going --json`) ran a contiguous block of the seed range, shard 1's first, so
//! the merge is exact: counts add up, the first failing seed and the first replay file are
//! the first shard's that has one, lists join in shard order, which is seed order.
//!
//! What cannot be the same as one run: `seeds_per_second` (the shards' rates added: what
//! they did together) and `shrunk_files` (every shard shrinks its own first failures; one
//! run shrinks only the first per invariant). `shards` says what each shard ran.
//!
//! Which shards belong together, once each, is decided here for every sharded command
//! (`in_order`); the matrix's own merge is in `matrix_shards`.

use crate::search::explore::FIRST_SEEDS;
use serde_json::{json, Map, Value};

/// A shard's report, with the name it is known by (its file).
pub struct ShardReport {
    pub name: String,
    pub report: Value,
}

/// Shard `K/N` of a report, and the run it belongs to (without its shard).
fn identity(shard: &ShardReport) -> Result<(u64, u64, Value), String> {
    let name = &shard.name;
    let run =
        shard.report.get("run").ok_or(format!("{name} is not the --json output of a fencesim shard"))?;
    let of_shard = run.get("shard").filter(|s| !s.is_null());
    let of_shard = of_shard.ok_or(format!("{name} is not a shard: it was run without --shard K/N"))?;
    let number =
        |key: &str| of_shard.get(key).and_then(Value::as_u64).ok_or(format!("{name}: a shard without {key}"));
    let (index, of) = (number("index")?, number("of")?);
    if shard.report.get("interrupted") == Some(&Value::Bool(true)) {
        return Err(format!("{name}: shard {index}/{of} was interrupted, its share was not run whole"));
    }
    if shard.report.get("write_error").is_some_and(|e| !e.is_null()) {
        return Err(format!("{name}: shard {index}/{of} stopped on a replay file it could not write"));
    }
    let mut run = run.clone();
    run["shard"] = Value::Null;
    Ok((index, of, run))
}

/// The shards in order, once each and all of them, of one run; or what is wrong.
pub fn in_order(shards: &[ShardReport]) -> Result<(Vec<&ShardReport>, Value), String> {
    let first = shards.first().ok_or("no shard to merge")?;
    let (_, of, run) = identity(first)?;
    let mut slots: Vec<Option<&ShardReport>> = vec![None; of as usize];
    for shard in shards {
        let (index, its_of, its_run) = identity(shard)?;
        if its_of != of || its_run != run {
            return Err(format!(
                "{} is a shard of another run ({its_run} of {its_of}, not {run} of {of})",
                shard.name
            ));
        }
        if let Some(earlier) = slots[index as usize - 1].replace(shard) {
            return Err(format!("shard {index}/{of} is given twice: {} and {}", earlier.name, shard.name));
        }
    }
    let missing: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{}/{of}", i + 1))
        .collect();
    if !missing.is_empty() {
        return Err(format!("missing shard(s): {}", missing.join(", ")));
    }
    Ok((slots.into_iter().flatten().collect(), run))
}

/// Numbers added key by key, at any depth (coverage, counts per invariant).
fn add(total: &mut Value, more: &Value) {
    match (total, more) {
        (Value::Object(total), Value::Object(more)) => {
            for (key, value) in more {
                add(total.entry(key.clone()).or_insert(json!(0)), value);
            }
        }
        (total @ Value::Number(_), Value::Number(more)) => {
            let sum = total.as_f64().unwrap_or(0.0) + more.as_f64().unwrap_or(0.0);
            *total = match (total.as_u64(), more.as_u64()) {
                (Some(a), Some(b)) => json!(a + b),
                _ => json!(sum),
            };
        }
        (total, more) => *total = more.clone(),
    }
}

/// The lists of every shard joined in shard order.
fn joined(shards: &[&ShardReport], key: &str) -> Vec<Value> {
    shards
        .iter()
        .flat_map(|s| s.report.get(key).and_then(Value::as_array).cloned().unwrap_or_default())
        .collect()
}

/// The first seeds per invariant, in seed order, at most as many as one run names.
fn first_seeds(shards: &[&ShardReport]) -> Value {
    let mut merged: Map<String, Value> = Map::new();
    for shard in shards {
        let Some(Value::Object(seeds)) = shard.report.get("first_seeds") else { continue };
        for (invariant, list) in seeds {
            let entry = merged.entry(invariant.clone()).or_insert(json!([]));
            let (Some(entry), Some(list)) = (entry.as_array_mut(), list.as_array()) else { continue };
            entry.extend(list.iter().cloned());
            entry.truncate(FIRST_SEEDS);
        }
    }
    Value::Object(merged)
}

/// What one exploration of the whole range would have reported, from its shards.
pub fn merge(shards: &[ShardReport]) -> Result<Value, String> {
    let (shards, run) = in_order(shards)?;
    let first_of =
        |key: &str| shards.iter().filter_map(|s| s.report.get(key)).find(|v| !v.is_null()).cloned();
    let (mut seeds_run, mut violations, mut coverage, mut rate) =
        (json!(0), json!({}), json!({}), json!(0.0));
    for shard in &shards {
        add(&mut seeds_run, &shard.report["seeds_run"]);
        add(&mut violations, &shard.report["violations"]);
        add(&mut coverage, &shard.report["coverage"]);
        add(&mut rate, &shard.report["seeds_per_second"]);
    }
    let each: Vec<Value> = shards
        .iter()
        .map(|s| json!({"shard": s.report["run"]["shard"], "seeds_run": s.report["seeds_run"], "seeds_per_second": s.report["seeds_per_second"]}))
        .collect();
    Ok(json!({
        "seeds_run": seeds_run,
        "violations": violations,
        "first_failing_seed": first_of("first_failing_seed").unwrap_or(Value::Null),
        "replay_file": first_of("replay_file").unwrap_or(Value::Null),
        "seeds_per_second": rate,
        "interrupted": false,
        "coverage": coverage,
        "replay_files": joined(&shards, "replay_files"),
        "first_seeds": first_seeds(&shards),
        "write_error": Value::Null,
        "shrunk_files": joined(&shards, "shrunk_files"),
        "run": run,
        "shards": each,
    }))
}
