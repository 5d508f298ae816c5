//! `fencesim worker` runs a team's own worker program, in any language, and judges it from
//! what the components saw: the article's TypeScript worker and a Python worker whose lock
//! is its library's, each with and without the fence, through the worked example, break
//! what the simulation breaks for `ttl-only` and `fenced` on the same plan; a program that
//! cannot be judged is named, with exit code 2. Run as a person runs them: the binary,
//! its exit code and what it prints.
//!
//! Needs redis-server, PostgreSQL, and the example workers installed by
//! `examples/workers/install` (`.ci/components` runs it); without them each test says
//! loudly that it skipped, and with `CI` set it fails instead.

mod support;

use fencesim::model::Mechanism;
use fencesim::sim::GatewayMode;
use std::path::PathBuf;
use std::process::Command;
use support::programs::{
    available, broken, python, root, simulated, typescript, unfenced_typescript, worker, worker_at_pace,
};

/// One example, fenced and not, through the worked example with a gateway that pays every
/// call: each breaks what the simulation breaks under the mechanism it stands for.
fn breaks_what_the_simulation_breaks(test: &str, (needs, command): (PathBuf, Vec<String>)) {
    if !available(test, Some(&needs)) {
        return;
    }
    for (fence, mechanism) in [(false, Mechanism::TtlOnly), (true, Mechanism::Fenced)] {
        let mut command = command.clone();
        if !fence {
            command.push("--no-fence".into());
        }
        let expected = simulated(mechanism, GatewayMode::NonIdempotent);
        let (code, stdout, stderr) = worker_at_pace(&["--gateway", "non-idempotent"], &command, &expected);
        assert_eq!(broken(&stdout), expected, "{test} {command:?}: {stderr}");
        assert_eq!(code, 1, "a broken invariant exits 1: {stderr}");
        if !fence {
            for name in ["no-double-refund", "no-stale-confirm"] {
                assert!(expected.iter().any(|e| e == name), "the simulation's ttl-only breaks {name}");
            }
        }
    }
}

#[test]
fn the_articles_typescript_worker_breaks_what_the_simulation_breaks() {
    breaks_what_the_simulation_breaks("worker-typescript", typescript());
}

#[test]
fn a_python_worker_with_its_librarys_lock_breaks_what_the_simulation_breaks() {
    breaks_what_the_simulation_breaks("worker-python", python());
}

/// With an idempotent gateway the fenced worker breaks nothing and exits 0.
#[test]
fn the_fenced_typescript_worker_breaks_nothing_with_an_idempotent_gateway() {
    let (needs, command) = typescript();
    if !available("worker-typescript-idempotent", Some(&needs)) {
        return;
    }
    let (code, stdout, stderr) = worker_at_pace(&[], &command, &[]);
    assert_eq!(broken(&stdout), Vec::<String>::new(), "{stderr}");
    assert_eq!(code, 0);
}

