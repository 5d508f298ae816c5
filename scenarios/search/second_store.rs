//! The article's fourth weak point, measured: a batch that writes two stores, with the
//! second store (the settlement ledger) unfenced (`fenced-one-store`) and fenced like the
//! refund rows (`fenced`), over the same seeds of the random scenario with the second
//! store always (`random-two-stores`) and an idempotent gateway, one fault kind on at a
//! time: what each kind alone does to each store.

use crate::check::known_invariant;
use crate::runner::run;
use crate::runner::Outcome;
use crate::scenario::{self, FaultMask, Scenario};
use crate::search::explore::{run_seed, run_seeds};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use crate::search::shrink::shrink_scenario;
use fencesim_model::Mechanism;
use fencesim_sim::{FaultName, GatewayMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// The scenario of the report: the random one with the second store in every seed.
pub const STORE_SCENARIO: &str = "random-two-stores";

/// Seeds per fault kind and mechanism in the committed report.
pub const STORE_SEEDS: u64 = 100;

/// The second store unfenced, and fenced like the first.
pub const STORE_MECHANISMS: [Mechanism; 2] = [Mechanism::FencedOneStore, Mechanism::Fenced];

/// The invariants about the second store.
pub const STORE_INVARIANTS: [&str; 2] = ["posted-once", "balance-matches-sent"];

/// The mask with only `kind` on.
pub fn only(kind: FaultName) -> FaultMask {
    FaultMask(1 << kind as u32)
}

/// The row with every kind off: what a batch that outlasts its TTL does by itself.
pub const NO_FAULT: &str = "none";

/// The faults a row has on: `none`, or one kind by its name.
pub fn mask_of(kind: &str) -> Result<FaultMask, String> {
    match kind {
        NO_FAULT => Ok(FaultMask::NONE),
        name => FaultName::parse(name).map(only),
    }
}

/// The command that runs `seed` of a row again and tells its story.
pub fn store_command(kind: &str, mechanism: Mechanism, seed: u64) -> String {
    let off: Vec<&str> = FaultName::all().map(FaultName::name).filter(|name| *name != kind).collect();
    format!(
        "fencesim explore --scenario {STORE_SCENARIO} --mechanism {mechanism} --from {seed} --seeds 1 --without {}",
        off.join(",")
    )
}

/// One fault kind and mechanism over some seeds (a shard's share, or all of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreRow {
    /// The fault kind that was on, by name.
    pub kind: String,
    pub mechanism: Mechanism,
    pub seeds: u64,
    /// Seeds that broke an invariant of the second store.
    pub broken: u64,
    /// Per invariant (every one, the first store's too): the seeds that broke it.
    pub invariants: BTreeMap<String, u64>,
    /// The first seed that broke an invariant of the second store, with its trace hash and
    /// the invariant (the first in the table's order that it broke).
    pub first: Option<(u64, u64, String)>,
    /// Seed 1's trace hash, if seed 1 was among the seeds.
    pub seed_one_hash: Option<u64>,
}

fn store_row(
    pool: &Pool<'_>,
    kind: &str,
    mechanism: Mechanism,
    seeds: SeedRange,
) -> Result<StoreRow, String> {
    let mask = mask_of(kind)?;
    let mut row = StoreRow {
        kind: kind.to_owned(),
        mechanism,
        seeds: 0,
        broken: 0,
        invariants: BTreeMap::new(),
        first: None,
        seed_one_hash: None,
    };
    row.seeds = run_seeds(
        pool,
        seeds,
        false,
        |seed| run_seed(STORE_SCENARIO, seed, mechanism, GatewayMode::Idempotent, mask, None),
        |_| {},
        |result| {
            if result.seed == 1 {
                row.seed_one_hash = Some(result.trace_hash);
            }
            let second = result.violations.iter().find(|name| STORE_INVARIANTS.contains(name));
            if let Some(invariant) = second {
                row.broken += 1;
                row.first =
                    row.first.take().or(Some((result.seed, result.trace_hash, (*invariant).to_owned())));
            }
            for invariant in &result.violations {
                *row.invariants.entry((*invariant).to_owned()).or_default() += 1;
            }
        },
    )?;
    Ok(row)
}

