//! Mechanisms from files, live: the worker processes read a team's mechanism from their
//! spec (the file's text, not its path) and run its scripts on a real redis-server, and the
//! run gets the simulation's verdicts for it. Without a redis-server these tests say
//! loudly that they skipped; with `CI` set they fail instead.

mod support;

use fencesim::runner::run;
use fencesim::scenario::{self, FaultMask};
use fencesim::sim::GatewayMode;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::redis_server;
use support::slots::{live_slot, Slot};

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// This test's place among the live runs, or none (said loudly) on a machine without a
/// redis-server.
fn turn(test: &str) -> Option<Slot> {
    let slot = live_slot();
    redis_server::available(test).then_some(slot)
}

fn names(list: &serde_json::Value) -> BTreeSet<String> {
    list.as_array().unwrap().iter().map(|v| v["invariant"].as_str().unwrap().to_owned()).collect()
}

/// A mechanism from a file, live: the worked example under a release that forgot to
/// compare frees B's lease, as in the simulation.
#[test]
fn a_mechanism_from_a_file_runs_live_with_the_simulations_verdict() {
    let Some(_turn) = turn("live-mechanism-file") else { return };
    let path = "tests/data/mechanism_bugs/release-without-compare.toml";
    let out = Command::new(FENCESIM)
        .args(["live", "--time-scale", "0.25", "--json", "--mechanism-file", path])
        .current_dir(root())
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let ours = fencesim::mechanism_file::define(&text, path).unwrap();
    let world = scenario::build("worked-example", 1, ours, GatewayMode::Idempotent, FaultMask::ALL).unwrap();
    let outcome = run(&world, 1).unwrap();
    let simulated: BTreeSet<String> =
        outcome.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant.to_owned()).collect();
    assert_eq!(names(&json["violations"]), simulated, "{json}");
    assert!(names(&json["violations"]).contains("lease-integrity"), "A's release freed B's lease: {json}");
    assert_eq!(json["mechanism"], "team-release-without-compare", "{json}");
}

/// A team's acquisition script that forgot `NX`, live: the workers run it on the real
/// server inside a script that reads the key before and after it, so that a lease taken
/// from its live holder is told as the simulation tells it. The shrunk failure `explore`
/// finds breaks lease-integrity in both live runs, and every other invariant as simulated.
#[test]
fn an_acquisition_script_that_takes_a_live_lease_breaks_lease_integrity_live_too() {
    let Some(_turn) = turn("live-acquire-without-nx") else { return };
    let dir = std::env::temp_dir().join(format!("fencesim-live-acquire-{}", std::process::id()));
    let bug = "tests/data/mechanism_bugs/acquire-without-nx.toml";
    let found = Command::new(FENCESIM)
        .args(["explore", "--mechanism-file", bug, "--seeds", "20", "--jobs", "1", "--out"])
        .arg(&dir)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(found.status.code(), Some(1), "{}", String::from_utf8_lossy(&found.stderr));
    let shrunk: PathBuf = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().contains("shrunk"))
        .unwrap_or_else(|| panic!("a shrunk replay file in {}", dir.display()));
    let out =
        Command::new(FENCESIM).args(["live", "--runs", "2", "--json", "--replay"]).arg(&shrunk).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a violation, exit 1: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for invariant in json["invariants"].as_array().unwrap() {
        let (sim, live) = (invariant["simulated_broken"] == true, invariant["live_runs_broken"].as_u64());
        assert_eq!(live, Some(if sim { 2 } else { 0 }), "{invariant} in {json}");
    }
    let integrity = json["invariants"].as_array().unwrap().iter().find(|i| i["name"] == "lease-integrity");
    assert_eq!(integrity.unwrap()["live_runs_broken"], 2, "{json}");
}

/// The line of a story that tells a failed acquisition script, without its time.
fn failed_acquisition(story: &str) -> String {
    let line =
        story.lines().find(|line| line.contains("acquire script on")).unwrap_or_else(|| panic!("{story}"));
    line.split_once("  ").map_or(line, |(_, told)| told.trim_start()).to_owned()
}

/// An acquisition script that errors when it runs (B's first one, here) is told live in the
/// words the simulated Redis gives: the server's error reply, naming the script's own line
/// and SHA, not those of the script the live port wraps it in.
#[test]
fn an_acquisition_script_that_errors_live_is_told_in_the_simulations_words() {
    let Some(_turn) = turn("live-acquire-errors") else { return };
    let fenced = std::fs::read_to_string(root().join("mechanisms/fenced.toml")).unwrap();
    let script = "if ARGV[1] == 'B#1' then return redis.call('pexpire', KEYS[1], ARGV[3]) end \
                  return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";
    let text = fenced.replacen("name = \"fenced\"", "name = \"acquire-errors\"", 1).replacen(
        "[scripts]\n",
        &format!("[scripts]\nacquire = \"{script}\"\n"),
        1,
    );
    let path = std::env::temp_dir().join(format!("fencesim-acquire-errors-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let story = |args: &[&str]| {
        let out = Command::new(FENCESIM).args(args).arg("--mechanism-file").arg(&path).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (simulated, live) = (story(&["run"]), story(&["live", "--time-scale", "0.25"]));
    let _ = std::fs::remove_file(&path);
    let told = failed_acquisition(&live);
    assert_eq!(told, failed_acquisition(&simulated), "{live}");
    assert!(told.contains(&fencesim::sim::redis::sha1_hex(script)), "the script's own SHA: {told}");
    assert!(told.contains("@user_script:1."), "the script's own line: {told}");
}
