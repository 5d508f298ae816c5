//! Mechanisms from files, run (each built-in read from its file is held to the Rust one's
//! verdicts and traces over seeds 1 to 2,000 in `tests/verdicts.rs`, beside the runs it is
//! held to): an acquisition script that does what `SET NX PX` does; six files with
//! bugs a team could write are caught within 2,000 seeds by a breach the built-in they were
//! copied from does not have on the same seed, and shrink to at most 3 faults; a replay
//! file of such a run replays in a process that never saw the mechanism file.

mod support;

use fencesim::files::replay_file::ReplayFile;
use fencesim::mechanism_file::builtin::text_of;
use fencesim::mechanism_file::define;
use fencesim::model::Mechanism;
use fencesim::runner::{run, Outcome};
use fencesim::scenario::{self, FaultMask, Scenario};
use fencesim::search::shrink::shrink_scenario;
use fencesim::sim::{EventKind, GatewayMode};
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The seeds the equivalence and the search run over.
const SEEDS: u64 = 2_000;

/// A built-in mechanism's file, under its name with `prefix` before it.
fn renamed_text(mechanism: Mechanism, prefix: &str) -> String {
    let text = text_of(mechanism);
    let named = format!("name = \"{}\"", mechanism.name());
    assert!(text.contains(&named), "{mechanism}");
    text.replacen(&named, &format!("name = \"{prefix}{}\"", mechanism.name()), 1)
}

/// A seed of the random scenario, every fault kind allowed: its broken invariants and its
/// trace hash.
fn verdict(mechanism: Mechanism, gateway: GatewayMode, seed: u64) -> (Vec<&'static str>, u64) {
    let scenario = scenario::build("random", seed, mechanism, gateway, FaultMask::ALL).unwrap();
    let outcome = run(&scenario, seed).unwrap();
    let broken =
        outcome.checks.iter().filter(|check| check.is_violation()).map(|check| check.invariant).collect();
    (broken, outcome.trace_hash)
}

/// A built-in's file that takes its lease with an acquisition script doing what `SET NX PX`
/// does: seeds of the single lease and of the majority give the built-in's verdicts and
/// traces, byte for byte, as the script's grants and refusals are the command's.
#[test]
fn an_acquisition_script_that_does_what_set_nx_px_does_gives_the_built_in_s_traces() {
    let acquire = "acquire = \"return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])\"\n";
    for (mechanism, seeds) in [(Mechanism::Fenced, 300), (Mechanism::RedlockFenced, 100)] {
        let text = renamed_text(mechanism, "acquiring-");
        let text = text.replacen("[scripts]\n", &format!("[scripts]\n{acquire}"), 1);
        let file = define(&text, "an acquiring file").unwrap();
        assert!(file.spec().scripts.acquire.is_some(), "{mechanism}: the file's acquisition is read");
        let differ: Vec<u64> = (1..=seeds)
            .filter(|seed| {
                let gateway = GatewayMode::ALL[(seed % 2) as usize];
                verdict(mechanism, gateway, *seed) != verdict(file, gateway, *seed)
            })
            .collect();
        assert!(differ.is_empty(), "{mechanism}: seeds where the acquiring file differs: {differ:?}");
    }
}

/// A team's file with one bug, the built-in it was copied from, the gateway it is searched
/// with and the invariant its bug breaks.
struct Bug {
    file: &'static str,
    copied_from: Mechanism,
    breaks: &'static str,
}

const BUGS: [Bug; 6] = [
    Bug { file: "claim-fence-at-most", copied_from: Mechanism::Fenced, breaks: "token-order" },
    Bug {
        file: "release-without-compare",
        copied_from: Mechanism::FencedDbSequence,
        breaks: "lease-integrity",
    },
    Bug { file: "renewal-recreates", copied_from: Mechanism::TtlRenewal, breaks: "lease-integrity" },
    Bug {
        file: "confirm-fence-at-least",
        copied_from: Mechanism::FencedDbSequence,
        breaks: "no-stale-confirm",
    },
    Bug { file: "claim-accepts-sent", copied_from: Mechanism::FencedDbSequence, breaks: "state-machine" },
    Bug { file: "acquire-without-nx", copied_from: Mechanism::FencedDbSequence, breaks: "lease-integrity" },
];

fn bug_path(bug: &Bug) -> String {
    format!("tests/data/mechanism_bugs/{}.toml", bug.file)
}

