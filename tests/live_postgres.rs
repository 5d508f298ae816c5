//! The refund store on PostgreSQL answers as the SQLite one does: the token sequence, and
//! every statement a planted bug rewrites; and a live run on PostgreSQL stopped by a
//! signal leaves nothing behind. Each test starts a cluster of its own on loopback in a
//! temporary directory and stops it; without PostgreSQL they say loudly that they skipped,
//! and with `CI` set they fail instead.

mod support;

use fencesim::live::postgres::PgRefunds;
use fencesim::live::store::Refunds;
use fencesim::model::{
    Cents, MerchantId, RefundId, RefundRow, RefundState, SqliteRefunds, Statements, Token, WriteGuard,
    WriteKind,
};
use fencesim::mutant::{Mutant, Planted};
use fencesim::sim::Wiring;

/// The database's token sequence counts on PostgreSQL as on SQLite, from where the
/// deployment placed it. (Its upsert named the column ambiguously for PostgreSQL, and
/// every batch of `fenced-db-sequence` live on PostgreSQL failed with a backend error:
/// found by `fencesim fidelity`.)
#[test]
fn the_database_sequence_counts_on_postgres_as_on_sqlite() {
    let Some(server) = support::postgres::cluster("postgres-sequence") else { return };
    let stores: [Box<dyn Refunds>; 2] = [
        Box::new(PgRefunds::connect(&server.url()).unwrap()),
        Box::new(SqliteRefunds::open_in_memory().unwrap()),
    ];
    for store in stores {
        store.set_sequence(MerchantId(101), 97).unwrap();
        let tokens: Vec<i64> =
            (0..3).map(|_| store.next_sequence_token(MerchantId(101)).unwrap().0).collect();
        assert_eq!(tokens, [98, 99, 100]);
        assert_eq!(
            store.next_sequence_token(MerchantId(102)).unwrap().0,
            1,
            "a merchant with no counter yet"
        );
    }
}

/// Claims and confirms, fresh and stale, through `store`: what each write returned.
fn writes(store: &dyn Refunds) -> Vec<String> {
    let row = |id, state, fence| RefundRow {
        id: RefundId(id),
        merchant: MerchantId(7),
        amount: Cents(100),
        state,
        fence,
    };
    store
        .load(&[
            row(1, RefundState::Pending, 0),
            row(2, RefundState::Sending, 9),
            row(3, RefundState::Sent, 4),
        ])
        .unwrap();
    let mut seen = Vec::new();
    for (kind, refund, token) in [
        (WriteKind::Claim, 1, 5),
        (WriteKind::Confirm, 1, 5),
        (WriteKind::Claim, 2, 8),
        (WriteKind::Confirm, 2, 8),
        (WriteKind::Claim, 2, 10),
        (WriteKind::Claim, 3, 6),
        (WriteKind::Confirm, 3, 4),
    ] {
        let written = store.write(kind, RefundId(refund), WriteGuard::Fence(Token(token)));
        seen.push(format!("{kind} r{refund} with {token}: {:?}", written.map(|(outcome, _)| outcome)));
    }
    seen.push(format!("{:?}", store.all_rows()));
    seen
}

/// Every statement a planted bug rewrites runs on PostgreSQL and answers what it answers on
/// SQLite. (`confirm-without-fence` compares its parameter with itself, which PostgreSQL
/// typed as text: every confirm failed there, and its live runs broke `progress` instead of
/// `no-stale-confirm`: found by `fencesim fidelity`.)
#[test]
fn every_planted_statement_answers_on_postgres_as_on_sqlite() {
    let Some(server) = support::postgres::cluster("postgres-planted") else { return };
    let mut planted = 0;
    for mutant in Mutant::ALL {
        let statements = Planted(mutant).statements(Statements::SQLITE);
        if statements == Statements::SQLITE {
            continue;
        }
        planted += 1;
        let postgres = PgRefunds::connect(&server.url()).unwrap().with_statements(statements);
        let sqlite = SqliteRefunds::open_in_memory().unwrap().with_statements(statements);
        assert_eq!(writes(&postgres), writes(&sqlite), "{mutant:?}");
    }
    assert!(planted >= 5, "the catalogue's rewritten statements were tried: {planted}");
}

