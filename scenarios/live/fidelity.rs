//! Every committed failure played again live: the files of `reports/shrunk/` and
//! `reports/mutants/`, each judged by the simulation, then refused by name or played N
//! times on each real database, at the time scale `live` would choose. What it measures
//! is written by `tell::reports::fidelity`.

use crate::files::replay_file::ReplayFile;
use crate::live::coordinator::{live_scenario, run_live, LiveConfig, StoreChoice};
use crate::live::scale::{choose, shortest_interval};
use crate::runner::run_with;
use crate::search::widen::steady_under;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directories whose files the report covers, under the project root.
pub const DIRECTORIES: [&str; 2] = ["reports/shrunk", "reports/mutants"];

/// The databases each playable file is played on.
pub const DATABASES: [&str; 2] = ["sqlite", "postgres"];

/// What one file is, without playing it: what the simulation says, and whether and how
/// the live run can play it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Judged {
    /// Relative to `reports/`, e.g. `shrunk/fenced-idempotent.json`.
    pub file: String,
    /// The file's bytes, hashed (FNV-1a, 64 bits): a row is stale when its file changed.
    pub hash: String,
    /// The invariants the simulated run breaks.
    pub simulated: Vec<String>,
    /// Why the live run refuses it, if it does.
    pub refused: Option<String>,
    /// The shortest interval the verdict rests on (see `live::scale`).
    pub interval_ms: Option<u64>,
    /// Under how many of `widen::OTHER_SCHEDULES` other schedules the simulation breaks the
    /// same invariants: fewer than all says the verdict rests on the simulation's order of
    /// one millisecond, which a real machine may not keep.
    pub steady: u64,
}

/// A played file: on each database, its runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Played {
    pub judged: Judged,
    /// In the order of `DATABASES`.
    pub databases: Vec<OnDatabase>,
}

/// A file's runs on one database: the time scale chosen for its lag, and how many of the
/// runs broke each invariant.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OnDatabase {
    /// `sqlite` or `postgres`.
    pub database: String,
    pub scale: f64,
    pub runs: u32,
    pub broken: BTreeMap<String, u32>,
}

impl Played {
    pub fn on(&self, database: &str) -> Option<&OnDatabase> {
        self.databases.iter().find(|on| on.database == database)
    }
}

fn fnv(bytes: &[u8]) -> String {
    let hash =
        bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    format!("{hash:016x}")
}

/// The report's files under `root`, in order.
pub fn files(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for dir in DIRECTORIES {
        let entries = std::fs::read_dir(root.join(dir)).map_err(|e| format!("{dir}: {e}"))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// A live run's config for `file`'s world, at `scale` on `database` (PostgreSQL: the
/// database at `postgres`, emptied and filled by the run, or a cluster of the run's own).
pub fn config(
    file: &ReplayFile,
    program: &Path,
    scale: f64,
    database: &str,
    postgres: Option<&str>,
) -> Result<LiveConfig, String> {
    let scenario = file.scenario()?;
    Ok(LiveConfig {
        mechanism: scenario.world.mechanism,
        gateway: scenario.world.gateway_mode,
        time_scale: scale,
        redis_url: None,
        store: match database {
            "postgres" => StoreChoice::Postgres(postgres.map(str::to_owned)),
            _ => StoreChoice::Sqlite(None),
        },
        gateway_port: 0,
        keep: None,
        program: program.to_owned(),
        replay: Some((scenario, file.seed)),
        mutant: file.mutant,
    })
}

/// What the simulation says of the file at `path`, and whether the live run plays it.
pub fn judge(root: &Path, path: &Path, program: &Path) -> Result<Judged, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = ReplayFile::load(path)?;
    let scenario = file.scenario()?;
    let simulated = run_with(&scenario, file.seed, file.mutant)?;
    let broken: Vec<&str> = simulated.broken();
    let steady =
        steady_under(&scenario, file.seed, &broken, &mut |trial, seed| run_with(trial, seed, file.mutant))?;
    let refused = live_scenario(&config(&file, program, 1.0, "sqlite", None)?).err();
    let relative = path.strip_prefix(root.join("reports")).unwrap_or(path).display().to_string();
    Ok(Judged {
        file: relative,
        hash: fnv(&bytes),
        simulated: broken.into_iter().map(str::to_owned).collect(),
        interval_ms: shortest_interval(&simulated),
        refused,
        steady,
    })
}

/// How a file is played: the program each worker runs, the runs each database is to
/// have, this machine's lag per request on each database, and the PostgreSQL database
/// every run empties and fills (one cluster for the whole measurement: making one per run
/// cost more than most runs).
pub struct Sitting<'a> {
    pub program: &'a Path,
    pub runs: u32,
    /// Per database of `DATABASES`, in its order.
    pub lags: [Duration; 2],
    pub postgres: &'a str,
}

/// Plays a judged, playable file on each database until it has `runs` runs there, at the
/// scale chosen for that database's lag. An earlier measurement of the same row (the same
/// judgement, and on a database the same scale) counts: only the runs it lacks are
/// played, and its counts are added to.
pub fn play(
    root: &Path,
    judged: Judged,
    sitting: &Sitting,
    earlier: Option<&Played>,
) -> Result<Played, String> {
    let file = ReplayFile::load(&root.join("reports").join(&judged.file))?;
    let earlier = earlier.filter(|played| played.judged == judged);
    let mut databases = Vec::new();
    for (database, lag) in DATABASES.into_iter().zip(sitting.lags) {
        let scale = choose(judged.interval_ms, lag).scale;
        let config = config(&file, sitting.program, scale, database, Some(sitting.postgres))?;
        let before = earlier.and_then(|played| played.on(database)).filter(|on| on.scale == scale);
        let mut on = before.cloned().unwrap_or_else(|| OnDatabase {
            database: database.to_owned(),
            scale,
            runs: 0,
            broken: BTreeMap::new(),
        });
        while on.runs < sitting.runs {
            let outcome = run_live(&config)?;
            for check in outcome.checks.iter().filter(|check| check.is_violation()) {
                *on.broken.entry(check.invariant.to_owned()).or_default() += 1;
            }
            on.runs += 1;
        }
        databases.push(on);
    }
    Ok(Played { judged, databases })
}