/// Whether `scenario` breaks the bug's invariant under the file's mechanism and keeps it
/// under the built-in it was copied from: a breach that follows from the bug.
fn the_bug_breaks(bug: &Bug, buggy: Mechanism, scenario: &Scenario, seed: u64) -> Result<bool, String> {
    let gateway = scenario.world.gateway_mode;
    let with = |mechanism| scenario.clone().with_mechanism(mechanism, gateway);
    let broken = |outcome: Outcome| outcome.check(bug.breaks).is_violation();
    Ok(broken(run(&with(buggy), seed)?) && !broken(run(&with(bug.copied_from), seed)?))
}

#[test]
fn six_bugs_a_team_could_write_are_caught_within_2000_seeds_and_shrink_to_3_faults() {
    for bug in &BUGS {
        let text = std::fs::read_to_string(root().join(bug_path(bug))).unwrap();
        let buggy = define(&text, bug.file).unwrap();
        let gateway = GatewayMode::Idempotent;
        let caught = (1..=SEEDS).find_map(|seed| {
            let scenario = scenario::build("random", seed, buggy, gateway, FaultMask::ALL).unwrap();
            the_bug_breaks(bug, buggy, &scenario, seed).unwrap().then_some((seed, scenario))
        });
        let (seed, found) = caught.unwrap_or_else(|| panic!("{}: not caught in {SEEDS} seeds", bug.file));
        let shrunk =
            shrink_scenario(&found, seed, |trial: &Scenario| the_bug_breaks(bug, buggy, trial, seed), run)
                .unwrap();
        let faults = shrunk.world.faults.faults.len();
        assert!(faults <= 3, "{}: caught at seed {seed}, shrunk to {faults} faults", bug.file);
        assert!(the_bug_breaks(bug, buggy, &shrunk, seed).unwrap(), "{}", bug.file);
        eprintln!("{}: caught at seed {seed} ({}), shrunk to {faults} fault(s)", bug.file, bug.breaks);
    }
}

/// An acquisition script that sets the key without NX is told as what it did on every seed
/// of the first 300 that breaks lease-integrity: it took the lease from its live holder,
/// whose grant (or theft) the chain begins with; also when the taker held the key before,
/// which an older chain told as a stale holder's SET.
#[test]
fn an_acquisition_without_nx_is_told_as_taking_the_lease_from_its_live_holder() {
    let bug = BUGS.iter().find(|bug| bug.file == "acquire-without-nx").unwrap();
    let buggy = define(&std::fs::read_to_string(root().join(bug_path(bug))).unwrap(), bug.file).unwrap();
    let (mut told, mut again) = (0, 0);
    for seed in 1..=300 {
        let scenario =
            scenario::build("random", seed, buggy, GatewayMode::Idempotent, FaultMask::ALL).unwrap();
        let outcome = run(&scenario, seed).unwrap();
        let check = outcome.check("lease-integrity");
        if !check.is_violation() {
            continue;
        }
        let chain = outcome.chain(check).unwrap();
        let what = format!("seed {seed}: {}", chain.summary);
        assert!(chain.summary.contains("took the lease from its holder"), "{what}");
        let events = &outcome.record.events;
        let (first, last) =
            (&events[chain.steps[0].event].kind, &events[chain.steps.last().unwrap().event].kind);
        let EventKind::LeaseSet { worker: taker, key, .. } = last else { panic!("{what}: ends at a SET") };
        let holder = match first {
            EventKind::LeaseGranted { worker, .. } | EventKind::LeaseSet { worker, .. } => *worker,
            other => panic!("{what}: begins at {other:?}"),
        };
        let restarted = chain.summary.contains("before its restart");
        assert!(holder != *taker || restarted, "{what}");
        let set_at = events[chain.steps.last().unwrap().event].at_ms;
        let held_before = outcome
            .record
            .epochs
            .iter()
            .any(|epoch| epoch.worker == *taker && epoch.key == *key && epoch.granted_at_ms < set_at);
        told += 1;
        again += usize::from(held_before);
    }
    assert!(told > 0 && again > 0, "{told} thefts told, {again} by a worker that held the key before");
    eprintln!("{told} thefts told, {again} by a worker that held the key before");
}

fn fencesim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).current_dir(root()).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code().expect("an exit code, not a signal"), text(&out.stdout), text(&out.stderr))
}

