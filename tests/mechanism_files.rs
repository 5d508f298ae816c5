//! Mechanism files: the built-ins written out under `mechanisms/` are what
//! `fencesim mechanism export` writes and describe exactly the registry's mechanisms; a
//! file with a mistake is refused by `fencesim mechanism check` with exit 2, naming the
//! file, the field and SQLite's or Lua's own words, and without a panic.

use fencesim::mechanism_file::builtin::{file_name, text_of, DIRECTORY};
use fencesim::mechanism_file::check;
use fencesim::model::Mechanism;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fencesim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).current_dir(root()).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code().expect("an exit code, not a signal"), text(&out.stdout), text(&out.stderr))
}

#[test]
fn the_built_in_files_are_what_export_writes_and_nothing_else() {
    let stale = "is stale: write the files again with `cargo run --release -- mechanism export`";
    for mechanism in Mechanism::ALL {
        let path = root().join(DIRECTORY).join(file_name(mechanism));
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(committed == text_of(mechanism), "{} {stale}", path.display());
    }
    let mut names: Vec<String> = std::fs::read_dir(root().join(DIRECTORY))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = Mechanism::ALL.iter().map(|m| file_name(*m)).collect();
    expected.sort();
    assert_eq!(names, expected, "{DIRECTORY}/ holds one file per built-in mechanism");
}