/// The processes below `pid`, by pid, with their command lines.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let read = |pid: u32, file: &str| std::fs::read(format!("/proc/{pid}/{file}")).ok();
    let parent = |pid: u32| -> Option<u32> {
        let stat = String::from_utf8_lossy(&read(pid, "stat")?).into_owned();
        stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .map(|entries| entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let mut found = vec![pid];
    let mut grew = true;
    while grew {
        let more: Vec<u32> = all
            .iter()
            .copied()
            .filter(|p| !found.contains(p) && parent(*p).is_some_and(|pp| found.contains(&pp)))
            .collect();
        grew = !more.is_empty();
        found.extend(more);
    }
    let command =
        |p: u32| String::from_utf8_lossy(&read(p, "cmdline").unwrap_or_default()).replace('\0', " ");
    found.into_iter().skip(1).map(|p| (p, command(p))).collect()
}

/// An interrupt or a termination in the middle of a live run (a CI job's timeout, a
/// person's Ctrl-C) stops it with the exit code of a run cut short, and takes every
/// process and directory the run made with it: its workers, its redis-server, its
/// PostgreSQL cluster. (A `fencesim fidelity` stopped this way once left its cluster and
/// its servers running.)
#[test]
fn a_live_run_stopped_by_a_signal_leaves_no_process_and_no_directory() {
    let test = "live-signal";
    if !support::redis_server::available(test) || !support::postgres::available(test) {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("fencesim-signal-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["live", "--database", "postgres", "--runs", "3", "--time-scale", "0.25"])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    while !seen.iter().any(|(_, command): &(u32, String)| command.contains("live-worker")) {
        assert!(started.elapsed().as_secs() < 90, "no worker process after 90 s: {seen:?}");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its workers started");
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = descendants(child.id());
    }
    // whatever the run leaves when this test fails is killed and removed all the same
    let _cleanup = Cleanup { pids: seen.iter().map(|(pid, _)| *pid).collect(), dir: tmp.clone() };
    assert!(seen.iter().any(|(_, c)| c.contains("redis-server")), "a redis-server of the run's: {seen:?}");
    assert!(seen.iter().any(|(_, c)| c.contains("postgres")), "a PostgreSQL of the run's: {seen:?}");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "exit 3, a run cut short: {stderr}");
    assert!(stderr.contains("stopped by a signal"), "{stderr}");
    let alive = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !stat.is_empty() && !stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.iter().any(|(pid, _)| alive(*pid)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left: Vec<_> = seen.iter().filter(|(pid, _)| alive(*pid)).collect();
    assert!(left.is_empty(), "left running: {left:?}");
    let files: Vec<_> = std::fs::read_dir(&tmp).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    assert!(files.is_empty(), "left in the temporary directory: {files:?}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Kills the processes and removes the directory a failed test left (only then: a passing
/// test saw them all end, and their pids may since have been given to others).
struct Cleanup {
    pids: Vec<u32>,
    dir: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for pid in &self.pids {
            // SAFETY: a signal to a process this test saw its child start.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A team's file on PostgreSQL: each statement is prepared there before any worker runs it,
/// with every parameter typed as the worker gives it. A confirm that leaves `:token` out or
/// compares it with nothing that types it (`:token > 0`) runs as on SQLite (it failed with
/// a backend error, every confirm, before); one that only SQLite reads (`==`) is refused
/// before the run, named by its field, in PostgreSQL's words.
#[test]
fn a_team_files_statements_are_prepared_on_postgres_before_the_run() {
    let Some(server) = support::postgres::cluster("postgres-prepare") else { return };
    let text = fencesim::mechanism_file::builtin::text_of(fencesim::model::Mechanism::FencedDbSequence);
    let confirm = "WHERE id = :id AND state = 'sending' AND fence = :token";
    let cases = [
        ("pg-confirm-without-token", "WHERE id = :id AND state = 'sending'", None),
        ("pg-confirm-token-disguised", "WHERE id = :id AND state = 'sending' AND :token > 0", None),
        (
            "pg-confirm-double-equals",
            "WHERE id = :id AND state = 'sending' AND fence == :token",
            Some("statements.confirm: PostgreSQL says: "),
        ),
    ];
    for (name, to, refused) in cases {
        assert!(text.contains(confirm));
        let changed = text
            .replacen(confirm, to, 1)
            .replace("name = \"fenced-db-sequence\"", &format!("name = \"{name}\""));
        let mechanism = fencesim::mechanism_file::define(&changed, name).unwrap();
        let statements = mechanism.spec().statements;
        let prepared = fencesim::live::postgres::prepare_all(&server.url(), &statements, true);
        match refused {
            Some(said) => {
                let error = prepared.expect_err(name);
                assert!(error.starts_with(said), "{name}: {error}");
            }
            None => {
                prepared.unwrap_or_else(|e| panic!("{name}: {e}"));
                let store = PgRefunds::connect(&server.url()).unwrap().with_statements(statements);
                let row = RefundRow {
                    id: RefundId(1),
                    merchant: MerchantId(7),
                    amount: Cents(100),
                    state: RefundState::Sending,
                    fence: 9,
                };
                store.load(&[row]).unwrap();
                let (outcome, _) =
                    store.write(WriteKind::Confirm, RefundId(1), WriteGuard::Fence(Token(9))).unwrap();
                assert_eq!(outcome.rows_updated, 1, "{name}: the confirm runs on PostgreSQL");
            }
        }
    }
}

/// One file, both databases: `mechanism check --postgres URL` prepares every statement of
/// every built-in file and of every bug file the tests keep on PostgreSQL as the workers
/// will run them, and refuses a statement only SQLite reads with PostgreSQL's own words
/// and exit 2, where the SQLite check alone lets it through.
#[test]
fn mechanism_check_prepares_every_kept_file_on_postgres_too() {
    let Some(server) = support::postgres::cluster("postgres-check") else { return };
    let check = |file: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(["mechanism", "check"])
            .arg(file)
            .args(["--postgres", &server.url()])
            .output()
            .unwrap();
        let said =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), said)
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for dir in ["mechanisms", "tests/data/mechanism_bugs"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let (code, said) = check(&path);
            assert_eq!(code, Some(0), "{}: {said}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 18, "every kept file: {checked}");
    let text = std::fs::read_to_string(root.join("mechanisms/fenced.toml")).unwrap();
    let changed = text
        .replacen("AND fence = :token\"\"\"", "AND fence == :token\"\"\"", 1)
        .replace("name = \"fenced\"", "name = \"pg-double-equals\"");
    assert_ne!(changed, text);
    let path = std::env::temp_dir().join(format!("fencesim-pg-check-{}.toml", std::process::id()));
    std::fs::write(&path, changed).unwrap();
    let (code, said) = check(&path);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("statements.confirm: PostgreSQL says: operator does not exist: bigint == bigint"),
        "{said}"
    );
    std::fs::remove_file(&path).unwrap();
}

/// A live run's database error carries the database's own words into the history, the
/// story and the verdict: on PostgreSQL, a confirm that writes a state the schema does not
/// allow is refused, each time, in PostgreSQL's words, and progress names the last refusal.
#[test]
fn a_statement_postgres_refuses_live_is_told_in_its_words() {
    let Some(server) = support::postgres::cluster("postgres-refused") else { return };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("mechanisms/fenced.toml")).unwrap();
    let changed = text
        .replacen("UPDATE refund SET state = 'sent'", "UPDATE refund SET state = 'done'", 1)
        .replace("name = \"fenced\"", "name = \"pg-state-done\"");
    let path = std::env::temp_dir().join(format!("fencesim-pg-refused-{}.toml", std::process::id()));
    std::fs::write(&path, changed).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["live", "--database", "postgres", "--postgres", &server.url(), "--mechanism-file"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let told = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let said =
        "PostgreSQL says: new row for relation \"refund\" violates check constraint \"refund_state_check\"";
    assert!(told.contains(&format!("store    refuses A's statements.confirm: {said}")), "{told}");
    assert!(told.contains("VIOLATION progress"), "{told}");
    assert!(
        told.contains("the database refused") && told.contains(&format!("statements.confirm: {said}")),
        "{told}"
    );
}