/// `explore --mechanism-file` finds and shrinks the bug; the shrunk replay file carries the
/// mechanism file's text and replays, in a new process, without the original.
#[test]
fn a_run_from_a_file_replays_from_its_replay_file_alone() {
    let dir = std::env::temp_dir().join(format!("fencesim-mechanism-runs-{}", std::process::id()));
    let bug = bug_path(&BUGS[1]);
    let out = dir.to_str().unwrap();
    let (code, stdout, err) =
        fencesim(&["explore", "--mechanism-file", &bug, "--seeds", "2000", "--out", out, "--jobs", "2"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let shrunk = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().contains("shrunk"))
        .unwrap_or_else(|| panic!("a shrunk replay file in {out}: {stdout}"));
    let file = ReplayFile::load(&shrunk).unwrap();
    assert_eq!(file.mechanism.name(), "team-release-without-compare");
    let text = std::fs::read_to_string(root().join(&bug)).unwrap();
    assert_eq!(file.mechanism_file.as_deref(), Some(text.as_str()), "the file's text, whole");
    let moved = dir.join("moved.json");
    std::fs::copy(&shrunk, &moved).unwrap();
    let (code, stdout, err) = fencesim(&["replay", moved.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(stdout.contains("mechanism team-release-without-compare"), "{stdout}");
    assert!(stdout.contains("lease-integrity"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every command that takes a mechanism takes a file, and refuses a bad one with exit 2.
#[test]
fn each_command_takes_a_mechanism_file_and_refuses_a_bad_one_with_exit_2() {
    let bug = bug_path(&BUGS[0]);
    let (code, stdout, err) = fencesim(&["run", "--mechanism-file", &bug, "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    assert!(stdout.contains("\"mechanism\":\"team-claim-fence-at-most\""), "{stdout}");
    let page = std::env::temp_dir().join(format!("fencesim-file-page-{}.html", std::process::id()));
    let (code, _, err) = fencesim(&[
        "run",
        "--mechanism-file",
        &bug,
        "--scenario",
        "random",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{err}");
    assert!(support::page::page_data(&page).contains("\"mechanism\":\"team-claim-fence-at-most\""));
    std::fs::remove_file(&page).unwrap();
    let (code, stdout, err) =
        fencesim(&["matrix", "--mechanism-file", &bug, "--seeds", "20", "--out", "target"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("team-claim-fence-at-most ("), "{stdout}");
    // a changed copy under a built-in's name is refused by every command, as by the check
    let copy = std::env::temp_dir().join(format!("fencesim-changed-fenced-{}.toml", std::process::id()));
    let changed = std::fs::read_to_string(root().join("mechanisms/fenced.toml")).unwrap().replacen(
        "AND fence = :token",
        "",
        1,
    );
    std::fs::write(&copy, changed).unwrap();
    let copy = copy.to_str().unwrap().to_owned();
    for args in [
        vec!["run", "--mechanism-file", "no-such.toml"],
        vec!["explore", "--mechanism-file", &copy],
        vec!["run", "--mechanism", "fenced", "--mechanism-file", &bug],
        vec!["live", "--mechanism-file", "README.md"],
        vec!["matrix", "--mechanism-file", "Cargo.toml"],
    ] {
        let (code, _, err) = fencesim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let (_, _, err) = fencesim(&["explore", "--mechanism-file", &copy]);
    assert!(
        err.contains("name: 'fenced' is a built-in mechanism's name, and this file is not fenced.toml"),
        "{err}"
    );
    std::fs::remove_file(&copy).unwrap();
    // the built-in's own file is the built-in: the check passes it, and so does every command
    let (code, out, err) =
        fencesim(&["explore", "--mechanism-file", "mechanisms/fenced.toml", "--seeds", "5"]);
    assert!(code == 0 || code == 1, "{err}");
    assert!(out.contains("under fenced ("), "{out}");
}

/// The guide to checking one's own lock, done as a reader does it: the copy, the edit its
/// TOML block shows (each line replaces the line of the same key), then its commands, in a
/// directory of their own; every output line it quotes must be in what they print.
#[test]
fn the_own_lock_guide_s_steps_give_the_output_it_quotes() {
    let guide = std::fs::read_to_string(root().join("docs/own-lock.md")).unwrap();
    let dir = std::env::temp_dir().join(format!("fencesim-own-lock-guide-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("mechanisms")).unwrap();
    for entry in std::fs::read_dir(root().join("mechanisms")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join("mechanisms").join(path.file_name().unwrap())).unwrap();
    }
    let (mut printed, mut ran, mut quoted) = (String::new(), 0, 0);
    for block in guide.split("```").skip(1).step_by(2) {
        let (kind, body) = block.split_once('\n').unwrap();
        for line in body.lines().filter(|line| !line.trim().is_empty()) {
            match kind {
                "" => {
                    printed.push_str(&guide_step(&dir, line));
                    ran += 1;
                }
                "toml" => edit(&dir.join("our-lock.toml"), line),
                "text" => {
                    assert!(
                        printed.contains(line),
                        "the guide quotes a line no command printed: {line}\n{printed}"
                    );
                    quoted += 1;
                }
                _ => panic!("a block of a kind the test does not know: {kind}"),
            }
        }
    }
    assert_eq!(ran, 4, "the copy and three commands");
    assert!(quoted >= 4, "the guide quotes what the commands print");
    assert!(dir.join("our-lock.html").exists(), "the page");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One line of the guide's commands, run in `dir`: what it printed.
fn guide_step(dir: &Path, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        ["cp", from, to] => {
            std::fs::copy(dir.join(from), dir.join(to)).unwrap();
            String::new()
        }
        ["fencesim", ref args @ ..] => {
            let out =
                Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).current_dir(dir).output().unwrap();
            let code = out.status.code().expect("an exit code");
            let expected = if args[0] == "mechanism" { 0 } else { 1 };
            let said =
                String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert_eq!(code, expected, "{line}: {said}");
            said
        }
        _ => panic!("a command the test does not know how to run: {line}"),
    }
}

/// Replaces the line of `line`'s key in the file with `line`.
fn edit(file: &Path, line: &str) {
    let key = line.split_once(" = ").expect("a `key = value` line").0;
    let text = std::fs::read_to_string(file).unwrap();
    let prefix = format!("{key} = ");
    assert_eq!(text.lines().filter(|l| l.starts_with(&prefix)).count(), 1, "one line of {key}");
    let edited: Vec<&str> = text.lines().map(|l| if l.starts_with(&prefix) { line } else { l }).collect();
    std::fs::write(file, edited.join("\n") + "\n").unwrap();
}

/// A script that errors when it runs is told as the error reply Redis gives, in Redis's
/// words, and the worker takes it as a failed command: the run goes on and is judged.
#[test]
fn a_script_that_errors_at_run_time_is_told_as_redis_s_error_reply() {
    let text =
        text_of(Mechanism::TtlRenewal).replacen("name = \"ttl-renewal\"", "name = \"renew-errors\"", 1);
    let renew = text.lines().find(|line| line.starts_with("renew = ")).unwrap();
    let text = text.replacen(renew, "renew = \"return redis.call('pexpire', KEYS[1], ARGV[3])\"", 1);
    let path = std::env::temp_dir().join(format!("fencesim-renew-errors-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let (code, stdout, err) = fencesim(&["run", "--mechanism-file", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert!(code == 0 || code == 1, "{err}");
    let said =
        "A's renew script on lock:settle:m_4471 fails: Redis replies ERR Lua redis lib command arguments \
                must be strings or integers script: ";
    assert!(stdout.contains(said), "{stdout}");
    assert!(stdout.contains("of 1200 refunds sent"), "the run went on to its end: {stdout}");
}

/// A statement the database refuses while the run goes on (a confirm that writes a state
/// the schema's CHECK does not allow) is told in the database's own words, in the story and
/// in the verdict it leads to: the batch given up, and progress broken, name it.
#[test]
fn a_statement_the_database_refuses_is_told_in_its_own_words() {
    let text = text_of(Mechanism::Fenced)
        .replacen("UPDATE refund SET state = 'sent'", "UPDATE refund SET state = 'done'", 1)
        .replace("name = \"fenced\"", "name = \"test-state-done\"");
    let mechanism = define(&text, "test-state-done").unwrap();
    let scenario =
        scenario::build("worked-example", 1, mechanism, GatewayMode::Idempotent, FaultMask::ALL).unwrap();
    let outcome = run(&scenario, 1).unwrap();
    let said =
        "SQLite says: CHECK constraint failed: state = 'pending' OR state = 'sending' OR state = 'sent'";
    let refused = outcome.record.events.iter().filter(|e| {
        matches!(&e.kind, EventKind::StatementFailed { statement, message, .. }
            if statement == "statements.confirm" && message == said)
    });
    assert!(refused.count() >= 2, "every confirm is refused and recorded");
    let story = fencesim::tell::story::render_story(&outcome, &fencesim::tell::story::story(&outcome), 200);
    assert!(story.contains(&format!("store    refuses A's statements.confirm: {said}")), "{story}");
    let progress = outcome.check("progress");
    assert!(progress.is_violation(), "{story}");
    let detail = &progress.breaches[0].detail;
    assert!(detail.contains(&format!("the last B's statements.confirm: {said}")), "{detail}");
}
