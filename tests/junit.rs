//! `--junit FILE` on explore, matrix, mutants and merge: JUnit XML that a schema validator
//! accepts, one case per (mechanism, gateway, invariant) or per mutant, and a failing case
//! that carries its violation, its plan and the command that replays it.

mod support;

use fencesim::check::coverage::Coverage;
use fencesim::files::replay_file::ReplayFile;
use fencesim::search::matrix::matrix;
use fencesim::search::seeds::SeedRange;
use fencesim::tell::junit::matrix::matrix_suites;
use fencesim::tell::junit::{judged_invariants, junit_xml};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::xmllint::validate_junit;

fn fencesim_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencesim-junit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    dir
}

/// The `<testcase ...>...</testcase>` element named `name` (its text as written).
fn case<'a>(xml: &'a str, name: &str) -> &'a str {
    let start =
        xml.find(&format!("<testcase name=\"{name}\"")).unwrap_or_else(|| panic!("no case {name} in\n{xml}"));
    let rest = &xml[start..];
    let end =
        rest.find("</testcase>").map_or_else(|| rest.find("/>").expect("an element") + 2, |end| end + 11);
    &rest[..end]
}

/// XML text back to plain text (the few entities quick-xml writes).
fn plain(xml: &str) -> String {
    xml.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn property<'a>(xml: &'a str, name: &str) -> &'a str {
    let key = format!("<property name=\"{name}\" value=\"");
    let start = xml.find(&key).unwrap_or_else(|| panic!("no property {name}")) + key.len();
    &xml[start..start + xml[start..].find('"').expect("a value")]
}

