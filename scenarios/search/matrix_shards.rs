//! The matrix in shards: `matrix --shard K/N` runs every cell over its contiguous share of
//! the seeds, the sweep over its share of the sweep's seeds and the debate over its share
//! of the debate's, and prints what it found as JSON; `fencesim merge` puts the shards back
//! together into what one run of every seed would have found, from which the report and
//! its shrunk failures are made as that run makes them.

use crate::check::coverage::Coverage;
use crate::check::known_invariant;
use crate::runner::Costs;
use crate::search::debate::{debate, debate_rows, DebateRow};
use crate::search::lagging::{lag_rows, lagging, LagRow};
use crate::search::matrix::{matrix, sweep_rows, sweep_shares, Cell, MatrixFound, MatrixSizes, SweepShare};
use crate::search::merge::{in_order, ShardReport};
use crate::search::second_store::{second_store, store_rows, StoreRow};
use crate::search::seeds::{SeedRange, Shard};
use crate::search::verdicts::Verdicts;
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What a matrix shard says about the run it belongs to: a merge refuses shards whose
/// runs differ.
pub fn matrix_run(sizes: MatrixSizes, shard: Option<Shard>) -> Value {
    json!({
        "command": "matrix",
        "version": env!("CARGO_PKG_VERSION"),
        "seeds": sizes.seeds,
        "sweep_seeds": sizes.sweep_seeds,
        "debate_seeds": sizes.debate_seeds,
        "store_seeds": sizes.store_seeds,
        "lag_seeds": sizes.lag_seeds,
        "verdict_seeds": sizes.verdict_seeds,
        "shard": shard,
    })
}

/// One cell over a shard's seeds: per invariant, the seeds that broke it, and the first
/// such seed with its trace hash.
#[derive(Debug, Serialize, Deserialize)]
struct CellShare {
    mechanism: Mechanism,
    gateway: GatewayMode,
    seeds: u64,
    broken: BTreeMap<String, (u64, u64, u64)>,
    costs: Costs,
    verdicts: Verdicts,
}

/// Runs shard `shard` of a matrix of these sizes: its JSON, for `fencesim merge`.
pub fn matrix_shard(sizes: MatrixSizes, shard: Shard, jobs: usize) -> Result<Value, String> {
    let mut coverage = Coverage::new();
    let cells = matrix(sizes.cell_seeds()?.shard(shard)?, sizes.seeds, jobs, &mut coverage)?;
    let sweep = sweep_shares(SeedRange::first(sizes.sweep_seeds)?.shard(shard)?)?;
    let debate = debate(SeedRange::first(sizes.debate_seeds)?.shard(shard)?, jobs)?;
    let second_store = second_store(SeedRange::first(sizes.store_seeds)?.shard(shard)?, jobs)?;
    let lagging = lagging(SeedRange::first(sizes.lag_seeds)?.shard(shard)?, jobs)?;
    let cells: Vec<CellShare> = cells
        .into_iter()
        .map(|cell| CellShare {
            mechanism: cell.mechanism,
            gateway: cell.gateway,
            seeds: cell.seeds,
            broken: cell.broken.into_iter().map(|(name, found)| (name.to_owned(), found)).collect(),
            costs: cell.costs,
            verdicts: cell.verdicts,
        })
        .collect();
    Ok(json!({
        "run": matrix_run(sizes, Some(shard)),
        "cells": cells,
        "sweep": sweep,
        "debate": debate,
        "second_store": second_store,
        "lagging": lagging,
        "coverage": coverage,
    }))
}

/// Adds one shard's cells to the cells so far (empty before the first shard).
fn add_cells(cells: &mut Vec<Cell>, shares: Vec<CellShare>, name: &str) -> Result<(), String> {
    if cells.is_empty() {
        cells.extend(shares.iter().map(|share| Cell {
            mechanism: share.mechanism,
            gateway: share.gateway,
            seeds: 0,
            broken: BTreeMap::new(),
            costs: Costs::default(),
            verdicts: Verdicts::default(),
        }));
    }
    if shares.len() != cells.len() {
        return Err(format!("{name} has {} cells, the first shard {}", shares.len(), cells.len()));
    }
    for (cell, share) in cells.iter_mut().zip(shares) {
        if (cell.mechanism, cell.gateway) != (share.mechanism, share.gateway) {
            return Err(format!("{name}: its cells are not the first shard's, in the same order"));
        }
        cell.seeds += share.seeds;
        cell.costs += share.costs;
        cell.verdicts.absorb(&share.verdicts);
        for (invariant, (count, seed, hash)) in share.broken {
            // shards come in seed order: the first shard to break it has its first seed
            cell.broken.entry(known_invariant(&invariant)?).or_insert((0, seed, hash)).0 += count;
        }
    }
    Ok(())
}

/// What one matrix run of every seed would have found,
/// from the `--json` of each of its shards.
pub fn merge_matrix(shards: &[ShardReport]) -> Result<MatrixFound, String> {
    let (shards, _) = in_order(shards)?;
    let (mut cells, mut sweeps, mut debates, mut stores, mut lags, mut coverage) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Coverage::new());
    for shard in shards {
        let name = &shard.name;
        let unreadable = |what: &str, error: serde_json::Error| format!("{name}: unreadable {what}: {error}");
        let shares: Vec<CellShare> =
            serde_json::from_value(shard.report["cells"].clone()).map_err(|e| unreadable("cells", e))?;
        add_cells(&mut cells, shares, name)?;
        let sweep: Vec<SweepShare> =
            serde_json::from_value(shard.report["sweep"].clone()).map_err(|e| unreadable("sweep", e))?;
        sweeps.push(sweep);
        let debate: Vec<DebateRow> =
            serde_json::from_value(shard.report["debate"].clone()).map_err(|e| unreadable("debate", e))?;
        debates.push(debate);
        let store: Vec<StoreRow> = serde_json::from_value(shard.report["second_store"].clone())
            .map_err(|e| unreadable("second-store rows", e))?;
        stores.push(store);
        let lag: Vec<LagRow> =
            serde_json::from_value(shard.report["lagging"].clone()).map_err(|e| unreadable("lagging", e))?;
        lags.push(lag);
        coverage.absorb(&shard.report["coverage"]).map_err(|error| format!("{name}: {error}"))?;
    }
    Ok(MatrixFound {
        cells,
        sweep: sweep_rows(&sweeps)?,
        debate: debate_rows(&debates)?,
        second_store: store_rows(&stores)?,
        lagging: lag_rows(&lags)?,
        coverage,
    })
}