/// No fault, then every fault kind alone, with both mechanisms over `seeds`.
pub fn second_store(seeds: SeedRange, jobs: usize) -> Result<Vec<StoreRow>, String> {
    let never = AtomicBool::new(false);
    let pool = Pool { jobs, interrupted: &never };
    let mut rows = Vec::new();
    for kind in std::iter::once(NO_FAULT).chain(FaultName::all().map(FaultName::name)) {
        for mechanism in STORE_MECHANISMS {
            rows.push(store_row(&pool, kind, mechanism, seeds)?);
        }
    }
    Ok(rows)
}

/// The rows one run of every seed would have had, from each shard's rows in shard order.
pub fn store_rows(parts: &[Vec<StoreRow>]) -> Result<Vec<StoreRow>, String> {
    let first = parts.first().ok_or("no second-store rows to put together")?;
    let mut rows = first.clone();
    for part in &parts[1..] {
        if part.len() != rows.len() {
            return Err("the shards' second-store rows are not the same".into());
        }
        for (row, more) in rows.iter_mut().zip(part) {
            if (&row.kind, row.mechanism) != (&more.kind, more.mechanism) {
                return Err("the shards' second-store rows are not the same".into());
            }
            row.seeds += more.seeds;
            row.broken += more.broken;
            for (invariant, count) in &more.invariants {
                *row.invariants.entry(known_invariant(invariant)?.to_owned()).or_default() += count;
            }
            row.first = row.first.take().or(more.first.clone());
            row.seed_one_hash = row.seed_one_hash.or(more.seed_one_hash);
        }
    }
    Ok(rows)
}

/// A row's first failure, shrunk while it still breaks the same invariant.
pub struct StoreShrunk {
    pub kind: String,
    pub mechanism: Mechanism,
    pub invariant: String,
    pub seed: u64,
    pub outcome: Outcome,
}

/// Where the second store's shrunk first failures are kept, from the project root: a
/// folder of their own beside the matrix's cells' (`reports/shrunk`).
pub const STORE_SHRUNK_DIR: &str = "reports/second-store";

/// Where a row's shrunk first failure is kept, from the project root.
pub fn store_shrunk_file(kind: &str, mechanism: Mechanism) -> String {
    format!("{STORE_SHRUNK_DIR}/{mechanism}-{kind}.json")
}

/// Each row's first failure of the second store, shrunk.
pub fn shrink_store_failures(rows: &[StoreRow], jobs: usize) -> Result<Vec<StoreShrunk>, String> {
    let failing: Vec<(&StoreRow, u64, &str)> = rows
        .iter()
        .filter_map(|row| row.first.as_ref().map(|(seed, _, invariant)| (row, *seed, invariant.as_str())))
        .collect();
    let never = AtomicBool::new(false);
    let mut shrunk = Vec::with_capacity(failing.len());
    Pool { jobs, interrupted: &never }.run(
        0..failing.len() as u64,
        |_| false,
        |index| {
            let (row, seed, invariant) = failing[index as usize];
            let found = scenario::build(
                STORE_SCENARIO,
                seed,
                row.mechanism,
                GatewayMode::Idempotent,
                mask_of(&row.kind)?,
            )?;
            let breaks =
                |trial: &Scenario| run(trial, seed).map(|outcome| outcome.check(invariant).is_violation());
            let outcome = run(&shrink_scenario(&found, seed, breaks, run)?, seed)?;
            Ok(StoreShrunk {
                kind: row.kind.clone(),
                mechanism: row.mechanism,
                invariant: invariant.to_owned(),
                seed,
                outcome,
            })
        },
        |_, _| {},
        |_, failure| shrunk.push(failure),
    )?;
    Ok(shrunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_kind_on_is_that_kind_alone_and_its_command_switches_off_every_other() {
        let mask = only(FaultName::Pause);
        assert!(mask.allows(FaultName::Pause as usize));
        assert!(FaultName::all()
            .filter(|kind| *kind != FaultName::Pause)
            .all(|kind| !mask.allows(kind as usize)));
        let command = store_command("pause", Mechanism::FencedOneStore, 7);
        let off = command.split("--without ").nth(1).unwrap();
        assert_eq!(FaultMask::ALL.without_names(off).unwrap(), mask);
        let none = store_command(NO_FAULT, Mechanism::FencedOneStore, 7);
        let off = none.split("--without ").nth(1).unwrap();
        assert_eq!(FaultMask::ALL.without_names(off).unwrap(), FaultMask::NONE);
        assert_eq!(mask_of(NO_FAULT), Ok(FaultMask::NONE));
        assert!(mask_of("chaos").unwrap_err().contains("unknown fault kind 'chaos'"));
    }
}
