//! Replay files: everything needed to run a failure again, with the fault plan written
//! out (not regenerated from the seed), so a file keeps its meaning when the generator
//! changes. A malformed, truncated or future-version file is refused with a reason.

use crate::check::invariant;
use crate::files::write::write_whole;
use crate::mutant::Mutant;
use crate::runner::Outcome;
use crate::scenario::{known, mechanism_named, Scenario};
use fencesim_model::Mechanism;
use fencesim_sim::{FaultPlan, GatewayMode, WallMs, WorldConfig};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "fencesim-replay";
pub const FORMAT_VERSION: u32 = 1;
/// The largest replay file read: a world at every limit fits in a few tens of megabytes.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFile {
    pub format: String,
    pub format_version: u32,
    pub fencesim_version: String,
    pub scenario: String,
    /// The wall-clock time of day the run starts at, in milliseconds.
    pub base_ms: u64,
    /// Files written before the concept had one name say `strategy`; they still load.
    #[serde(alias = "strategy", deserialize_with = "mechanism_by_name")]
    pub mechanism: Mechanism,
    /// The text of the mechanism file the run's mechanism was read from, when it was one:
    /// the replay file runs without the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism_file: Option<String>,
    pub gateway: GatewayMode,
    pub seed: u64,
    pub fault_plan: FaultPlan,
    /// The world's parameters: workers, rows, TTL, latencies and the rest.
    pub parameters: serde_json::Value,
    pub expected_trace_hash: String,
    /// The invariants the run broke when the file was written.
    pub violations: Vec<String>,
    /// A hash of what the run is made of (seed, mechanism, gateway, plan, parameters) when
    /// the file was written: when the trace differs, it tells an edited file from a build
    /// that behaves differently. Files written before it existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// The bug of the mutant catalogue planted in the workers, if the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutant: Option<Mutant>,
    /// The team's worker program the run was of (`fencesim worker`), if it was one: the
    /// file then runs that program again, through the same world and plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerProgram>,
}

/// A team's worker program as a replay file names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerProgram {
    /// The program and its arguments, as given after `--`; run from the directory
    /// `fencesim replay` is run in.
    pub command: Vec<String>,
    /// Real time per story time.
    pub time_scale: f64,
    /// The seed of a controlled run (`fencesim worker --controlled`): every request in the
    /// turn that seed gives it, on the run's own clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled: Option<u64>,
    /// A controlled run whose copies read the run's wall clock too (`--program-clock run`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_clock: bool,
}

const SPLIT_OUT: [&str; 3] = ["mechanism", "gateway_mode", "faults"];

