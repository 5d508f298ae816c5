//! The argument over majority leases, measured: Redlock as specified, and Redlock with a
//! fencing token, over the same seeds of the random scenario in four settings, with the
//! faults that stall a holder and those that shift a Redis instance's clock switched on
//! and off. One side holds that with the validity checked Redlock is safe while clocks
//! drift within bounds; the other that a stall after the check, or an instance's clock
//! running ahead, lets two clients hold a majority, and that only a token the store checks
//! can tell the older one.

use crate::check::known_invariant;
use crate::scenario::FaultMask;
use crate::search::explore::{run_seed, run_seeds};
use crate::search::pool::Pool;
use crate::search::seeds::SeedRange;
use fencesim_model::Mechanism;
use fencesim_sim::{FaultName, GatewayMode, Timing};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// Seeds per setting and mechanism in the committed report.
pub const DEBATE_SEEDS: u64 = 2_000;

/// The two sides: the lease alone, and the lease with a token the store checks.
pub const DEBATE_MECHANISMS: [Mechanism; 2] = [Mechanism::Redlock, Mechanism::RedlockFenced];

/// Which of the faults the argument turns on are on: every other kind is on in all four.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, strum::EnumIter)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// (a) neither stalls nor clock shifts: the conditions Redlock's safety argument assumes.
    Neither,
    /// (b) stalls, no clock shifts.
    Stalls,
    /// (c) clock shifts, no stalls.
    ClockShifts,
    /// (d) both.
    Both,
}

impl Setting {
    pub fn all() -> impl Iterator<Item = Setting> {
        <Setting as strum::IntoEnumIterator>::iter()
    }

    /// `(a)` to `(d)`, as the report names them.
    pub fn letter(self) -> &'static str {
        match self {
            Setting::Neither => "(a)",
            Setting::Stalls => "(b)",
            Setting::ClockShifts => "(c)",
            Setting::Both => "(d)",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Setting::Neither => "neither stalls nor clock shifts",
            Setting::Stalls => "stalls, no clock shifts",
            Setting::ClockShifts => "clock shifts, no stalls",
            Setting::Both => "both",
        }
    }

    fn allows(self, timing: Timing) -> bool {
        match timing {
            Timing::Stall => matches!(self, Setting::Stalls | Setting::Both),
            Timing::ClockShift => matches!(self, Setting::ClockShifts | Setting::Both),
            Timing::Neither => true,
        }
    }

    /// The kinds this setting switches off, in declaration order.
    pub fn switched_off(self) -> Vec<FaultName> {
        FaultName::all().filter(|kind| !self.allows(kind.timing())).collect()
    }

    /// The kinds this setting switches off, as `--without` takes them.
    pub fn without(self) -> String {
        self.switched_off().into_iter().map(FaultName::name).collect::<Vec<_>>().join(",")
    }

    pub fn mask(self) -> FaultMask {
        self.switched_off().into_iter().fold(FaultMask::ALL, |mask, kind| mask.without(kind as usize))
    }
}

/// One setting and mechanism over some seeds (a shard's share, or all of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebateRow {
    pub setting: Setting,
    pub mechanism: Mechanism,
    pub seeds: u64,
    /// Seeds that broke any invariant.
    pub broken: u64,
    /// Per invariant: the seeds that broke it.
    pub invariants: BTreeMap<String, u64>,
    /// The first seed that broke any invariant, with its trace hash.
    pub first: Option<(u64, u64)>,
    /// Seed 1's trace hash, if seed 1 was among the seeds: a row where nothing broke still
    /// names a run a test can repeat.
    pub seed_one_hash: Option<u64>,
}

/// The command that runs `seed` of this row again and tells its story.
pub fn replay_command(row: &DebateRow, seed: u64) -> String {
    let command = format!("fencesim explore --mechanism {} --from {seed} --seeds 1", row.mechanism);
    match row.setting.without() {
        off if off.is_empty() => command,
        off => format!("{command} --without {off}"),
    }
}

