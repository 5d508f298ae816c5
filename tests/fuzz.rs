//! Fuzzing the two doors hostile input comes in by: replay files, mutated from a real one,
//! and the command line, built from its own words and hostile values. Neither may panic,
//! hang or grow without bound: a bad file or argument gets exit code 2 and a reason.
//! The cases are the same every run (a fixed seed); `FUZZ_CASES` runs more of them.

use fencesim::files::replay_file::ReplayFile;
use fencesim::runner::run;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn runner(default_cases: u32) -> TestRunner {
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default_cases);
    TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(0xF022_5EED),
        failure_persistence: None,
        ..Config::default()
    })
}

/// One edit of a file's text, at a position given as a fraction of its length.
#[derive(Clone, Debug)]
enum Edit {
    Truncate(f64),
    Replace(f64, char),
    Delete(f64, usize),
    Duplicate(f64, usize),
    /// The next number in the text replaced by a hostile one.
    Number(f64, &'static str),
}

const NUMBERS: [&str; 9] = [
    "0",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "4294967296",
    "86400001",
    "1.5",
    "99999999",
];

fn edit() -> impl Strategy<Value = Edit> {
    let at = 0.0..1.0f64;
    prop_oneof![
        at.clone().prop_map(Edit::Truncate),
        (at.clone(), prop::sample::select(vec!['"', '{', '}', '[', ']', ',', ':', '0', 'x', ' ', '-']))
            .prop_map(|(at, c)| Edit::Replace(at, c)),
        (at.clone(), 1..40usize).prop_map(|(at, n)| Edit::Delete(at, n)),
        (at.clone(), 1..200usize).prop_map(|(at, n)| Edit::Duplicate(at, n)),
        (at, prop::sample::select(NUMBERS.to_vec())).prop_map(|(at, n)| Edit::Number(at, n)),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let place = |at: f64, len: usize| ((at * len as f64) as usize).min(len.saturating_sub(1));
    match *edit {
        Edit::Truncate(at) => chars.truncate(place(at, chars.len())),
        Edit::Replace(at, c) => {
            let i = place(at, chars.len());
            chars[i] = c;
        }
        Edit::Delete(at, n) => {
            let i = place(at, chars.len());
            chars.drain(i..(i + n).min(chars.len()));
        }
        Edit::Duplicate(at, n) => {
            let i = place(at, chars.len());
            let copy: Vec<char> = chars[i..(i + n).min(chars.len())].to_vec();
            chars.splice(i..i, copy);
        }
        Edit::Number(at, number) => {
            let start = (place(at, chars.len())..chars.len()).find(|&i| chars[i].is_ascii_digit());
            if let Some(start) = start {
                let end = (start..chars.len()).find(|&i| !chars[i].is_ascii_digit()).unwrap_or(chars.len());
                chars.splice(start..end, number.chars());
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn a_mutated_replay_file_is_refused_with_a_reason_or_runs_within_its_bounds() {
    let original = include_str!("data/many-fields.json");
    let (refused, ran) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    runner(300)
        .run(&prop::collection::vec(edit(), 1..4), |edits| {
            let text = edits.iter().fold(original.to_owned(), |text, edit| apply(&text, edit));
            match ReplayFile::parse(&text) {
                Err(reason) => {
                    prop_assert!(!reason.is_empty());
                    refused.set(refused.get() + 1);
                }
                Ok(file) => {
                    let clock = Instant::now();
                    // a file that parses runs, or is refused by the run's own bounds
                    let _ = run(&file.scenario().unwrap(), file.seed);
                    prop_assert!(clock.elapsed() < Duration::from_secs(60), "{edits:?}");
                    ran.set(ran.get() + 1);
                }
            }
            Ok(())
        })
        .unwrap();
    let (refused, ran) = (refused.get(), ran.get());
    assert!(refused > 0 && ran > 0, "refused {refused}, ran {ran}: the edits reach both ends");
}

/// Runs the binary in `dir`; its exit status, or none if it ran past a minute (killed).
fn run_for_a_minute(args: &[&str], dir: &std::path::Path) -> Option<std::process::ExitStatus> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let clock = Instant::now();
    while clock.elapsed() < Duration::from_secs(60) {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The command line's words and hostile values: every combination ends with a code of its
/// own (0, 1, 2 or 3), never a panic (101), within a minute.
#[test]
fn the_command_line_never_panics_or_hangs_on_hostile_arguments() {
    let words = prop::sample::select(vec![
        "run",
        "replay",
        "shrink",
        "explore",
        "mechanisms",
        "--mechanism",
        "fenced",
        "ttl-only",
        "redlock",
        "nonsense",
        "--scenario",
        "random",
        "worked-example",
        "--gateway",
        "non-idempotent",
        "--seed",
        "--seeds",
        "--from",
        "--ttl-ms",
        "--jobs",
        "--without",
        "crash,meteor",
        "--json",
        "--keep-going",
        "--no-shrink",
        "--mutant",
        "release-with-del",
        "--only",
        "--invariant",
        "-1",
        "0",
        "1",
        "2",
        "18446744073709551616",
        "",
        "--",
        "x",
        "/dev/null",
        "many-fields.json",
        "--out",
        "--trace",
        "--save-replay",
    ]);
    // every file a command writes lands in a directory of the test's own
    let dir = std::env::temp_dir().join(format!("fencesim-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("many-fields.json"), include_str!("data/many-fields.json")).unwrap();
    runner(60)
        .run(&prop::collection::vec(words, 1..8), |args| {
            let status = run_for_a_minute(&args, &dir);
            prop_assert!(status.is_some(), "{args:?} ran past a minute");
            let status = status.unwrap();
            prop_assert!(matches!(status.code(), Some(0..=3)), "{args:?}: {status:?}");
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