fn mechanism_by_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Mechanism, D::Error> {
    mechanism_named(&String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
}

impl ReplayFile {
    pub fn from_outcome(outcome: &Outcome) -> ReplayFile {
        let mut parameters = serde_json::to_value(&outcome.scenario.world).expect("a world serializes");
        if let Some(map) = parameters.as_object_mut() {
            for key in SPLIT_OUT {
                map.remove(key);
            }
        }
        ReplayFile {
            format: FORMAT.to_owned(),
            format_version: FORMAT_VERSION,
            fencesim_version: env!("CARGO_PKG_VERSION").to_owned(),
            scenario: outcome.scenario.name.to_owned(),
            base_ms: outcome.scenario.base.0,
            mechanism: outcome.scenario.world.mechanism,
            mechanism_file: outcome.scenario.world.mechanism.file_text().map(str::to_owned),
            gateway: outcome.scenario.world.gateway_mode,
            seed: outcome.record.seed,
            fault_plan: outcome.scenario.world.faults.clone(),
            parameters,
            expected_trace_hash: format!("{:016x}", outcome.trace_hash),
            violations: outcome
                .checks
                .iter()
                .filter(|check| check.is_violation())
                .map(|check| check.invariant.to_owned())
                .collect(),
            content_hash: None,
            mutant: outcome.mutant,
            worker: None,
        }
        .with_content_hash()
    }

    /// The file of a team's worker program's run.
    pub fn of_worker(outcome: &Outcome, worker: WorkerProgram) -> ReplayFile {
        ReplayFile { worker: Some(worker), ..ReplayFile::from_outcome(outcome) }.with_content_hash()
    }

    fn with_content_hash(mut self) -> ReplayFile {
        self.content_hash = Some(self.content());
        self
    }

    /// The hash of what the run is made of, as this file says it now.
    pub fn content(&self) -> String {
        let mut what =
            serde_json::json!([self.seed, self.mechanism, self.gateway, self.fault_plan, self.parameters]);
        if let (Some(mutant), Some(parts)) = (self.mutant, what.as_array_mut()) {
            parts.push(serde_json::json!(mutant));
        }
        if let (Some(text), Some(parts)) = (&self.mechanism_file, what.as_array_mut()) {
            parts.push(serde_json::json!(text));
        }
        if let (Some(worker), Some(parts)) = (&self.worker, what.as_array_mut()) {
            parts.push(serde_json::json!(worker));
        }
        format!("{:016x}", twox_hash::XxHash64::oneshot(0, what.to_string().as_bytes()))
    }

    /// Whether the file was changed since it was written: `None` when it cannot tell.
    pub fn edited(&self) -> Option<bool> {
        self.content_hash.as_ref().map(|written| *written != self.content())
    }

    /// The scenario the file describes.
    pub fn scenario(&self) -> Result<Scenario, String> {
        let mut params = self.parameters.clone();
        let map = params.as_object_mut().ok_or("parameters: expected an object")?;
        map.insert("mechanism".into(), serde_json::to_value(self.mechanism).expect("serializes"));
        map.insert("gateway_mode".into(), serde_json::to_value(self.gateway).expect("serializes"));
        map.insert("faults".into(), serde_json::to_value(&self.fault_plan).expect("serializes"));
        let world: WorldConfig = serde_json::from_value(params).map_err(|e| format!("parameters: {e}"))?;
        world.validate().map_err(|e| format!("parameters: {e}"))?;
        let name = known(&self.scenario)?;
        Ok(Scenario { name, base: WallMs(self.base_ms), world })
    }

    /// Reads and checks a replay file, reading no more than `MAX_FILE_BYTES`.
    pub fn load(path: &Path) -> Result<ReplayFile, String> {
        use std::io::Read as _;
        let cannot = |e: std::io::Error| format!("{}: cannot read: {e}", path.display());
        let mut text = String::new();
        let file = std::fs::File::open(path).map_err(cannot)?;
        file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(cannot)?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("{}: larger than {MAX_FILE_BYTES} bytes, not a replay file", path.display()));
        }
        ReplayFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<ReplayFile, String> {
        let value: serde_json::Value = serde_json::from_str::<UniqueKeys>(text)
            .map_err(|e| format!("truncated or malformed JSON: {e}"))?
            .0;
        if value.get("format").and_then(|format| format.as_str()) != Some(FORMAT) {
            return Err(format!("not a replay file: expected \"format\": \"{FORMAT}\""));
        }
        match value.get("format_version").and_then(|version| version.as_u64()) {
            Some(version) if version == u64::from(FORMAT_VERSION) => {}
            Some(version) => {
                return Err(format!(
                    "written in format version {version}; this fencesim ({}) reads version {FORMAT_VERSION}",
                    env!("CARGO_PKG_VERSION")
                ))
            }
            None => return Err("no \"format_version\"".to_owned()),
        }
        crate::mechanism_file::define_carried(&value, "mechanism_file")?;
        let file: ReplayFile = serde_json::from_value(value).map_err(|e| format!("bad field: {e}"))?;
        u64::from_str_radix(&file.expected_trace_hash, 16).map_err(|_| {
            format!("expected_trace_hash '{}' is not a hexadecimal hash", file.expected_trace_hash)
        })?;
        if let Some(unknown) = file.violations.iter().find(|name| invariant(name).is_none()) {
            return Err(format!("violations: unknown invariant '{unknown}'"));
        }
        file.scenario()?;
        if let Some(worker) = &file.worker {
            if worker.command.is_empty() {
                return Err("worker.command: no program named".to_owned());
            }
            if !(worker.time_scale.is_finite() && worker.time_scale > 0.0 && worker.time_scale <= 10.0) {
                return Err(format!(
                    "worker.time_scale {}: expected above 0 and at most 10",
                    worker.time_scale
                ));
            }
        }
        Ok(file)
    }

    /// Writes the file whole into `dir`, named by its scenario, mechanism, gateway and seed.
    pub fn write_into(&self, dir: &Path) -> Result<PathBuf, String> {
        self.write_into_as(dir, "")
    }

    /// `write_into`, the name ending in `-TAG` before `.json` when `tag` is not empty (a
    /// guided search's run: one seed's world runs there under many plans).
    pub fn write_into_as(&self, dir: &Path, tag: &str) -> Result<PathBuf, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let tag = if tag.is_empty() { String::new() } else { format!("-{tag}") };
        let name =
            format!("{}-{}-{}-seed-{}{tag}.json", self.scenario, self.mechanism, self.gateway, self.seed);
        self.write_as(&dir.join(&name))
    }

    /// Writes the file whole at `path`: to a temporary name first, then renamed into place.
    pub fn write_as(&self, path: &Path) -> Result<PathBuf, String> {
        let text = serde_json::to_string_pretty(self).expect("a replay file serializes") + "\n";
        write_whole(path, text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path.to_path_buf())
    }

    pub fn command(path: &Path) -> String {
        format!("fencesim replay {}", path.display())
    }
}

/// A JSON value whose objects have no key twice: a file that says `ttl_ms` twice is
/// refused, not read as whichever came last.
struct UniqueKeys(serde_json::Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor).map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((key, UniqueKeys(value))) = map.next_entry::<String, UniqueKeys>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("the key \"{key}\" appears twice")));
            }
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}
