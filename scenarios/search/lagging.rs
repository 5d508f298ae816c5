//! The lookup from a lagging copy, measured: the fenced mechanisms with both gateways over
//! the same seeds of the random scenario, once with lookups that read the gateway's ledger
//! and once with lookups answered from a copy that lags it. A worker that finds a row in
//! `sending` asks the gateway whether its refund exists before it pays; a lagging copy
//! says no for a refund already made, and then only the idempotency key stands between
//! the second call and a second refund.

use crate::check::known_invariant;
use crate::runner::{run, Outcome};
use crate::scenario::{self, FaultMask, Scenario};
use crate::search::matrix::SHRUNK_DIR;
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use crate::search::shrink::shrink_scenario;
use fencesim_model::Mechanism;
use fencesim_sim::{EventKind, FaultName, GatewayMode};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;

/// Seeds per setting, mechanism and gateway in the committed report.
pub const LAG_SEEDS: u64 = 400;

/// The mechanisms measured: the article's fence, and the fence with tokens from the database.
pub const LAG_MECHANISMS: [Mechanism; 2] = [Mechanism::Fenced, Mechanism::FencedDbSequence];

/// The invariant a lying lookup can break.
pub const DOUBLE_REFUND: &str = "no-double-refund";

/// Whether the gateway's lookups lag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, strum::EnumIter)]
#[serde(rename_all = "kebab-case")]
pub enum Lag {
    /// Lookups read the ledger itself, and no `lookup-lag` fault fires.
    Off,
    /// Lookups read a copy 100 to 800 ms behind the ledger, and `lookup-lag` faults may
    /// stop it catching up for a while.
    On,
}

impl Lag {
    pub fn all() -> impl Iterator<Item = Lag> {
        <Lag as strum::IntoEnumIterator>::iter()
    }

    pub fn name(self) -> &'static str {
        match self {
            Lag::Off => "off",
            Lag::On => "on",
        }
    }

    /// The scenario the setting runs: the random one, or the same with lookups lagging.
    pub fn scenario(self) -> &'static str {
        match self {
            Lag::Off => "random",
            Lag::On => "random-lagging",
        }
    }

    /// Every fault kind, less `lookup-lag` with the lag off.
    pub fn mask(self) -> FaultMask {
        match self {
            Lag::Off => FaultMask::ALL.without(FaultName::LookupLag as usize),
            Lag::On => FaultMask::ALL,
        }
    }

    /// The command that runs `seed` of a row again and tells its story.
    pub fn command(self, mechanism: Mechanism, gateway: GatewayMode, seed: u64) -> String {
        let command = format!(
            "fencesim explore --scenario {} --mechanism {mechanism} --gateway {gateway} --from {seed} --seeds 1",
            self.scenario()
        );
        match self {
            Lag::Off => format!("{command} --without {}", FaultName::LookupLag.name()),
            Lag::On => command,
        }
    }
}

/// One setting, mechanism and gateway over some seeds (a shard's share, or all of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagRow {
    pub lag: Lag,
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    pub seeds: u64,
    /// Seeds in which a lookup said no for a refund the ledger had.
    pub lied: u64,
    /// Seeds that broke no-double-refund.
    pub doubled: u64,
    /// Of those, the seeds whose first double refund's chain passes through a lying lookup.
    pub doubled_by_lie: u64,
    /// The first seed that broke no-double-refund, with its trace hash.
    pub first: Option<(u64, u64)>,
    /// The first seed whose double refund came of a lying lookup, with its trace hash.
    pub first_by_lie: Option<(u64, u64)>,
    /// Seed 1's trace hash, if seed 1 was among the seeds.
    pub seed_one_hash: Option<u64>,
}

impl LagRow {
    /// The seed whose failure the report shrinks: the first that a lie broke, else the first.
    pub fn shrunk_seed(&self) -> Option<(u64, bool)> {
        self.first_by_lie.map(|(seed, _)| (seed, true)).or(self.first.map(|(seed, _)| (seed, false)))
    }
}

