//! Exploration, replay files and the matrix: the search finds what it should, keeps it,
//! and gives the same answer however many threads ran it.

use fencesim::files::replay_file::ReplayFile;
use fencesim::model::{Mechanism, Safety};
use fencesim::runner::run;
use fencesim::scenario::{self, FaultMask};
use fencesim::search::debate::{Setting, DEBATE_SEEDS};
use fencesim::search::explore::{explore, ExploreConfig, ExploreReport, SearchKind};
use fencesim::search::false_alarms::promised;
use fencesim::search::matrix::{sweep_scenario, SWEEP_TTLS_MS};
use fencesim::sim::GatewayMode;
use fencesim::tell::reports::guarantees::{
    parse_debate, parse_first_failures, sweep_chart, DebateLine, FirstFailure, GUARANTEES_REPORT, SWEEP_CHART,
};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencesim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn explore_with(mechanism: Mechanism, seeds: u64, jobs: usize, out: &std::path::Path) -> ExploreReport {
    let config = ExploreConfig::random(mechanism, 1, seeds, jobs, out.to_path_buf());
    explore(&config, &AtomicBool::new(false)).unwrap()
}

#[test]
fn every_mechanism_not_safe_under_every_fault_fails_within_2000_seeds_and_its_replay_file_reproduces_it() {
    let out = out_dir("fails");
    for mechanism in Mechanism::ALL.into_iter().filter(|m| m.spec().safety != Safety::Safe) {
        let report = explore_with(mechanism, 2_000, 2, &out);
        let seed =
            report.first_failing_seed.unwrap_or_else(|| panic!("{mechanism}: no violation in 2,000 seeds"));
        assert_eq!(report.seeds_run, seed, "{mechanism}: stops at the first failing seed");
        let path = report.replay_file.clone().expect("a replay file was written");
        let file = ReplayFile::load(&path).unwrap();
        assert_eq!((file.mechanism, file.seed), (mechanism, seed));
        let again = run(&file.scenario().unwrap(), file.seed).unwrap();
        assert_eq!(format!("{:016x}", again.trace_hash), file.expected_trace_hash, "{mechanism}");
        assert!(!again.passed());
        assert!(file.violations.iter().all(|invariant| again.check(invariant).is_violation()));
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn the_results_do_not_depend_on_the_number_of_threads() {
    let (a, b) = (out_dir("j1"), out_dir("j3"));
    let one = explore_with(Mechanism::TtlRenewal, 300, 1, &a);
    let three = explore_with(Mechanism::TtlRenewal, 300, 3, &b);
    assert_eq!(one.seeds_run, three.seeds_run);
    assert_eq!(one.first_failing_seed, three.first_failing_seed);
    assert_eq!(one.violations, three.violations);
    assert_eq!(one.coverage, three.coverage);
    let read = |path: &Option<PathBuf>| std::fs::read_to_string(path.as_ref().unwrap()).unwrap();
    assert_eq!(read(&one.replay_file), read(&three.replay_file));
    let _ = (std::fs::remove_dir_all(a), std::fs::remove_dir_all(b));
}

#[test]
fn tokens_from_the_database_keep_every_invariant_over_the_default_suite_and_every_fault_kind_fires() {
    let safe: Vec<Mechanism> =
        Mechanism::ALL.into_iter().filter(|m| m.spec().safety == Safety::Safe).collect();
    assert!(
        safe.contains(&Mechanism::FencedDbSequence),
        "the coverage below is measured on a safe mechanism"
    );
    let out = out_dir("safe");
    let config = ExploreConfig {
        scenario: "random".into(),
        mechanism: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        from: 1,
        seeds: 1000,
        jobs: 2,
        keep_going: true,
        out: out.clone(),
        allowed: FaultMask::ALL,
        mutant: None,
        progress: false,
        search: SearchKind::Uniform,
    };
    let report = explore(&config, &AtomicBool::new(false)).unwrap();
    assert_eq!(report.seeds_run, 1000);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // every other safe mechanism keeps every invariant over the same suite, too
    for mechanism in safe.into_iter().filter(|&m| m != Mechanism::FencedDbSequence) {
        let other =
            ExploreConfig { mechanism, scenario: config.scenario.clone(), out: config.out.clone(), ..config };
        let other = explore(&other, &AtomicBool::new(false)).unwrap();
        assert!(other.violations.is_empty(), "{mechanism}: {:?}", other.violations);
    }
    assert!(
        report.coverage.silent_fault_kinds().is_empty(),
        "never fired: {:?}",
        report.coverage.silent_fault_kinds()
    );
    for (step, n) in &report.coverage.step_triggers {
        assert!(*n > 0, "no fault was ever triggered at {step}");
    }
    for (call, n) in &report.coverage.call_triggers {
        assert!(*n > 0, "no fault was ever triggered right before a {call}");
    }
    // A database sequence never goes back, and no failover sends a Redis counter it does not
    // use back; every other situation must have been reached.
    let never = ["a counter went backwards", "a failover sent a counter back"];
    for (situation, runs) in &report.coverage.sometimes {
        assert_eq!(*runs > 0, !never.contains(situation), "{situation}: {runs} runs");
    }
    assert!(!out.exists(), "no failure, no file");

    // The same suite under a Redis counter does see a counter go back (a restart lost it).
    let redis = ExploreConfig { mechanism: Mechanism::Fenced, seeds: 200, ..config };
    let report = explore(&redis, &AtomicBool::new(false)).unwrap();
    assert!(report.coverage.sometimes["a counter went backwards"] > 0);

    // Inside an operation: Redlock's majority takes five Redis round trips (a single
    // instance's lease never takes two, so there such a trigger fires only on a bug).
    let redlock = ExploreConfig { mechanism: Mechanism::Redlock, seeds: 200, ..redis };
    let report = explore(&redlock, &AtomicBool::new(false)).unwrap();
    assert!(report.coverage.within_triggers["Redis command"] > 0, "{:?}", report.coverage.within_triggers);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_mechanism_safe_unless_its_counter_is_lost_keeps_every_invariant_when_redis_keeps_it() {
    let out = out_dir("fenced");
    let keeps = |m: &Mechanism| {
        matches!(m.spec().safety, Safety::UnlessCounterLost | Safety::UnlessRestartLosesCounter)
    };
    for mechanism in Mechanism::ALL.into_iter().filter(keeps) {
        let without = promised(mechanism).flatten().expect("a counter it can lose");
        let config = ExploreConfig {
            scenario: "random".into(),
            mechanism,
            gateway: GatewayMode::Idempotent,
            from: 1,
            seeds: 300,
            jobs: 2,
            keep_going: true,
            out: out.clone(),
            allowed: FaultMask::ALL.without_names(without).unwrap(),
            mutant: None,
            progress: false,
            search: SearchKind::Uniform,
        };
        let report = explore(&config, &AtomicBool::new(false)).unwrap();
        assert!(report.violations.is_empty(), "{mechanism}: {:?}", report.violations);
    }
}

/// The failover a mechanism does not promise to survive breaks it: fenced, which uses its
/// grant and token at once, breaks under the replicated scenario, where no restart loses a
/// counter and only a failover can send one back; the same mechanism that waits for the
/// replica first does not, over the same seeds.
#[test]
fn a_failover_breaks_fenced_and_not_fenced_when_it_waits_for_the_replica() {
    let out = out_dir("failover");
    let config = |mechanism| ExploreConfig {
        scenario: "replicated".into(),
        mechanism,
        gateway: GatewayMode::Idempotent,
        from: 1,
        seeds: 400,
        jobs: 2,
        keep_going: true,
        out: out.clone(),
        allowed: FaultMask::ALL,
        mutant: None,
        progress: false,
        search: SearchKind::Uniform,
    };
    let fenced = explore(&config(Mechanism::Fenced), &AtomicBool::new(false)).unwrap();
    assert!(fenced.violations.contains_key("monotonic-fences"), "{:?}", fenced.violations);
    assert!(fenced.coverage.fault_kinds["redis-restart"] == 0, "the replicated scenario never restarts");
    assert!(fenced.coverage.sometimes["a failover sent a counter back"] > 0);
    let waits = explore(&config(Mechanism::FencedWaitReplica), &AtomicBool::new(false)).unwrap();
    assert!(waits.violations.is_empty(), "{:?}", waits.violations);
    assert!(waits.coverage.sometimes["a failover lost a lease key"] > 0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_guarantees_report_is_fresh() {
    let (text, stale) = guarantees();
    let rows = parse_first_failures(&text);
    assert!(rows.len() > 20, "{stale}");
    let mut checked = std::collections::BTreeSet::new();
    for FirstFailure { mechanism, gateway, invariant, seed, trace_hash } in rows {
        let chosen = scenario::build("random", seed, mechanism, gateway, FaultMask::ALL).unwrap();
        let outcome = run(&chosen, seed).unwrap();
        assert_eq!(
            format!("{:016x}", outcome.trace_hash),
            trace_hash,
            "{stale} ({mechanism} {gateway} seed {seed})"
        );
        assert!(
            outcome.check(&invariant).is_violation(),
            "{stale} ({mechanism} {gateway} seed {seed} {invariant})"
        );
        checked.insert((mechanism, gateway));
    }
    // every cell of the sweep names seed 1's trace
    for mechanism in [Mechanism::TtlOnly, Mechanism::Fenced] {
        for ttl in SWEEP_TTLS_MS {
            let outcome = run(&sweep_scenario(1, mechanism, ttl), 1).unwrap();
            assert!(
                text.contains(&format!("{:016x}", outcome.trace_hash)),
                "{stale} (sweep {mechanism} {ttl} ms)"
            );
        }
    }
    assert!(checked.len() >= 12, "{stale}");
}

/// The committed report, and what to say when it is stale.
fn guarantees() -> (String, &'static str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GUARANTEES_REPORT);
    let stale =
        "reports/guarantees.md is stale: regenerate it with `cargo run --release -- matrix` and commit it";
    (std::fs::read_to_string(path).unwrap_or_default(), stale)
}

#[test]
fn the_debate_in_the_guarantees_report_is_fresh() {
    let (text, stale) = guarantees();
    let lines = parse_debate(&text);
    assert_eq!(lines.len(), 8, "{stale}: four settings, two mechanisms");
    for DebateLine { setting, mechanism, broken, seed, trace_hash } in lines {
        let chosen =
            scenario::build("random", seed, mechanism, GatewayMode::Idempotent, setting.mask()).unwrap();
        let outcome = run(&chosen, seed).unwrap();
        let said = format!("{stale} ({} {mechanism} seed {seed})", setting.letter());
        assert_eq!(format!("{:016x}", outcome.trace_hash), trace_hash, "{said}");
        assert_eq!(outcome.passed(), broken == 0, "{said}: the seed named breaks an invariant iff any did");
    }
    assert!(
        text.contains(&format!("over the same {DEBATE_SEEDS} seeds")),
        "{stale}: the debate's seed count"
    );
}

/// What the debate over majority leases was built to settle, as the committed report
/// measured it (the test above keeps the report fresh): without stalls and clock shifts
/// Redlock as specified breaks nothing, with either it does, and with a token it breaks
/// nothing in any setting.
#[test]
fn the_debate_finds_redlock_safe_only_without_stalls_and_clock_shifts_and_the_token_safe_in_all() {
    let (text, stale) = guarantees();
    let broken = |setting: Setting, mechanism: Mechanism| {
        let lines = parse_debate(&text);
        let line = lines.iter().find(|line| (line.setting, line.mechanism) == (setting, mechanism));
        line.unwrap_or_else(|| panic!("{stale}: no row for {} {mechanism}", setting.letter())).broken
    };
    assert_eq!(broken(Setting::Neither, Mechanism::Redlock), 0);
    assert!(broken(Setting::Stalls, Mechanism::Redlock) > 0);
    assert!(broken(Setting::ClockShifts, Mechanism::Redlock) > 0);
    for setting in Setting::all() {
        assert_eq!(broken(setting, Mechanism::RedlockFenced), 0, "{}", setting.letter());
    }
}

/// Each mechanism's first failure, shrunk, replays to its hash, still breaks its invariant,
/// and is as small as the suite's target: at most 3 faults, 3 workers and 5 rows.
#[test]
fn each_shrunk_first_failure_in_the_guarantees_report_replays_and_still_breaks_its_invariant() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(GUARANTEES_REPORT)).unwrap_or_default();
    let stale = "reports/shrunk is stale: regenerate it with `cargo run --release -- matrix` and commit it";
    let section = text.split("## First failures, shrunk").nth(1).expect(stale);
    let mut listed = std::collections::BTreeSet::new();
    for line in section.lines().take_while(|line| !line.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(file) = cells.get(8).and_then(|cell| cell.strip_prefix('`')?.strip_suffix('`')) else {
            continue;
        };
        let replay = ReplayFile::load(&root.join(file)).unwrap_or_else(|e| panic!("{stale}: {e}"));
        let outcome = run(&replay.scenario().unwrap(), replay.seed).unwrap();
        assert_eq!(format!("{:016x}", outcome.trace_hash), replay.expected_trace_hash, "{stale} ({file})");
        assert!(outcome.check(cells[3]).is_violation(), "{stale} ({file} breaks {})", cells[3]);
        let world = &outcome.scenario.world;
        let sizes =
            [world.faults.faults.len().to_string(), world.workers.to_string(), world.rows.len().to_string()];
        assert_eq!(cells[5..8], sizes, "{stale} ({file}: faults, workers, rows)");
        let small = world.faults.faults.len() <= 3 && world.workers <= 3 && world.rows.len() <= 5;
        assert!(small, "{file} shrank to {sizes:?} (faults, workers, rows): over the target of 3, 3 and 5");
        listed.insert(file.to_owned());
    }
    // the failover section's files: each replays and still breaks what its row says
    let failover = text.split("## A replica and a failover").nth(1).expect(stale);
    for line in failover.lines().filter(|line| line.contains("`reports/shrunk/failover-")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let file = cells[7].trim_matches('`');
        let replay = ReplayFile::load(&root.join(file)).unwrap_or_else(|e| panic!("{stale}: {e}"));
        let outcome = run(&replay.scenario().unwrap(), replay.seed).unwrap();
        assert_eq!(format!("{:016x}", outcome.trace_hash), replay.expected_trace_hash, "{stale} ({file})");
        assert!(outcome.check(cells[2]).is_violation(), "{stale} ({file} breaks {})", cells[2]);
        let world = &outcome.scenario.world;
        let small = world.faults.faults.len() <= 3 && world.workers <= 3 && world.rows.len() <= 5;
        assert!(small && world.replica.is_some(), "{file}: a small replicated world");
        listed.insert(file.to_owned());
    }
    // the lagging lookups' shrunk failures are listed in their own section (tests/lagging_lookup.rs)
    let kept: std::collections::BTreeSet<String> = std::fs::read_dir(root.join("reports/shrunk"))
        .expect(stale)
        .map(|entry| format!("reports/shrunk/{}", entry.unwrap().file_name().to_string_lossy()))
        .filter(|file| !file.starts_with("reports/shrunk/lookup-lag-"))
        .collect();
    assert!(listed.len() >= 12, "{stale}");
    assert_eq!(listed, kept, "{stale}: every file listed, every listed file kept");
}

fn fencesim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().unwrap()
}

#[test]
fn explore_json_and_replay_from_the_command_line() {
    let out = out_dir("cli");
    let output = fencesim(&[
        "explore",
        "--mechanism",
        "ttl-only",
        "--seeds",
        "50",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in ["seeds_run", "violations", "first_failing_seed", "replay_file", "seeds_per_second"] {
        assert!(value.get(key).is_some(), "missing {key}");
    }
    let file = value["replay_file"].as_str().unwrap();
    let replayed = fencesim(&["replay", file, "--check-determinism"]);
    assert_eq!(replayed.status.code(), Some(1));
    let text = String::from_utf8_lossy(&replayed.stdout);
    assert!(text.contains(": matches the file"), "{text}");
    assert!(text.contains("VIOLATION "), "{text}");
    assert!(text.contains("determinism: two fresh runs gave the same"), "{text}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn explore_text_ends_with_the_replay_command() {
    let out = out_dir("text");
    let output =
        fencesim(&["explore", "--mechanism", "ttl-only", "--seeds", "20", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("coverage over"), "{text}");
    assert!(text.trim_end().lines().last().unwrap().starts_with("replay with: fencesim replay "), "{text}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn mechanisms_lists_every_mechanism_with_its_promise() {
    let output = fencesim(&["mechanisms"]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text.lines().count(), Mechanism::ALL.len());
    for mechanism in Mechanism::ALL {
        let name = mechanism.name();
        assert!(
            text.lines().any(|line| line.starts_with(name) && line.len() > name.len() + 20),
            "{mechanism}"
        );
    }
}

#[test]
fn bad_replay_files_and_bad_explore_arguments_exit_2_with_a_reason() {
    let dir = out_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let good = {
        let outcome = run(
            &scenario::build("random", 2, Mechanism::TtlOnly, GatewayMode::Idempotent, FaultMask::ALL)
                .unwrap(),
            2,
        )
        .unwrap();
        serde_json::to_string_pretty(&ReplayFile::from_outcome(&outcome)).unwrap()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("truncated", good[..good.len() / 2].to_owned(), "truncated or malformed JSON"),
        ("future", good.replace("\"format_version\": 1", "\"format_version\": 9"), "format version 9"),
        ("alien", "{\"hello\": 1}".to_owned(), "not a replay file"),
        (
            "mechanism",
            good.replace("\"mechanism\": \"ttl-only\"", "\"mechanism\": \"hope\""),
            "unknown mechanism 'hope'",
        ),
        (
            "old-key",
            good.replace("\"mechanism\": \"ttl-only\"", "\"strategy\": \"hope\""),
            "unknown mechanism 'hope'",
        ),
        ("ttl", good.replace("\"ttl_ms\": ", "\"ttl_ms\": -"), "parameters"),
        ("worker", good.replacen("\"worker\": \"", "\"worker\": \"Z", 1), "worker"),
    ];
    for (name, text, needle) in cases {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, text).unwrap();
        let output = fencesim(&["replay", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(needle) && err.contains(path.to_str().unwrap()), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let args: &[(&[&str], &str)] = &[
        (&["replay", "/nonexistent/file.json"], "cannot read"),
        (&["explore", "--mechanism", "fenced", "--jobs", "0"], "from 1 to 256"),
        (&["explore", "--mechanism", "fenced", "--seeds", "0"], "positive whole number of seeds"),
        (&["explore", "--mechanism", "fenced", "--without", "meteor"], "unknown fault kind 'meteor'"),
        (&["explore", "--mechanism", "luck"], "unknown mechanism 'luck'"),
        (&["matrix", "--seeds", "-4"], "positive whole number"),
    ];
    for (arguments, needle) in args {
        let output = fencesim(arguments);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}: {err}");
        assert!(err.contains(needle), "{arguments:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Ctrl-C (SIGINT) and what CI runners and schedulers send (SIGTERM) both stop the search
/// with the summary of what ran; a run cut short that found nothing exits 3, not 0.
#[test]
fn an_interrupted_explore_still_reports_what_it_ran() {
    for signal in ["-INT", "-TERM"] {
        let out = out_dir("interrupt");
        let child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(["explore", "--mechanism", "fenced-db-sequence", "--seeds", "100000000", "--jobs", "1"])
            .args(["--json", "--out", out.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        let killed = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(3), "{signal}: no violation, interrupted");
        let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(value["interrupted"], true, "{signal}");
        assert!(value["seeds_run"].as_u64().unwrap() > 0);
        assert!(value["seeds_run"].as_u64().unwrap() < 100_000_000);
    }
}

/// A replay file that cannot be written (a full disk, a path that is not a directory)
/// stops the search at once: the summary of what it found still prints, no temporary file
/// is left behind, and the exit code says the run did not do what was asked.
#[test]
fn a_write_failure_stops_explore_with_its_summary_and_leaves_nothing_behind() {
    let dir = out_dir("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, b"").unwrap();
    let out = blocker.join("failures");
    let output = fencesim(&[
        "explore",
        "--mechanism",
        "ttl-only",
        "--seeds",
        "5000",
        "--keep-going",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("stopped: cannot create"), "{stderr}");
    assert!(stdout.contains("explored ") && stdout.contains("first failing seed:"), "{stdout}");
    let ran: u64 = stdout.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(ran < 5000, "stopped at once, not after every seed: {ran}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("a-file")]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// --keep-going names each broken invariant once with its first seeds, and one replay
/// command, however many seeds failed; --json lists every file.
#[test]
fn keep_going_text_stays_short_and_json_lists_every_file() {
    let out = out_dir("keep-going");
    let args =
        ["explore", "--mechanism", "ttl-only", "--seeds", "60", "--keep-going", "--no-shrink", "--out"];
    let text = fencesim(&[&args[..], &[out.to_str().unwrap()]].concat());
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(1));
    assert_eq!(stdout.matches("replay with:").count(), 1, "{stdout}");
    assert!(stdout.contains("no-stale-confirm: broken in "), "{stdout}");
    let json = fencesim(&[&args[..], &[out.to_str().unwrap(), "--json"]].concat());
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let files = value["replay_files"].as_array().unwrap().len();
    assert!(files > 5, "{files}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), files);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn matrix_writes_the_guarantees_report_under_its_root() {
    let root = out_dir("matrix");
    let output = fencesim(&[
        "matrix",
        "--seeds",
        "3",
        "--sweep-seeds",
        "1",
        "--debate-seeds",
        "2",
        "--lag-seeds",
        "3",
        "--verdict-seeds",
        "5",
        "--jobs",
        "2",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(root.join(GUARANTEES_REPORT)).unwrap();
    assert!(text.contains("over the same 3 seeds"));
    assert!(
        text.contains("over seeds 1 to 5 of the random scenario"),
        "the verdicts run past the table's seeds"
    );
    assert!(text.contains("| fenced-db-sequence | idempotent |"));
    assert!(text.contains("## A longer TTL turns a race into an outage"));
    let chart = std::fs::read_to_string(root.join(SWEEP_CHART)).unwrap();
    assert_eq!(chart, sweep_chart(&text), "the sweep's chart, drawn from the report written beside it");
    assert_eq!(parse_debate(&text).len(), 8, "the debate's four settings, two mechanisms each");
    assert!(text.contains("over the same 2 seeds of the random scenario with an idempotent gateway"));
    let runs = Mechanism::ALL.len() * GatewayMode::ALL.len() * 3;
    assert!(text.contains(&format!("coverage over {runs} runs")), "every mechanism and mode, 3 seeds each");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn refunds_that_arrive_later_reach_the_store_at_their_time_and_are_settled_by_their_own_job() {
    use fencesim::sim::EventKind;
    let (seed, scenario) = (1..200)
        .map(|seed| {
            let built =
                scenario::build("random", seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::NONE);
            (seed, built.unwrap())
        })
        .find(|(_, scenario)| scenario.world.arrivals.len() >= 3)
        .expect("a seed with arrivals");
    let outcome = run(&scenario, seed).unwrap();
    let events = &outcome.record.events;
    assert!(outcome.record.settled, "seed {seed}");
    assert!(outcome.checks.iter().all(|check| !check.is_violation()), "seed {seed}: {:?}", outcome.checks);
    for arrival in &scenario.world.arrivals {
        let came = events.iter().position(|event| {
            matches!(event.kind, EventKind::RefundsArrived { job, refunds, .. }
                if job == arrival.job.id && refunds as usize == arrival.rows.len())
        });
        let came = came.unwrap_or_else(|| panic!("seed {seed}: {} never arrived", arrival.job.id));
        assert_eq!(events[came].at_ms, arrival.at_ms, "it arrives at its time");
        let touched_before = events[..came].iter().any(
            |event| matches!(&event.kind, EventKind::Write { refund, .. } if arrival.rows.contains(refund)),
        );
        assert!(!touched_before, "seed {seed}: a row of {} was written before it arrived", arrival.job.id);
        let delivered = events[came..]
            .iter()
            .any(|event| matches!(event.kind, EventKind::JobDelivered { job, .. } if job == arrival.job.id));
        assert!(delivered, "seed {seed}: {} was queued when its refunds arrived", arrival.job.id);
    }
    assert!(outcome.record.final_rows.iter().all(|row| row.state == fencesim::model::RefundState::Sent));
    assert_eq!(outcome.record.final_rows.len(), scenario.world.rows.len(), "every row reached the store");
}
