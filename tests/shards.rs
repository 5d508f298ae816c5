//! An exploration spread over machines: four `explore --shard K/4` processes, run at the
//! same time, merged by `fencesim merge`, give what one run of the whole range gives; a
//! shard missing, given twice, or of another run is refused with exit 2. The same for the
//! matrix and the mutant measurement: four `matrix --shard K/4` (or `mutants --shard K/4`)
//! processes merged write the report one run writes.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");

fn explore(dir: &Path, out: &str, seeds: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(FENCESIM);
    command
        .args(["explore", "--mechanism", "ttl-only", "--gateway", "non-idempotent", "--from", "11"])
        .args(["--seeds", seeds])
        .args(["--keep-going", "--json", "--no-shrink", "--jobs", "1", "--out"])
        .arg(dir.join(out))
        .args(extra);
    command
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("JSON: {e}: {}", String::from_utf8_lossy(&output.stderr)))
}

fn merge(files: &[&PathBuf]) -> Output {
    Command::new(FENCESIM).arg("merge").args(files).output().expect("fencesim merge runs")
}

/// The file names of a list of paths (each shard writes into its own directory).
fn names(value: &Value) -> Vec<String> {
    let paths = value.as_array().cloned().unwrap_or_default();
    paths
        .iter()
        .map(|p| {
            Path::new(p.as_str().unwrap_or(""))
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn four_shards_merged_are_one_run() {
    let dir = std::env::temp_dir().join(format!("fencesim-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    // The four shards run at the same time, as four machines would.
    let running: Vec<_> = (1..=4)
        .map(|k| {
            let mut shard = explore(&dir, &format!("out{k}"), "60", &["--shard", &format!("{k}/4")]);
            shard.stdout(std::process::Stdio::piped()).spawn().expect("a shard starts")
        })
        .collect();
    let files: Vec<PathBuf> = running
        .into_iter()
        .enumerate()
        .map(|(i, child)| {
            let path = dir.join(format!("shard{}.json", i + 1));
            std::fs::write(&path, child.wait_with_output().expect("a shard runs").stdout)
                .expect("its report");
            path
        })
        .collect();
    let one = json(&explore(&dir, "one", "60", &[]).output().expect("one run"));
    let shuffled = [&files[2], &files[0], &files[3], &files[1]];
    let merged_output = merge(&shuffled);
    assert_eq!(merged_output.status.code(), Some(1), "violations found: exit 1");
    let merged = json(&merged_output);
    assert!(one["seeds_run"] == 60 && one["first_failing_seed"].is_u64(), "the run found something: {one}");
    for key in
        ["seeds_run", "violations", "first_failing_seed", "coverage", "first_seeds", "run", "interrupted"]
    {
        assert_eq!(merged[key], one[key], "{key}");
    }
    assert_eq!(names(&merged["replay_files"]), names(&one["replay_files"]));
    assert_eq!(
        names(&Value::Array(vec![merged["replay_file"].clone()])),
        names(&Value::Array(vec![one["replay_file"].clone()]))
    );
    let per_shard: Vec<u64> = merged["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .map(|s| s["seeds_run"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(per_shard, [15, 15, 15, 15]);

    let refused = |files: &[&PathBuf], said: &str| {
        let output = merge(files);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{said}: {stderr}");
        assert!(stderr.contains(said), "'{said}' in: {stderr}");
    };
    refused(&[&files[0], &files[1], &files[3]], "missing shard(s): 3/4");
    refused(&[&files[0], &files[1], &files[1], &files[2], &files[3]], "shard 2/4 is given twice");
    let other = dir.join("other.json");
    let other_run = explore(&dir, "other", "61", &["--shard", "3/4"]).output().expect("another run");
    std::fs::write(&other, other_run.stdout).expect("its report");
    refused(&[&files[0], &files[1], &other, &files[3]], "is a shard of another run");
    let single = dir.join("single.json");
    std::fs::write(&single, serde_json::to_vec(&one).expect("JSON")).expect("a file");
    refused(&[&single], "is not a shard");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shard_runs_its_whole_share_or_is_refused() {
    let no_keep_going = Command::new(FENCESIM)
        .args(["explore", "--mechanism", "fenced", "--seeds", "10", "--shard", "1/4"])
        .output()
        .expect("runs");
    assert_eq!(no_keep_going.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_keep_going.stderr).contains("--shard needs --keep-going"));
    for (shard, said) in [("5/4", "K/N"), ("11/11", "every shard needs a seed")] {
        let output = Command::new(FENCESIM)
            .args(["explore", "--mechanism", "fenced", "--seeds", "10", "--keep-going", "--shard", shard])
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(2), "{shard}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(said),
            "{shard}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The files a matrix or a mutant run writes under its root: the report, its chart and the
/// shrunk runs, by name.
fn written(root: &Path, reports: &[&str], shrunk: &str) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = reports.iter().map(|report| root.join(report)).collect();
    let shrunk = std::fs::read_dir(root.join(shrunk)).expect("the shrunk runs");
    let mut shrunk: Vec<PathBuf> = shrunk.map(|entry| entry.expect("an entry").path()).collect();
    shrunk.sort();
    files.extend(shrunk);
    files
        .iter()
        .map(|path| {
            let name = path.strip_prefix(root).expect("under the root").display().to_string();
            (name, std::fs::read_to_string(path).expect("readable"))
        })
        .collect()
}

#[test]
fn four_matrix_shards_merged_write_the_report_one_run_writes() {
    let dir = std::env::temp_dir().join(format!("fencesim-matrix-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    let small = [
        "--seeds",
        "12",
        "--sweep-seeds",
        "4",
        "--debate-seeds",
        "8",
        "--store-seeds",
        "4",
        "--lag-seeds",
        "12",
        "--verdict-seeds",
        "16",
    ];
    let files = shards_of(&dir, "matrix", &[&["matrix"][..], &small].concat());
    let mut one = Command::new(FENCESIM);
    let one = one.args(["matrix", "--jobs", "1", "--root"]).arg(dir.join("one")).args(small).output();
    assert!(one.expect("one run").status.success());
    let merged = Command::new(FENCESIM)
        .args(["merge", "--jobs", "1", "--root"])
        .arg(dir.join("merged"))
        .args([&files[3], &files[1], &files[0], &files[2]])
        .output()
        .expect("fencesim merge runs");
    assert!(merged.status.success(), "{}", String::from_utf8_lossy(&merged.stderr));
    let of = |root: &str| {
        let mut files =
            written(&dir.join(root), &["reports/guarantees.md", "reports/sweep.svg"], "reports/shrunk");
        files.extend(written(&dir.join(root), &[], "reports/second-store"));
        files
    };
    let (one, merged) = (of("one"), of("merged"));
    assert!(one.len() > 1, "the small matrix has failures to shrink: {one:?}");
    assert_eq!(merged, one, "the merged report and shrunk failures are one run's");

    let refused = |files: &[&PathBuf], said: &str| {
        let output = Command::new(FENCESIM).arg("merge").args(files).arg("--root").arg(&dir).output();
        let output = output.expect("fencesim merge runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{said}: {stderr}");
        assert!(stderr.contains(said), "'{said}' in: {stderr}");
    };
    refused(&[&files[0], &files[1], &files[3]], "missing shard(s): 3/4");
    refused(&[&files[0], &files[1], &files[2], &files[2], &files[3]], "shard 3/4 is given twice");
    let other = Command::new(FENCESIM)
        .args([
            "matrix",
            "--shard",
            "2/4",
            "--seeds",
            "12",
            "--sweep-seeds",
            "4",
            "--debate-seeds",
            "9",
            "--store-seeds",
            "4",
            "--lag-seeds",
            "12",
            "--verdict-seeds",
            "16",
        ])
        .output()
        .expect("another run");
    let other_path = dir.join("other.json");
    std::fs::write(&other_path, other.stdout).expect("its report");
    refused(&[&files[0], &other_path, &files[2], &files[3]], "is a shard of another run");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each shard's output, from processes run at the same time, as files in `dir`.
fn shards_of(dir: &Path, name: &str, args: &[&str]) -> Vec<PathBuf> {
    let running: Vec<_> = (1..=4)
        .map(|k| {
            let mut command = Command::new(FENCESIM);
            command.args(args).args(["--jobs", "1", "--shard", &format!("{k}/4")]);
            command.stdout(std::process::Stdio::piped()).spawn().expect("a shard starts")
        })
        .collect();
    running
        .into_iter()
        .enumerate()
        .map(|(i, child)| {
            let output = child.wait_with_output().expect("a shard runs");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            let path = dir.join(format!("{name}{}.json", i + 1));
            std::fs::write(&path, output.stdout).expect("its report");
            path
        })
        .collect()
}

/// A mutant report's lines without their last column, the wall time: the one figure a
/// merge cannot give as one run would (each mutant's time is its shard's).
fn without_wall_time(files: Vec<(String, String)>) -> Vec<(String, String)> {
    let cut = |line: &str| match line.strip_suffix(" s |") {
        Some(rest) if line.starts_with("| ") => {
            rest.rsplit_once("| ").map_or(line, |(head, _)| head).to_owned()
        }
        _ => line.to_owned(),
    };
    files
        .into_iter()
        .map(|(name, text)| (name, text.lines().map(cut).collect::<Vec<_>>().join("\n")))
        .collect()
}

#[test]
fn four_mutant_shards_merged_write_the_report_one_run_writes() {
    let dir = std::env::temp_dir().join(format!("fencesim-mutant-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    // both searches, so that the merge carries the guided search's runs into the report
    let small = [
        "mutants",
        "--starts",
        "1",
        "--budget",
        "12",
        "--false-alarm-seeds",
        "8",
        "--no-exhaustive",
        "--search",
        "uniform,guided",
    ];
    let files = shards_of(&dir, "mutants", &small);
    let one =
        Command::new(FENCESIM).args(small).arg("--root").arg(dir.join("one")).output().expect("one run");
    let merged = Command::new(FENCESIM)
        .args(["merge", "--root"])
        .arg(dir.join("merged"))
        .args([&files[2], &files[0], &files[3], &files[1]])
        .output()
        .expect("fencesim merge runs");
    assert_eq!(merged.status.code(), one.status.code(), "{}", String::from_utf8_lossy(&merged.stderr));
    let of = |root: &str| {
        let reports = ["reports/detection.md", "reports/detection.svg"];
        without_wall_time(written(&dir.join(root), &reports, "reports/mutants"))
    };
    let (one, merged) = (of("one"), of("merged"));
    assert!(one.len() > 10, "most mutants are caught and shrunk even so: {}", one.len());
    let report = &one.iter().find(|(name, _)| name.ends_with("detection.md")).expect("the report").1;
    assert!(report.contains("## The guided search beside the uniform one"), "{report}");
    let chart = &one.iter().find(|(name, _)| name.ends_with("detection.svg")).expect("the chart").1;
    assert!(chart.contains("release-with-del, guided</text>"), "the chart draws the guided bars");
    assert_eq!(merged, one, "the merged report and shrunk runs are one run's");
    let output = Command::new(FENCESIM).arg("merge").args([&files[0], &files[1], &files[3]]).output();
    let output = output.expect("fencesim merge runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("missing shard(s): 3/4"));
    let _ = std::fs::remove_dir_all(&dir);
}