/// Whether the chain of the run's first double refund passes through a lookup that lied.
pub fn doubled_by_a_lie(outcome: &Outcome) -> bool {
    let check = outcome.check(DOUBLE_REFUND);
    check.is_violation()
        && outcome.chain(check).is_some_and(|chain| {
            chain
                .steps
                .iter()
                .any(|step| matches!(outcome.record.events[step.event].kind, EventKind::LookupBehind { .. }))
        })
}

/// What one seed found.
struct LagSeed {
    hash: u64,
    lied: bool,
    doubled: bool,
    by_lie: bool,
}

fn lag_seed(lag: Lag, mechanism: Mechanism, gateway: GatewayMode, seed: u64) -> Result<LagSeed, String> {
    let found = scenario::build(lag.scenario(), seed, mechanism, gateway, lag.mask())?;
    let outcome = run(&found, seed)?;
    let lied = outcome.record.events.iter().any(|event| matches!(event.kind, EventKind::LookupBehind { .. }));
    Ok(LagSeed {
        hash: outcome.trace_hash,
        lied,
        doubled: outcome.check(DOUBLE_REFUND).is_violation(),
        by_lie: doubled_by_a_lie(&outcome),
    })
}

fn lag_row(
    pool: &Pool<'_>,
    (lag, mechanism, gateway): (Lag, Mechanism, GatewayMode),
    seeds: SeedRange,
) -> Result<LagRow, String> {
    let mut row = LagRow {
        lag,
        mechanism,
        gateway,
        seeds: 0,
        lied: 0,
        doubled: 0,
        doubled_by_lie: 0,
        first: None,
        first_by_lie: None,
        seed_one_hash: None,
    };
    row.seeds = pool.run(
        seeds.positions(),
        |_| false,
        |position| lag_seed(lag, mechanism, gateway, seeds.seed(position)),
        |_, _| {},
        |position, found| {
            let seed = seeds.seed(position);
            if seed == 1 {
                row.seed_one_hash = Some(found.hash);
            }
            row.lied += u64::from(found.lied);
            row.doubled += u64::from(found.doubled);
            row.doubled_by_lie += u64::from(found.by_lie);
            if found.doubled {
                row.first = row.first.or(Some((seed, found.hash)));
            }
            if found.by_lie {
                row.first_by_lie = row.first_by_lie.or(Some((seed, found.hash)));
            }
        },
    )?;
    Ok(row)
}

/// Every setting, mechanism and gateway over `seeds`.
pub fn lagging(seeds: SeedRange, jobs: usize) -> Result<Vec<LagRow>, String> {
    let never = AtomicBool::new(false);
    let pool = Pool { jobs, interrupted: &never };
    let mut rows = Vec::new();
    for lag in Lag::all() {
        for mechanism in LAG_MECHANISMS {
            for gateway in GatewayMode::ALL {
                rows.push(lag_row(&pool, (lag, mechanism, gateway), seeds)?);
            }
        }
    }
    Ok(rows)
}

/// The rows one run of every seed would have had, from each shard's rows in shard order.
pub fn lag_rows(parts: &[Vec<LagRow>]) -> Result<Vec<LagRow>, String> {
    let first = parts.first().ok_or("no lagging lookups to put together")?;
    let mut rows = first.clone();
    for part in &parts[1..] {
        if part.len() != rows.len() {
            return Err("the shards' lagging lookups do not have the same rows".into());
        }
        for (row, more) in rows.iter_mut().zip(part) {
            if (row.lag, row.mechanism, row.gateway) != (more.lag, more.mechanism, more.gateway) {
                return Err("the shards' lagging lookups do not have the same rows".into());
            }
            row.seeds += more.seeds;
            row.lied += more.lied;
            row.doubled += more.doubled;
            row.doubled_by_lie += more.doubled_by_lie;
            row.first = row.first.or(more.first);
            row.first_by_lie = row.first_by_lie.or(more.first_by_lie);
            row.seed_one_hash = row.seed_one_hash.or(more.seed_one_hash);
        }
    }
    known_invariant(DOUBLE_REFUND)?;
    Ok(rows)
}

