//! Replay files: everything needed to run a failure again, with the fault plan written
//! out (not regenerated from the seed), so a file keeps its meaning when the generator
//! changes. A malformed, truncated or future-version file is refused with a reason.

use crate::runner::Outcome;
use crate::scenario::Scenario;
use fencesim_model::Mechanism;
use fencesim_sim::{FaultPlan, GatewayMode, WallMs, WorldConfig};
use serde::{Deserialize, Serialize};
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
    pub strategy: Mechanism,
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

impl ReplayFile {
    pub fn from_outcome(o: &Outcome) -> ReplayFile {
        let mut parameters = serde_json::to_value(&o.scenario.world).expect("a world serializes");
        if let Some(map) = parameters.as_object_mut() {
            for key in SPLIT_OUT {
                map.remove(key);
            }
        }
        ReplayFile {
            format: FORMAT.to_owned(),
            format_version: FORMAT_VERSION,
            fencesim_version: env!("CARGO_PKG_VERSION").to_owned(),
            scenario: o.scenario.name.to_owned(),
            base_ms: o.scenario.base.0,
            strategy: o.scenario.world.mechanism,
            gateway: o.scenario.world.gateway_mode,
            seed: o.record.seed,
            fault_plan: o.scenario.world.faults.clone(),
            parameters,
            expected_trace_hash: format!("{:016x}", o.trace_hash),
            violations: o
                .checks
                .iter()
                .filter(|c| c.is_violation())
                .map(|c| c.invariant.to_owned())
                .collect(),
        }
    }

    /// The scenario the file describes.
    pub fn scenario(&self) -> Result<Scenario, String> {
        let mut params = self.parameters.clone();
        let map = params.as_object_mut().ok_or("parameters: expected an object")?;
        map.insert("mechanism".into(), serde_json::to_value(self.strategy).expect("serializes"));
        map.insert("gateway_mode".into(), serde_json::to_value(self.gateway).expect("serializes"));
        map.insert("faults".into(), serde_json::to_value(&self.fault_plan).expect("serializes"));
        let world: WorldConfig = serde_json::from_value(params).map_err(|e| format!("parameters: {e}"))?;
        world.validate().map_err(|e| format!("parameters: {e}"))?;
        let name = crate::scenario::known(&self.scenario)?;
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
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format!("not a replay file: expected \"format\": \"{FORMAT}\""));
        }
        match value.get("format_version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "written in format version {v}; this fencesim ({}) reads version {FORMAT_VERSION}",
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

    /// Writes the file whole: to a temporary name first, then renamed into place.
    pub fn write_into(&self, dir: &Path) -> Result<PathBuf, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let name = format!("{}-{}-{}-seed-{}.json", self.scenario, self.strategy, self.gateway, self.seed);
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("a replay file serializes");
        std::fs::write(&tmp, text + "\n").map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| format!("cannot move {} into place: {e}", path.display()))?;
        Ok(path)
    }

    pub fn command(path: &Path) -> String {
        format!("fencesim replay {}", path.display())
    }
}

/// The failure as a story: the events that led to the first violation, in words, then
/// what each broken invariant says.
pub fn tell_failure(o: &Outcome, lines_before: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let first = crate::checkers::violations(&o.checks).map(|(_, b)| b.at_ms).min();
    let Some(first_at) = first else {
        out.push_str("no invariant was broken\n");
        return out;
    };
    let lines = crate::narrate::story(o);
    let upto: Vec<_> = lines.into_iter().filter(|l| l.at_ms <= first_at).collect();
    let skip = upto.len().saturating_sub(lines_before);
    if skip > 0 {
        let _ = writeln!(out, "... {skip} earlier lines");
    }
    out.push_str(&crate::narrate::render_story(o, &upto[skip..], usize::MAX));
    out.push_str(&o.breach_lines("VIOLATION ", false));
    out
}

/// Where two histories of the same run part, if they do.
pub fn first_difference(a: &Outcome, b: &Outcome) -> Option<String> {
    let (ea, eb) = (&a.record.events, &b.record.events);
    let i = (0..ea.len().max(eb.len())).find(|&i| ea.get(i) != eb.get(i))?;
    let show = |o: &Outcome, e: Option<&fencesim_sim::Event>| match e {
        Some(e) => {
            let mut buf = Vec::new();
            fencesim_sim::write_trace(std::slice::from_ref(e), o.scenario.base, &mut buf).expect("in memory");
            String::from_utf8_lossy(&buf).trim_end().to_owned()
        }
        None => "(no event: the history ended)".to_owned(),
    };
    Some(format!(
        "event {i} differs:\n  first run:  {}\n  second run: {}",
        show(a, ea.get(i)),
        show(b, eb.get(i))
    ))
}
