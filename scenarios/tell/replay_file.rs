//! Replay files: everything needed to run a failure again, with the fault plan written
//! out (not regenerated from the seed), so a file keeps its meaning when the generator
//! changes. A malformed, truncated or future-version file is refused with a reason.

use crate::runner::Outcome;
use crate::scenario::{known, mechanism_named, Scenario};
use crate::tell::write::write_whole;
use fencesim_model::Mechanism;
use fencesim_sim::{FaultPlan, GatewayMode, WallMs, WorldConfig};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "fencesim-replay";
pub const FORMAT_VERSION: u32 = 1;

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
    pub gateway: GatewayMode,
    pub seed: u64,
    pub fault_plan: FaultPlan,
    /// The world's parameters: workers, rows, TTL, latencies and the rest.
    pub parameters: serde_json::Value,
    pub expected_trace_hash: String,
    /// The invariants the run broke when the file was written.
    pub violations: Vec<String>,
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
        }
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

    /// Reads and checks a replay file.
    pub fn load(path: &Path) -> Result<ReplayFile, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        ReplayFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<ReplayFile, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("truncated or malformed JSON: {e}"))?;
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
            None => return Err("no format_version".to_owned()),
        }
        let file: ReplayFile = serde_json::from_value(value).map_err(|e| format!("bad field: {e}"))?;
        u64::from_str_radix(&file.expected_trace_hash, 16).map_err(|_| {
            format!("expected_trace_hash '{}' is not a hexadecimal hash", file.expected_trace_hash)
        })?;
        file.scenario()?;
        Ok(file)
    }

    /// Writes the file whole into `dir`, named by its scenario, mechanism, gateway and seed.
    pub fn write_into(&self, dir: &Path) -> Result<PathBuf, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let name = format!("{}-{}-{}-seed-{}.json", self.scenario, self.mechanism, self.gateway, self.seed);
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