/// A row's first failure, shrunk while it still pays a refund twice (through a lying
/// lookup, when the row's first failure came of one).
pub struct ShrunkLag {
    pub row: LagRow,
    pub seed: u64,
    pub by_lie: bool,
    pub outcome: Outcome,
}

/// Where a row's shrunk first failure is kept, from the project root.
pub fn lag_file(row: &LagRow) -> String {
    format!("{SHRUNK_DIR}/lookup-lag-{}-{}-{}.json", row.lag.name(), row.mechanism, row.gateway)
}

/// Each row's first failure, shrunk.
pub fn shrink_lag_failures(rows: &[LagRow], jobs: usize) -> Result<Vec<ShrunkLag>, String> {
    let failing: Vec<(&LagRow, u64, bool)> =
        rows.iter().filter_map(|row| row.shrunk_seed().map(|(seed, by_lie)| (row, seed, by_lie))).collect();
    let never = AtomicBool::new(false);
    let mut shrunk = Vec::with_capacity(failing.len());
    Pool { jobs, interrupted: &never }.run(
        0..failing.len() as u64,
        |_| false,
        |index| {
            let (row, seed, by_lie) = failing[index as usize];
            let found =
                scenario::build(row.lag.scenario(), seed, row.mechanism, row.gateway, row.lag.mask())?;
            let breaks = |trial: &Scenario| {
                run(trial, seed).map(|outcome| match by_lie {
                    true => doubled_by_a_lie(&outcome),
                    false => outcome.check(DOUBLE_REFUND).is_violation(),
                })
            };
            let outcome = run(&shrink_scenario(&found, seed, breaks, run)?, seed)?;
            Ok(ShrunkLag { row: row.clone(), seed, by_lie, outcome })
        },
        |_, _| {},
        |_, failure| shrunk.push(failure),
    )?;
    Ok(shrunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lag: Lag, seeds: u64, first: Option<(u64, u64)>, seed_one_hash: Option<u64>) -> LagRow {
        let doubled = u64::from(first.is_some());
        LagRow {
            lag,
            mechanism: Mechanism::Fenced,
            gateway: GatewayMode::NonIdempotent,
            seeds,
            lied: doubled,
            doubled,
            doubled_by_lie: doubled,
            first,
            first_by_lie: first,
            seed_one_hash,
        }
    }

    #[test]
    fn shards_merge_into_the_first_failure_and_seed_one_of_one_run() {
        let merged = lag_rows(&[
            vec![row(Lag::On, 10, None, Some(7))],
            vec![row(Lag::On, 10, Some((14, 0xa)), None)],
            vec![row(Lag::On, 10, Some((25, 0xb)), None)],
        ])
        .unwrap();
        let mut expected = row(Lag::On, 30, Some((14, 0xa)), Some(7));
        (expected.lied, expected.doubled, expected.doubled_by_lie) = (2, 2, 2);
        assert_eq!(merged, [expected]);
        let refused = lag_rows(&[vec![row(Lag::On, 10, None, None)], vec![row(Lag::Off, 10, None, None)]]);
        assert!(refused.unwrap_err().contains("not have the same rows"));
    }

    #[test]
    fn the_lag_off_switches_the_lagging_copy_off_and_nothing_else() {
        assert!(!Lag::Off.mask().allows(FaultName::LookupLag as usize));
        assert_eq!(Lag::Off.mask(), FaultMask::ALL.without_names("lookup-lag").unwrap());
        assert_eq!(Lag::On.mask(), FaultMask::ALL);
        let command = Lag::Off.command(Mechanism::Fenced, GatewayMode::Idempotent, 12);
        assert!(command.ends_with("--from 12 --seeds 1 --without lookup-lag"), "{command}");
    }
}
