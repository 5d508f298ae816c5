//! The example worker programs and `fencesim worker` as the tests run them: the binary,
//! its exit code and what it prints.

#![allow(dead_code)] // each test binary uses part of it

use fencesim::model::Mechanism;
use fencesim::runner::run_with;
use fencesim::scenario::{build, FaultMask};
use fencesim::sim::GatewayMode;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the servers and `needs` (an installed example's file) are here; says loudly when not.
pub fn available(test: &str, needs: Option<&Path>) -> bool {
    let servers = super::redis_server::available(test) && super::postgres::available(test);
    let example = needs.is_none_or(Path::exists);
    if servers && example {
        return true;
    }
    let missing = if servers { "the example workers (run examples/workers/install)" } else { "PostgreSQL" };
    assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and {missing} was not found");
    eprintln!("SKIPPED {test}: {missing} not found on this machine");
    false
}

pub fn typescript() -> (PathBuf, Vec<String>) {
    let worker = root().join("examples/workers/typescript/dist/worker.js");
    (worker.clone(), vec!["node".into(), worker.display().to_string()])
}

/// The TypeScript worker with its fence conditions removed, if it is here (said if not).
pub fn unfenced_typescript(test: &str) -> Option<Vec<String>> {
    let (needs, mut command) = typescript();
    command.push("--no-fence".into());
    available(test, Some(&needs)).then_some(command)
}

pub fn python() -> (PathBuf, Vec<String>) {
    let venv = root().join("examples/workers/python/.venv/bin/python");
    let worker = root().join("examples/workers/python/worker.py");
    (venv.clone(), vec![venv.display().to_string(), worker.display().to_string()])
}

/// `fencesim worker [flags] -- command`: exit code, standard output, standard error.
pub fn worker(flags: &[&str], command: &[String]) -> (i32, String, String) {
    let mut args = vec!["worker"];
    args.extend(flags);
    args.push("--");
    args.extend(command.iter().map(String::as_str));
    fencesim(&args)
}

/// `fencesim worker [flags] --json -- command` until its verdict is `expected`, at time
/// scale 0.25 and, only when a run said that the program fell behind the simulation's pace
/// (it then told a later story: a loaded machine), again at 0.5 and 1: the stdout and
/// stderr of the run that gave `expected`. A run that gives another verdict while keeping
/// the pace, or that fell behind even at 1, fails the test with what it printed.
pub fn worker_at_pace(flags: &[&str], command: &[String], expected: &[String]) -> (i32, String, String) {
    for scale in ["0.25", "0.5", "1"] {
        let flags = [flags, &["--json", "--time-scale", scale]].concat();
        let (code, stdout, stderr) = worker(&flags, command);
        let value: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
        let behind = value["behind_ms"].as_object().expect("behind_ms").clone();
        let fell = behind.values().filter_map(serde_json::Value::as_u64).max().unwrap_or(0);
        if broken(&stdout) == expected {
            return (code, stdout, stderr);
        }
        assert!(
            fell >= fencesim::cli::worker::BEHIND_TOLD_MS && scale != "1",
            "{command:?} at time scale {scale} broke {:?} where the simulation breaks {expected:?}, \
             behind the pace {behind:?}: {stderr}",
            broken(&stdout)
        );
        assert!(stderr.contains("fell behind the simulation's pace"), "the run says so: {stderr}");
        eprintln!(
            "NOTE {command:?} fell behind the simulation's pace at time scale {scale} ({behind:?} story ms) \
             and broke {:?}: run again at a slower time scale",
            broken(&stdout)
        );
    }
    unreachable!("the last time scale either agrees or fails")
}

/// The invariants a `fencesim worker --json` run broke.
pub fn broken(stdout: &str) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_str(stdout).expect("one JSON object");
    let mut names: Vec<String> = value["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| v["invariant"].as_str().expect("a name").to_owned())
        .collect();
    names.dedup();
    names
}

/// The invariants the simulation breaks on the worked example under `mechanism`.
pub fn simulated(mechanism: Mechanism, gateway: GatewayMode) -> Vec<String> {
    let scenario = build("worked-example", 1, mechanism, gateway, FaultMask::ALL).unwrap();
    let outcome = run_with(&scenario, 1, None).unwrap();
    outcome.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant.to_owned()).collect()
}

/// `fencesim ARGS`, run from the project's root: exit code, standard output, standard error.
pub fn fencesim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("fencesim runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The project's own worker as a program that follows the contract (`fencesim contract-worker`).
pub fn own_worker(mechanism: &str) -> Vec<String> {
    [env!("CARGO_BIN_EXE_fencesim"), "contract-worker", "--mechanism", mechanism].map(str::to_owned).to_vec()
}

/// A directory of a test's own, emptied, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("fencesim-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
