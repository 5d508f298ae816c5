//! The nightly search as the repository ships it for other engines: the Kubernetes
//! Indexed Job (`.ci/nightly/kubernetes.yaml` and its merge Job) and the CI matrix
//! workflow (`.github/workflows/nightly.yml`). Each must parse, its shard count must match
//! the shards it starts, and the very commands it runs, on a few seeds instead of the
//! nightly count, must be ones fencesim accepts and must merge into one answer.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::xmllint::validate_junit;
use yaml_rust2::{Yaml, YamlLoader};

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");

fn load(path: &str) -> Yaml {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("the file");
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}")).swap_remove(0)
}

/// Runs a shell script with fencesim on the PATH; its exit code.
fn sh(script: &str, env: &[(&str, String)]) -> Option<i32> {
    let bin = Path::new(FENCESIM).parent().expect("the binary's directory");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out =
        Command::new("/bin/sh").arg("-c").arg(script).env("PATH", path).envs(env.iter().cloned()).output();
    let out = out.expect("sh runs");
    assert!(
        out.stderr.is_empty() || out.status.code() != Some(2),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.code()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencesim-nightly-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    dir
}

/// The merge's JUnit report at `path`: valid, one passing case per invariant, over the
/// whole seed range.
fn check_junit(test: &str, path: &Path, seeds: u64) {
    validate_junit(test, path);
    let xml = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{test}: {}: {e}", path.display()));
    let cases = fencesim::tell::junit::judged_invariants().count();
    assert_eq!(xml.matches("<testcase ").count(), cases, "{test}: one case per invariant");
    assert!(!xml.contains("<failure"), "{test}: no violation");
    assert!(
        xml.contains(&format!("name=\"seed-range\" value=\"1..={seeds}\"")),
        "{test}: the whole range: {xml}"
    );
}

/// The seeds merged from the report at `path`, with the exit code of the merge.
fn merged_seeds(path: &Path) -> u64 {
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("the merged report")).expect("JSON");
    report["seeds_run"].as_u64().expect("seeds_run")
}

#[test]
fn the_kubernetes_jobs_run_commands_fencesim_accepts_and_merge_them() {
    let job = load(".ci/nightly/kubernetes.yaml");
    assert_eq!(
        (job["kind"].as_str(), job["spec"]["completionMode"].as_str()),
        (Some("Job"), Some("Indexed"))
    );
    let shards = job["spec"]["completions"].as_i64().expect("completions") as u64;
    assert_eq!(job["spec"]["parallelism"].as_i64(), Some(shards as i64), "every shard at once");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let script = container["args"][0].as_str().expect("the shard's script");
    assert!(script.contains(&format!("/{shards}")), "the script's shard count is the Job's: {script}");
    let dir = scratch("kubernetes");
    let small = script
        .replace("--seeds 1000000", &format!("--seeds {}", 2 * shards))
        .replace("/results", &dir.display().to_string());
    assert_ne!(
        small,
        script.replace("/results", &dir.display().to_string()),
        "the seed count is where the test expects it"
    );
    for index in 0..shards {
        assert_eq!(
            sh(&small, &[("JOB_COMPLETION_INDEX", index.to_string())]),
            Some(0),
            "shard {} of {shards}",
            index + 1
        );
    }
    let merge = load(".ci/nightly/kubernetes-merge.yaml");
    let merge_script =
        merge["spec"]["template"]["spec"]["containers"][0]["args"][0].as_str().expect("the merge");
    assert_eq!(
        sh(&merge_script.replace("/results", &dir.display().to_string()), &[]),
        Some(0),
        "the merge: no violation"
    );
    assert_eq!(merged_seeds(&dir.join("nightly.json")), 2 * shards);
    check_junit("the Kubernetes merge", &dir.join("nightly-junit.xml"), 2 * shards);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `run` of the workflow job's step named `name`.
fn step<'a>(job: &'a Yaml, name: &str) -> &'a str {
    let steps = job["steps"].as_vec().expect("steps");
    let found =
        steps.iter().find(|s| s["name"].as_str() == Some(name)).unwrap_or_else(|| panic!("a step '{name}'"));
    found["run"].as_str().expect("its command")
}

#[test]
fn the_ci_matrix_runs_commands_fencesim_accepts_and_merges_them() {
    let workflow = load(".github/workflows/nightly.yml");
    let (shard, merge) = (&workflow["jobs"]["shard"], &workflow["jobs"]["merge"]);
    let indices: Vec<i64> = shard["strategy"]["matrix"]["shard"]
        .as_vec()
        .expect("shards")
        .iter()
        .filter_map(Yaml::as_i64)
        .collect();
    let shards = indices.len() as i64;
    assert_eq!(indices, (1..=shards).collect::<Vec<_>>(), "shards 1..N");
    let explore = step(shard, "explore one shard");
    assert!(explore.contains(&format!("/{shards}")), "the command's shard count is the matrix's: {explore}");
    let matrix = &shard["strategy"]["matrix"];
    let mechanism = matrix["mechanism"][0].as_str().expect("a mechanism");
    let includes = matrix["include"].as_vec().expect("what each mechanism leaves out");
    let its = includes.iter().find(|i| i["mechanism"].as_str() == Some(mechanism)).expect("its include");
    let without = its["without"].as_str().expect("its --without");
    let dir = scratch("ci");
    let local = |command: &str| {
        format!("cd {} && {}", dir.display(), command.replace("target/release/fencesim", FENCESIM))
    };
    for index in &indices {
        let command = explore
            .replace("${{ matrix.shard }}", &index.to_string())
            .replace("${{ matrix.mechanism }}", mechanism)
            .replace("${{ matrix.without }}", without)
            .replace("--seeds 200000", &format!("--seeds {}", 2 * shards));
        assert_ne!(
            command.replace(&format!("--seeds {}", 2 * shards), ""),
            command,
            "the seed count is where the test expects it"
        );
        assert_eq!(sh(&local(&command), &[]), Some(0), "shard {index}");
    }
    let merging = step(merge, "merge the shards").replace("${{ matrix.mechanism }}", mechanism);
    assert_eq!(sh(&format!("{} > merged.json", local(&merging)), &[]), Some(0), "the merge: no violation");
    assert_eq!(merged_seeds(&dir.join("merged.json")), 2 * shards as u64);
    check_junit("the CI merge", &dir.join(format!("junit-{mechanism}.xml")), 2 * shards as u64);
    let _ = std::fs::remove_dir_all(&dir);
}