/// A program that cannot be judged is named, with what it did, and exit code 2.
#[test]
fn a_program_that_cannot_be_judged_is_named() {
    if !available("worker-bad-programs", None) {
        return;
    }
    let cases: [(&[&str], Vec<String>, &str); 3] = [
        (&[], vec!["/nonexistent/worker".into()], "cannot start the worker program `/nonexistent/worker`"),
        (
            &[],
            vec!["sh".into(), "-c".into(), "echo no jobs for me; exit 3".into()],
            "exited with status 3 before it asked",
        ),
        (
            &["--first-take-within", "1"],
            vec!["sleep".into(), "30".into()],
            "never asked the queue for a job in 1 s",
        ),
    ];
    for (flags, command, said) in cases {
        let (code, _, stderr) = worker(flags, &command);
        assert_eq!(code, 2, "{command:?}: {stderr}");
        assert!(stderr.contains(said), "{command:?} should say '{said}': {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (_, _, stderr) = worker(&[], &["sh".into(), "-c".into(), "echo no jobs for me; exit 3".into()]);
    assert!(stderr.contains("no jobs for me"), "what the program said is shown: {stderr}");
}

/// A program that opens a TLS connection to its Redis proxy is told to connect without TLS.
#[test]
fn a_program_that_speaks_tls_to_a_proxy_is_told_so() {
    if !available("worker-tls", None) {
        return;
    }
    let script = "import os, socket, urllib.request\n\
                  port = int(os.environ['FENCESIM_REDIS_URL'].rsplit(':', 1)[1])\n\
                  urllib.request.urlopen(urllib.request.Request(os.environ['FENCESIM_QUEUE_URL'] + '/take', method='POST'))\n\
                  s = socket.create_connection(('127.0.0.1', port)); s.sendall(b'\\x16\\x03\\x01\\x00\\x05hello'); s.recv(10)\n";
    let (code, _, stderr) = worker(&[], &["python3".into(), "-c".into(), script.into()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("with a TLS handshake") && stderr.contains("FENCESIM_REDIS_URL"), "{stderr}");
}

/// A failing run saves a replay file that names the program; `fencesim replay FILE` runs
/// the program through the same world and plan again and says the verdict repeated.
#[test]
fn a_failing_run_is_a_replay_file_that_runs_the_program_again() {
    let Some(command) = unfenced_typescript("worker-replay") else { return };
    let dir = tempfile_dir("worker-replay");
    let saved = dir.display().to_string();
    let (code, _, stderr) = worker(&["--gateway", "non-idempotent", "--save-replay", &saved], &command);
    assert_eq!(code, 1, "{stderr}");
    let file = std::fs::read_dir(&dir).unwrap().next().expect("a replay file").unwrap().path();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"worker\"") && text.contains("--no-fence"), "the file names the program: {text}");
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["replay", &file.display().to_string()])
        .current_dir(root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("the verdict repeated in 1 of 1 runs: broke no-double-refund, no-stale-confirm"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A replay file that names no program, or an impossible time scale, is refused (exit 2)
/// before anything starts.
#[test]
fn a_broken_worker_replay_file_is_refused_by_name() {
    let dir = tempfile_dir("worker-replay-bad");
    let good = root().join("reports/shrunk/check-before-write-idempotent.json");
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(good).unwrap()).unwrap();
    for (worker, said) in [
        (serde_json::json!({"command": [], "time_scale": 0.25}), "worker.command: no program named"),
        (serde_json::json!({"command": ["node"], "time_scale": 0.0}), "worker.time_scale 0"),
    ] {
        value["worker"] = worker;
        let file = dir.join("bad.json");
        std::fs::write(&file, value.to_string()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_fencesim")).arg("replay").arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said) && !stderr.contains("panicked"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencesim-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Random worlds with faults: the unfenced TypeScript worker is caught (seeds 1000 and 1001
/// break no-stale-confirm, measured), each world's simulated verdict is told beside, and a
/// failing world is saved as a replay file of the program.
#[test]
fn random_worlds_catch_the_unfenced_worker_and_keep_the_failing_world() {
    let Some(command) = unfenced_typescript("worker-random") else { return };
    let dir = tempfile_dir("worker-random");
    let saved = dir.display().to_string();
    let flags = ["--random", "2", "--first-seed", "1000", "--beside", "ttl-only", "--save-replay", &saved];
    let (code, stdout, stderr) = worker(&flags, &command);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("seed 1000: ") && stdout.contains("seed 1001: "), "{stdout}");
    assert!(stdout.contains("broke no-stale-confirm"), "{stdout}");
    assert!(stdout.contains("; simulated: ") && stdout.contains("under ttl-only in "), "{stdout}");
    assert!(std::fs::read_dir(&dir).unwrap().count() >= 1, "a failing world is saved");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The project's own worker, run as a program that follows the contract
/// (`fencesim contract-worker`): judged from what the servers saw, it breaks what the
/// simulation breaks for `ttl-only`, and judging the events it wrote itself gives the same
/// verdict; so does a replay file's world that restarts Redis from outside with the counter
/// lost, the deployment not seeding it again (a planted bug).
#[test]
fn the_projects_own_worker_is_judged_alike_from_the_servers_and_from_its_own_events() {
    if !available("worker-contract", None) {
        return;
    }
    let fencesim = env!("CARGO_BIN_EXE_fencesim").to_owned();
    let command = [fencesim.clone(), "contract-worker".into(), "--mechanism".into(), "ttl-only".into()];
    let page = tempfile_dir("worker-contract").join("run.html");
    let flags = ["--gateway", "non-idempotent", "--html", page.to_str().unwrap(), "--beside", "ttl-only"];
    let (code, stdout, stderr) = worker(&flags, &command);
    let html = std::fs::read_to_string(&page).expect("the run's page is written");
    assert!(html.contains("broken under the program `"), "the page names the program as what ran");
    let data = support::page::page_data(&page);
    assert!(data.contains("The same fault plan under ttl-only"), "and the simulation beside it");
    let observed: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("VIOLATION "))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect();
    assert_eq!(observed, simulated(Mechanism::TtlOnly, GatewayMode::NonIdempotent), "{stderr}");
    assert!(stdout.contains("judged again from the program's own events: the same verdict"), "{stdout}");
    assert_eq!(code, 1, "{stderr}");
    let file = root().join("reports/mutants/no-reseed-after-restart.json").display().to_string();
    let like = [fencesim, "contract-worker".into(), "--like".into(), file.clone()];
    let (_, stdout, stderr) = worker(&["--replay", &file], &like);
    assert!(stderr.contains("plants no-reseed-after-restart"), "the file's bug is said: {stderr}");
    assert!(stdout.contains("redis#1 restarts, with no persistence"), "the restart is given: {stdout}");
    assert!(stdout.contains("judged again from the program's own events: the same verdict"), "{stdout}");
}