/// Read back, each built-in file is the registry's mechanism, field for field.
#[test]
fn each_built_in_file_checks_clean_and_reads_back_as_the_registry_s_mechanism() {
    for mechanism in Mechanism::ALL {
        let file = check(&text_of(mechanism)).unwrap_or_else(|problems| panic!("{mechanism}: {problems:?}"));
        assert_eq!(&file.spec(), mechanism.spec(), "{mechanism}");
    }
    let path = format!("{DIRECTORY}/fenced.toml");
    let (code, out, err) = fencesim(&["mechanism", "check", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("a valid mechanism file: `fenced`, a token from INCR fence:settle:{merchant}"),
        "{out}"
    );
}

/// The example workers' own steps (`examples/workers/four-steps*.toml`) are their
/// built-in twins with the lease left unread after the token: each loads with that one
/// warning, and reads back as its twin but for it.
#[test]
fn the_example_workers_own_steps_load_with_the_warning_of_their_gap() {
    for (file, twin) in
        [("four-steps", Mechanism::Fenced), ("four-steps-db-sequence", Mechanism::FencedDbSequence)]
    {
        let path = format!("examples/workers/{file}.toml");
        let (code, out, err) = fencesim(&["mechanism", "check", &path]);
        assert_eq!(code, 0, "{err}");
        let warnings: Vec<&str> = out.lines().filter(|line| line.contains("warning:")).collect();
        assert_eq!(warnings.len(), 1, "{out}");
        assert!(warnings[0].contains("lease.check-after-token"), "{out}");
        let text = std::fs::read_to_string(root().join(&path)).unwrap();
        let spec = check(&text).unwrap_or_else(|problems| panic!("{file}: {problems:?}")).spec();
        assert!(!spec.check_after_token, "{file}");
        let (twin, named) =
            (twin.spec(), |spec: fencesim::model::mechanism::Spec| fencesim::model::mechanism::Spec {
                name: "",
                promise: "",
                without_faults: None,
                safety: fencesim::model::Safety::Unsafe,
                ..spec
            });
        let as_twin = fencesim::model::mechanism::Spec { check_after_token: true, ..spec };
        assert_eq!(named(as_twin), named(*twin), "{file}: its twin's but for the check");
    }
}

/// The fenced built-in with one line changed.
fn broken(name: &str, from: &str, to: &str) -> PathBuf {
    let text = text_of(Mechanism::Fenced);
    assert!(text.contains(from), "{from}");
    let dir = std::env::temp_dir().join(format!("fencesim-mechanism-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

/// Each mistake: the file, the line changed from, to, and what the check says.
const MISTAKES: [(&str, &str, &str, &str); 10] = [
    (
        "sql.toml",
        "UPDATE refund SET state = 'sent'",
        "UPDAT refund SET state = 'sent'",
        "statements.confirm: SQLite says: near \"UPDAT\": syntax error",
    ),
    ("token.toml", "fence < :token", "fence <= :tokn", "statements.claim: the parameter :tokn is not one"),
    (
        "builtin-name.toml",
        "AND fence = :token",
        "",
        "name: 'fenced' is a built-in mechanism's name, and this file is not fenced.toml",
    ),
    (
        "columns.toml",
        "AND fence < :token\"\"\"",
        "AND fence < :token\n     RETURNING fence, state\"\"\"",
        "statements.claim: must return state, fence, in that order (or nothing); it returns fence, state",
    ),
    (
        "lua.toml",
        "release = \"if",
        "release = \"iff",
        "scripts.release: Lua says: user_script:1: '=' expected near 'redis'",
    ),
    (
        "acquire.toml",
        "[scripts]\n",
        "[scripts]\nacquire = \"return redis.call('set', KEYS[1], ARGV[1], 'NX' 'PX', ARGV[2])\"\n",
        "scripts.acquire: Lua says: user_script:1: ')' expected near ''PX''",
    ),
    (
        "field.toml",
        "kind = \"single\"",
        "kind = \"single\"\ncolour = \"red\"",
        "line 16: unknown field `colour`",
    ),
    (
        "absent.toml",
        "key = \"fence:settle:{merchant}\"\n",
        "",
        "token.key: redis-incr needs the counter's key",
    ),
    (
        "command.toml",
        "return redis.call('del', KEYS[1]) else",
        "return redis.call('unlink', KEYS[1]) else",
        "scripts.release: sends UNLINK, which the simulated Redis does not run",
    ),
    (
        "kind.toml",
        "source = \"redis-incr\"",
        "source = \"zookeeper\"",
        "line 10: unknown variant `zookeeper`",
    ),
];

#[test]
fn a_file_with_a_mistake_is_refused_naming_the_file_the_field_and_the_cause() {
    let cases = MISTAKES;
    for (name, from, to, said) in cases {
        let path = broken(name, from, to);
        let (code, _, err) = fencesim(&["mechanism", "check", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(&format!("{}: {said}", path.display())), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    std::fs::remove_dir_all(broken("x.toml", "", "").parent().unwrap()).unwrap();
    let (code, _, err) = fencesim(&["mechanism", "check", "no-such-file.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such-file.toml: cannot read it"), "{err}");
}

/// The guide's first code block, run as a person would: the copy, then the check.
#[test]
fn the_guide_s_commands_copy_a_built_in_and_check_it() {
    let guide = std::fs::read_to_string(root().join("docs/mechanism-files.md")).unwrap();
    let block = guide.split("```").nth(1).expect("a code block");
    let dir = std::env::temp_dir().join(format!("fencesim-mechanism-guide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ran = 0;
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["cp", from, to] => {
                std::fs::copy(root().join(from), dir.join(to)).unwrap();
            }
            ["fencesim", ref args @ ..] => {
                let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
                    .args(args)
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
            }
            _ => panic!("a command the test does not know how to run: {line}"),
        }
        ran += 1;
    }
    assert_eq!(ran, 2, "the copy and the check");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A copy of `mechanism`'s file with `from` changed to `to`, named `name`, written into
/// `dir`: it loads with the warning `warned`, and a search of 2,000 seeds fails with
/// `caught` in its answer.
fn loads_warned_and_caught(
    dir: &Path,
    name: &str,
    mechanism: Mechanism,
    (from, to): (&str, &str),
    warned: &str,
    caught: &str,
) {
    let text = text_of(mechanism);
    assert!(text.contains(from), "{name}: {from}");
    let named = format!("name = \"{}\"", mechanism.name());
    let changed = text.replacen(from, to, 1).replace(&named, &format!("name = \"{name}\""));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, changed).unwrap();
    let file = path.to_str().unwrap();
    let (code, out, err) = fencesim(&["mechanism", "check", file]);
    assert_eq!(code, 0, "{name} loads: {err}");
    assert!(out.contains(&format!("{file}: warning: {warned}")), "{name}: {out}");
    let failures = dir.join(format!("{name}-failures"));
    let args = ["explore", "--mechanism-file", file, "--seeds", "2000", "--out", failures.to_str().unwrap()];
    let (code, out, err) = fencesim(&args);
    assert_eq!(code, 1, "{name}: caught within 2,000 seeds: {out}{err}");
    assert!(out.contains(caught), "{name}: {out}");
    eprintln!("{name}: {}", out.lines().find(|l| l.contains("broken in")).unwrap_or(""));
}

/// A team's bug in its plainest form loads, with a warning in the protocol's words, and a
/// search finds what it lets through: a confirm without `:token`, a confirm by id only, a
/// claim that never stores the token, and tokens read as `MAX(fence) + 1` by a `SELECT`.
/// Each is a copy of `fenced-db-sequence` with one statement changed.
#[test]
fn the_plainest_form_of_a_teams_bug_loads_with_a_warning_and_is_caught() {
    let confirm =
        "UPDATE refund SET state = 'sent'\n     WHERE id = :id AND state = 'sending' AND fence = :token";
    let claim = "UPDATE refund SET state = 'sending', fence = :token\n     WHERE id = :id AND state IN ('pending', 'sending') AND fence < :token";
    let sequence = "INSERT INTO fence_seq (merchant, value) VALUES (:merchant, 1)\n     ON CONFLICT (merchant) DO UPDATE SET value = fence_seq.value + 1\n     RETURNING value";
    let cases = [
        ("confirm-without-token", confirm, "UPDATE refund SET state = 'sent'\n     WHERE id = :id AND state = 'sending'", "statements.confirm: the confirm does not compare"),
        ("confirm-by-id", confirm, "UPDATE refund SET state = 'sent' WHERE id = :id", "statements.confirm: the confirm does not compare"),
        ("claim-stores-no-token", claim, "UPDATE refund SET state = 'sending'\n     WHERE id = :id AND state IN ('pending', 'sending') AND fence < :token", "statements.claim: the claim does not store :token"),
        ("max-fence-plus-one", sequence, "SELECT COALESCE(MAX(fence), 0) + 1 AS value FROM refund WHERE merchant = :merchant", "statements.sequence: the sequence only reads"),
    ];
    let dir = std::env::temp_dir().join(format!("fencesim-plain-bugs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, from, to, warned) in cases {
        loads_warned_and_caught(
            &dir,
            name,
            Mechanism::FencedDbSequence,
            (from, to),
            warned,
            "first failing seed",
        );
    }
    let (_, out, _) = fencesim(&["mechanism", "check", "mechanisms/fenced-db-sequence.toml"]);
    assert!(!out.contains("warning"), "the built-in warns of nothing: {out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The lease and the counter watched as closely as the rows: a renewal that is a bare
/// `PEXPIRE` (it extends whoever holds the key), an acquisition that ignores `SET NX`'s
/// answer, and a token counter per worker load with a warning, and a search catches each
/// within 2,000 seeds (the lease bugs by lease-integrity).
#[test]
fn a_lease_or_a_counter_that_does_not_ask_whose_it_is_loads_with_a_warning_and_is_caught() {
    let renew = "renew = \"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end\"";
    let cases = [
        (
            "renewal-by-bare-pexpire",
            Mechanism::FencedRenewal,
            renew.to_owned(),
            "renew = \"return redis.call('pexpire', KEYS[1], ARGV[2])\"".to_owned(),
            "scripts.renew: the renewal does not compare the key's value with the holder's",
            "lease-integrity: broken in",
        ),
        (
            "acquire-ignores-reply",
            Mechanism::FencedDbSequence,
            "[scripts]\n".to_owned(),
            "[scripts]\nacquire = \"redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) return 1\"\n"
                .to_owned(),
            "scripts.acquire: the acquisition's answer does not come from SET NX's",
            "lease-integrity: broken in",
        ),
        (
            "counter-per-worker",
            Mechanism::Fenced,
            "key = \"fence:settle:{merchant}\"".to_owned(),
            "key = \"fence:settle:{merchant}:{worker}\"".to_owned(),
            "token.key: the counter's key names the worker",
            "token-order: broken in",
        ),
        (
            "lease-per-worker",
            Mechanism::FencedDbSequence,
            "key = \"lock:settle:{merchant}\"".to_owned(),
            "key = \"lock:settle:{merchant}:{worker}\"".to_owned(),
            "lease.key: the lease's key names the worker",
            "monotonic-fences: broken in",
        ),
        (
            "token-after-lease-unread",
            Mechanism::FencedDbSequence,
            "kind = \"single\"".to_owned(),
            "kind = \"single\"\ncheck-after-token = false".to_owned(),
            "lease.check-after-token: the worker does not read its lease again once its token is taken",
            "monotonic-fences: broken in",
        ),
    ];
    let dir = std::env::temp_dir().join(format!("fencesim-lease-bugs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, mechanism, from, to, warned, caught) in cases {
        loads_warned_and_caught(&dir, name, mechanism, (&from, &to), warned, caught);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A lease key of another shape runs as the built-in's does: the same verdicts over 200
/// random worlds with every fault kind, and an early expiry the plan aims at a merchant's
/// lease reaches the file's key.
#[test]
fn a_lease_key_of_another_shape_runs_as_the_built_in_s() {
    use fencesim::runner::run;
    use fencesim::scenario::{build, FaultMask};
    use fencesim::sim::{EventKind, FaultKind, GatewayMode};
    let text = text_of(Mechanism::Fenced)
        .replacen("key = \"lock:settle:{merchant}\"", "key = \"settle-lock-{merchant}\"", 1)
        .replace("name = \"fenced\"", "name = \"test-other-lease-key\"");
    let ours = fencesim::mechanism_file::define(&text, "test-other-lease-key").unwrap();
    let broken = |outcome: &fencesim::runner::Outcome| -> Vec<&'static str> {
        outcome.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant).collect()
    };
    let mut expired_early = 0;
    for seed in 1..=200 {
        let theirs =
            build("random", seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL).unwrap();
        let mine = build("random", seed, ours, GatewayMode::Idempotent, FaultMask::ALL).unwrap();
        let (theirs, mine) = (run(&theirs, seed).unwrap(), run(&mine, seed).unwrap());
        assert_eq!(broken(&mine), broken(&theirs), "seed {seed}");
        let events = &mine.record.events;
        for (index, event) in events.iter().enumerate() {
            if let EventKind::FaultFired { fault: FaultKind::ExpireLease { merchant, .. }, .. } = event.kind {
                let key = format!("settle-lock-{merchant}");
                let same_ms = events[index..].iter().take_while(|e| e.at_ms == event.at_ms);
                if same_ms
                    .into_iter()
                    .any(|e| matches!(&e.kind, EventKind::LeaseExpired { key: k, .. } if *k == key))
                {
                    expired_early += 1;
                }
            }
        }
    }
    assert!(expired_early > 0, "an early expiry reached the file's key");
}
