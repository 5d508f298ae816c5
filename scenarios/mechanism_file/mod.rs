//! Mechanisms from files: a team's own lock described in TOML (its token source, its lease,
//! its SQL, its Lua scripts), read and checked here (`check`), with the schema in `schema`
//! and the built-in mechanisms written out as files in `builtin`. A checked file is defined
//! as a mechanism of this process (`load`, `define`), run like a built-in one.

pub mod builtin;
pub mod check;
pub mod parameters;
pub mod schema;

pub use check::{check, warnings, Problem};
pub use schema::MechanismFile;

use fencesim_model::Mechanism;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

/// Reads and checks a mechanism file; every problem, each on a line naming the file and
/// the field, when it is not valid.
pub fn read(path: &Path) -> Result<(MechanismFile, String), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    let file = checked(&text, &path.display().to_string())?;
    Ok((file, text))
}

/// `text` checked, its problems told as coming from `origin` (a path, or a replay file's
/// field).
fn checked(text: &str, origin: &str) -> Result<MechanismFile, String> {
    check(text).map_err(|problems| {
        let lines: Vec<String> = problems
            .iter()
            .map(|p| format!("{origin}: {}: {}", p.field, p.message.replace('\n', "\n    ")))
            .collect();
        format!("{origin} is not a valid mechanism file:\n{}", lines.join("\n"))
    })
}

/// Where each mechanism read from a file by path was read from, by name: what a command
/// that reproduces a run names.
static PATHS: Mutex<BTreeMap<&'static str, String>> = Mutex::new(BTreeMap::new());

/// The mechanism a file describes, checked and defined for this process.
/// The built-in mechanism a file is, when it is one's own file (the check refuses any other
/// file under a built-in's name).
fn builtin_named(file: &MechanismFile) -> Option<Mechanism> {
    Mechanism::ALL.into_iter().find(|m| m.name() == file.name)
}

pub fn load(path: &Path) -> Result<Mechanism, String> {
    let (file, text) = read(path)?;
    if let Some(builtin) = builtin_named(&file) {
        return Ok(builtin);
    }
    let mechanism = Mechanism::define(file.spec(), &text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut paths = PATHS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    paths.entry(mechanism.name()).or_insert_with(|| path.display().to_string());
    Ok(mechanism)
}

/// The option that chooses `mechanism` on a command line: `--mechanism NAME` for a
/// built-in one, `--mechanism-file PATH` for one read from a file (a placeholder naming it
/// when it came from a replay file, not a path).
pub fn option_for(mechanism: Mechanism) -> String {
    match path_of(mechanism) {
        None => format!("--mechanism {mechanism}"),
        Some(path) => format!("--mechanism-file {path}"),
    }
}

/// The file `mechanism` was read from (a placeholder naming it when it came from a replay
/// file, not a path); `None` for a built-in one.
pub fn path_of(mechanism: Mechanism) -> Option<String> {
    mechanism.file_text()?;
    let paths = PATHS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(paths.get(mechanism.name()).cloned().unwrap_or_else(|| format!("<{mechanism}.toml>")))
}

/// The mechanism a file's text describes (carried by a replay file or a worker's spec),
/// checked and defined for this process.
pub fn define(text: &str, origin: &str) -> Result<Mechanism, String> {
    let file = checked(text, origin)?;
    if let Some(builtin) = builtin_named(&file) {
        return Ok(builtin);
    }
    Mechanism::define(file.spec(), text).map_err(|e| format!("{origin}: {e}"))
}

/// Defines the mechanism whose file text a JSON document carries in `mechanism_file` (a
/// replay file, a worker's spec), before the rest of it is read: its mechanism's name is
/// then known. Nothing to do when it carries none.
pub fn define_carried(value: &serde_json::Value, origin: &str) -> Result<(), String> {
    match value.get("mechanism_file") {
        Some(serde_json::Value::String(text)) => define(text, origin).map(drop),
        Some(serde_json::Value::Null) | None => Ok(()),
        Some(_) => Err(format!("{origin}: expected the mechanism file's text")),
    }
}