#[test]
fn explore_junit_fails_each_broken_invariant_with_its_violation_plan_and_replay_command() {
    let dir = scratch("explore");
    let out = fencesim_in(
        &dir,
        &[
            "explore",
            "--mechanism",
            "ttl-only",
            "--gateway",
            "non-idempotent",
            "--seeds",
            "3",
            "--jobs",
            "2",
            "--junit",
            "explore.xml",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    validate_junit("explore --junit", &dir.join("explore.xml"));
    let xml = std::fs::read_to_string(dir.join("explore.xml")).expect("the report");
    assert_eq!(xml.matches("<testcase ").count(), judged_invariants().count(), "one case per invariant");
    assert_eq!(property(&xml, "seed-range"), "1..=3");
    // seed 1 of the random world pays r_232 twice under the TTL alone
    let double = plain(case(&xml, "no-double-refund"));
    assert!(double.contains("<failure message=\"no-double-refund broken at "), "{double}");
    assert!(double.contains("was refunded twice"), "{double}");
    assert!(double.contains("\"faults\": ["), "the body has the plan: {double}");
    let replay = double.lines().find_map(|l| l.strip_prefix("replay with: ")).expect("a replay command");
    let file = replay.strip_prefix("fencesim replay ").expect("a replay file");
    assert!(file.starts_with("fencesim-failures/random-ttl-only-non-idempotent-seed-1"), "{file}");
    let shrunk = ReplayFile::load(&dir.join(file)).expect("the file it names");
    assert!(shrunk.violations.iter().any(|v| v == "no-double-refund"), "it breaks the invariant");
    assert_eq!(property(&xml, "trace-hash.no-double-refund"), shrunk.expected_trace_hash);
    let again = fencesim_in(&dir, &replay.split(' ').skip(1).collect::<Vec<_>>());
    assert_eq!(again.status.code(), Some(1), "the replay command reproduces the failure");
    assert!(String::from_utf8_lossy(&again.stdout).contains("matches the file"));
    assert!(!case(&xml, "state-machine").contains("<failure"), "an invariant that held passes");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn a_clean_exploration_writes_only_passing_cases() {
    let dir = scratch("clean");
    let out = fencesim_in(
        &dir,
        &["explore", "--mechanism", "fenced-db-sequence", "--seeds", "2", "--junit", "clean.xml"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    validate_junit("explore --junit (clean)", &dir.join("clean.xml"));
    let xml = std::fs::read_to_string(dir.join("clean.xml")).expect("the report");
    assert!(xml.contains("failures=\"0\"") && !xml.contains("<failure"), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), judged_invariants().count());
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn merged_shards_write_the_junit_of_one_run_from_the_shards_replay_files() {
    let dir = scratch("merge");
    for shard in ["1/2", "2/2"] {
        let name = format!("shard-{}.json", &shard[..1]);
        let args = [
            "explore",
            "--mechanism",
            "ttl-only",
            "--gateway",
            "non-idempotent",
            "--seeds",
            "4",
            "--keep-going",
        ];
        let out = fencesim_in(&dir, &[&args[..], &["--no-shrink", "--json", "--shard", shard]].concat());
        assert_eq!(out.status.code(), Some(1));
        std::fs::write(dir.join(name), out.stdout).expect("a shard's report");
    }
    let out = fencesim_in(&dir, &["merge", "shard-2.json", "shard-1.json", "--junit", "merged.xml"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    validate_junit("merge --junit", &dir.join("merged.xml"));
    let xml = std::fs::read_to_string(dir.join("merged.xml")).expect("the report");
    assert_eq!(property(&xml, "seed-range"), "1..=4");
    assert_eq!(property(&xml, "seeds-run"), "4");
    let double = plain(case(&xml, "no-double-refund"));
    assert!(double.contains("of 4 seeds, first by seed 1"), "{double}");
    assert!(
        double.contains(
            "replay with: fencesim replay fencesim-failures/random-ttl-only-non-idempotent-seed-1.json"
        ),
        "{double}"
    );
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn mutants_junit_passes_a_caught_mutant_and_fails_a_missed_one() {
    let dir = scratch("mutants");
    let args =
        ["mutants", "--only", "confirm-without-fence,claim-fence-at-most", "--starts", "1", "--budget", "5"];
    let out =
        fencesim_in(&dir, &[&args[..], &["--keep-shrunk", "--jobs", "2", "--junit", "mutants.xml"]].concat());
    assert_eq!(
        out.status.code(),
        Some(1),
        "one mutant is missed in 5 seeds: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    validate_junit("mutants --junit", &dir.join("mutants.xml"));
    let xml = plain(&std::fs::read_to_string(dir.join("mutants.xml")).expect("the report"));
    let caught = case(&xml, "confirm-without-fence");
    assert!(
        !caught.contains("<failure") && caught.contains("caught by no-stale-confirm at seed 3"),
        "{caught}"
    );
    assert!(
        caught.contains("replay with: fencesim replay reports/mutants/confirm-without-fence.json"),
        "{caught}"
    );
    assert!(dir.join("reports/mutants/confirm-without-fence.json").exists(), "the file it names is kept");
    let missed = case(&xml, "claim-fence-at-most");
    assert!(missed.contains("<failure message=\"claim-fence-at-most was not caught"), "{missed}");
    assert!(missed.contains("fencesim mutants --only claim-fence-at-most --starts 1 --budget 5"), "{missed}");
    assert_eq!(property(&xml, "first-seed.confirm-without-fence"), "3");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn matrix_junit_has_a_case_per_mechanism_gateway_and_invariant() {
    let mut coverage = Coverage::new();
    let cells = matrix(SeedRange::first(2).expect("seeds"), 2, 2, &mut coverage).expect("the cells");
    let dir = scratch("matrix");
    let suites = matrix_suites(&cells, &[], &dir).expect("the suites");
    let path = dir.join("matrix.xml");
    std::fs::write(&path, junit_xml("fencesim matrix", &suites).expect("XML")).expect("written");
    validate_junit("matrix --junit", &path);
    let xml = std::fs::read_to_string(&path).expect("the report");
    assert_eq!(xml.matches("<testcase ").count(), cells.len() * judged_invariants().count());
    let broken: usize = cells.iter().map(|cell| cell.broken.len()).sum();
    assert!(broken > 0, "some mechanism breaks something in two seeds");
    assert_eq!(xml.matches("<failure ").count(), broken, "one failed case per broken invariant");
    let ttl_only = xml.find("<testsuite name=\"matrix ttl-only.non-idempotent\"").expect("its suite");
    let cell = plain(&xml[ttl_only..ttl_only + xml[ttl_only..].find("</testsuite>").expect("its end")]);
    assert!(cell.contains("replay with: fencesim run --scenario random --mechanism ttl-only --gateway non-idempotent --seed "), "{cell}");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn junit_that_cannot_be_written_or_is_asked_of_a_shard_exits_2() {
    let dir = scratch("refused");
    let out = fencesim_in(
        &dir,
        &["explore", "--mechanism", "fenced", "--seeds", "1", "--junit", "no/such/dir/x.xml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write no/such/dir/x.xml"));
    for args in [
        &["matrix", "--shard", "1/2", "--junit", "x.xml"][..],
        &["mutants", "--shard", "1/2", "--junit", "x.xml"],
    ] {
        let out = fencesim_in(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"), "{args:?}");
    }
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}