fn debate_row(
    pool: &Pool<'_>,
    setting: Setting,
    mechanism: Mechanism,
    seeds: SeedRange,
) -> Result<DebateRow, String> {
    let mut row = DebateRow {
        setting,
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
        |seed| run_seed("random", seed, mechanism, GatewayMode::Idempotent, setting.mask(), None),
        |_| {},
        |result| {
            if result.seed == 1 {
                row.seed_one_hash = Some(result.trace_hash);
            }
            if !result.violations.is_empty() {
                row.broken += 1;
                row.first = row.first.or(Some((result.seed, result.trace_hash)));
            }
            for invariant in &result.violations {
                *row.invariants.entry((*invariant).to_owned()).or_default() += 1;
            }
        },
    )?;
    Ok(row)
}

/// Every setting with both mechanisms over `seeds`, with an idempotent gateway: the money
/// the gateway could move twice is not what the argument is about.
pub fn debate(seeds: SeedRange, jobs: usize) -> Result<Vec<DebateRow>, String> {
    let never = AtomicBool::new(false);
    let pool = Pool { jobs, interrupted: &never };
    let mut rows = Vec::new();
    for setting in Setting::all() {
        for mechanism in DEBATE_MECHANISMS {
            rows.push(debate_row(&pool, setting, mechanism, seeds)?);
        }
    }
    Ok(rows)
}

/// The rows one run of every seed would have had, from each shard's rows in shard order.
pub fn debate_rows(parts: &[Vec<DebateRow>]) -> Result<Vec<DebateRow>, String> {
    let first = parts.first().ok_or("no debate to put together")?;
    let mut rows = first.clone();
    for part in &parts[1..] {
        if part.len() != rows.len() {
            return Err("the shards' debates do not have the same rows".into());
        }
        for (row, more) in rows.iter_mut().zip(part) {
            if (row.setting, row.mechanism) != (more.setting, more.mechanism) {
                return Err("the shards' debates do not have the same rows".into());
            }
            row.seeds += more.seeds;
            row.broken += more.broken;
            for (invariant, count) in &more.invariants {
                *row.invariants.entry(known_invariant(invariant)?.to_owned()).or_default() += count;
            }
            row.first = row.first.or(more.first);
            row.seed_one_hash = row.seed_one_hash.or(more.seed_one_hash);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_switch_off_stalls_and_clock_shifts_and_nothing_else() {
        let off = |setting: Setting| setting.switched_off();
        assert!(off(Setting::Both).is_empty());
        let stalls = off(Setting::ClockShifts);
        let shifts = off(Setting::Stalls);
        assert!(
            stalls.contains(&FaultName::Pause) && stalls.contains(&FaultName::DbReplyDelay),
            "{stalls:?}"
        );
        assert_eq!(shifts, [FaultName::ExpireLease, FaultName::RedisClockJump]);
        let mut neither = off(Setting::Neither);
        neither.retain(|kind| !stalls.contains(kind) && !shifts.contains(kind));
        assert!(neither.is_empty(), "(a) switches off exactly (b)'s and (c)'s: {neither:?}");
        assert!(!off(Setting::Neither).contains(&FaultName::Crash));
        assert_eq!(
            Setting::Stalls.without(),
            "expire-lease,redis-clock-jump",
            "the replay command's --without is what the mask leaves out"
        );
        assert_eq!(
            FaultMask::ALL.without_names(&Setting::Neither.without()).unwrap(),
            Setting::Neither.mask()
        );
    }

    fn row(seeds: u64, broken: u64, first: Option<(u64, u64)>, seed_one_hash: Option<u64>) -> DebateRow {
        let invariants =
            [("monotonic-fences".to_owned(), broken)].into_iter().filter(|(_, n)| *n > 0).collect();
        let (setting, mechanism) = (Setting::Stalls, Mechanism::Redlock);
        DebateRow { setting, mechanism, seeds, broken, invariants, first, seed_one_hash }
    }

    #[test]
    fn shards_merge_into_the_first_failure_and_seed_one_of_one_run() {
        let merged = debate_rows(&[
            vec![row(10, 0, None, Some(7))],
            vec![row(10, 2, Some((14, 0xa)), None)],
            vec![row(10, 1, Some((25, 0xb)), None)],
        ])
        .unwrap();
        assert_eq!(merged, [row(30, 3, Some((14, 0xa)), Some(7))]);
        let mut other = row(10, 0, None, None);
        other.setting = Setting::Both;
        let refused = debate_rows(&[vec![row(10, 0, None, Some(7))], vec![other]]);
        assert!(refused.unwrap_err().contains("not have the same rows"));
    }
}
