//! False alarms: every mechanism that promises safety, run over many seeds of the random
//! scenario under the faults it promises to survive. An invariant it breaks there is a
//! bug in the mechanism or a false alarm of the checkers; either way the suite must say so.

use crate::check::known_invariant;
use crate::scenario::FaultMask;
use crate::search::explore::{explore, ExploreConfig, SearchKind};
use crate::search::seeds::SeedRange;
use fencesim_model::{Mechanism, Safety};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// One mechanism's run.
#[derive(Clone, Debug, Serialize)]
pub struct FalseAlarmRun {
    pub mechanism: &'static str,
    /// The fault kinds switched off (those outside the mechanism's promise).
    pub without: Option<&'static str>,
    /// The search that chose the runs: the uniform one's seeds, or the guided one's
    /// worlds and plans (half of them changed plans the uniform search never draws).
    pub search: SearchKind,
    /// Runs: seeds of the uniform search, or runs of the guided one from as many seeds.
    pub seeds: u64,
    /// Seeds that broke each invariant (empty: no false alarm).
    pub violations: BTreeMap<&'static str, u64>,
}

impl FalseAlarmRun {
    /// The command that reruns it.
    pub fn command(&self) -> String {
        let without = self.without.map_or(String::new(), |kinds| format!(" --without {kinds}"));
        let search = match self.search {
            SearchKind::Uniform => "",
            SearchKind::Guided => " --search guided",
        };
        format!(
            "fencesim explore --mechanism {}{without} --seeds {} --keep-going{search}",
            self.mechanism, self.seeds
        )
    }
}

/// The faults a mechanism promises to survive: all of them, or all but those that can
/// lose its counter (a restart, and a failover to a replica that had not received it).
pub fn promised(mechanism: Mechanism) -> Option<Option<&'static str>> {
    match mechanism.spec().safety {
        Safety::Safe => Some(None),
        Safety::UnlessCounterLost => Some(Some("redis-restart,redis-failover")),
        Safety::UnlessRestartLosesCounter => Some(Some("redis-restart")),
        Safety::Unsafe => None,
    }
}

/// The searches a false-alarm run makes for each mechanism: the uniform one, and the
/// guided one after it when `guided`.
fn searches(guided: bool) -> &'static [SearchKind] {
    match guided {
        true => &[SearchKind::Uniform, SearchKind::Guided],
        false => &[SearchKind::Uniform],
    }
}

/// Every mechanism that promises safety, over `seeds` seeds from seed 1, on `jobs` threads,
/// by the uniform search and, when `guided`, by the guided search over as many runs.
pub fn false_alarm_runs(seeds: u64, jobs: usize, guided: bool) -> Result<Vec<FalseAlarmRun>, String> {
    false_alarm_share(SeedRange::first(seeds)?, jobs, guided)
}

/// The same runs over `seeds` alone (a shard's block of them, or all; a shard's guided
/// search grows its own corpus from its own seeds).
pub fn false_alarm_share(seeds: SeedRange, jobs: usize, guided: bool) -> Result<Vec<FalseAlarmRun>, String> {
    let mut runs = Vec::new();
    for mechanism in Mechanism::ALL {
        let Some(without) = promised(mechanism) else { continue };
        let allowed = match without {
            Some(kinds) => FaultMask::ALL.without_names(kinds)?,
            None => FaultMask::ALL,
        };
        for &search in searches(guided) {
            let out = std::env::temp_dir().join("fencesim-false-alarms");
            let config = ExploreConfig {
                keep_going: true,
                allowed,
                search,
                ..ExploreConfig::random(mechanism, seeds.from, seeds.count, jobs, out)
            };
            let report = explore(&config, &AtomicBool::new(false))?;
            runs.push(FalseAlarmRun {
                mechanism: mechanism.name(),
                without,
                search,
                seeds: seeds.count,
                violations: report.violations,
            });
        }
    }
    Ok(runs)
}

/// The runs of every shard added up, from their JSON, in shard order: what one run of
/// all their seeds found (with `guided`, each shard's guided searches added up).
pub fn false_alarms_from(shares: &[&serde_json::Value], guided: bool) -> Result<Vec<FalseAlarmRun>, String> {
    let mut runs: Vec<FalseAlarmRun> = Vec::new();
    let expected: Vec<(Mechanism, SearchKind)> = Mechanism::ALL
        .into_iter()
        .filter(|&mechanism| promised(mechanism).is_some())
        .flat_map(|mechanism| searches(guided).iter().map(move |&search| (mechanism, search)))
        .collect();
    for share in shares {
        let share = share.as_array().ok_or("false alarms that are not a list")?;
        if share.len() != expected.len() {
            return Err("false alarms of other mechanisms or searches than this run's".to_owned());
        }
        for (index, (&(mechanism, search), part)) in expected.iter().zip(share).enumerate() {
            if part["mechanism"] != mechanism.name() {
                return Err(format!("false alarms of {} where {mechanism} was expected", part["mechanism"]));
            }
            if runs.len() <= index {
                let without = promised(mechanism).flatten();
                runs.push(FalseAlarmRun {
                    mechanism: mechanism.name(),
                    without,
                    search,
                    seeds: 0,
                    violations: BTreeMap::new(),
                });
            }
            let run = &mut runs[index];
            run.seeds += part["seeds"].as_u64().ok_or("false alarms without their seeds")?;
            for (name, count) in part["violations"].as_object().into_iter().flatten() {
                *run.violations.entry(known_invariant(name)?).or_default() += count.as_u64().unwrap_or(0);
            }
        }
    }
    Ok(runs)
}
