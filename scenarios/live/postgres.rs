//! PostgreSQL as the live run's refund store: the model's own statements (with
//! PostgreSQL's placeholders) under READ COMMITTED, each in a transaction of its own, with
//! real concurrent transactions from the worker processes; and a cluster of the run's own,
//! in a temporary directory, on loopback, run as an unprivileged user when the run is root.

use crate::live::clock::wall_us;
use crate::live::server::free_port;
use crate::live::store::Refunds;
use fencesim_model::store::{ALL_ROWS, CLEAR, ROW_IMAGE, SCHEMA};
use fencesim_model::{
    Cents, MerchantId, RefundId, RefundRow, RefundState, RowImage, Statements, Token, WriteGuard, WriteKind,
    WriteOutcome,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The model's tables with 64-bit integers, as SQLite's INTEGER is (PostgreSQL's is 32).
pub fn schema() -> String {
    SCHEMA.replace("INTEGER", "BIGINT")
}

/// A claim or a confirm of the model's, unchanged, that also says when it took effect:
/// the database's clock read after the update and before its commit, in the same
/// statement (one round trip). Under READ COMMITTED a write to a row another transaction
/// holds waits for that one's commit, so the times come in the order the writes applied.
/// A write that does not return its row (the model's own are decided by their row count)
/// returns it here, as the statement inside the `WITH` must.
fn stamped(write: &str) -> String {
    let returning = match write.to_ascii_uppercase().contains("RETURNING") {
        true => write.to_owned(),
        false => format!("{write}\n     RETURNING state, fence"),
    };
    format!(
        "WITH w AS ({}) SELECT state, fence, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint FROM w",
        dialect(&returning)
    )
}

/// A statement of the model's in PostgreSQL's placeholders (`$1` for `?1`). A parameter
/// that nothing types (a planted bug's: cast to text, or compared with itself) is typed
/// first, as SQLite's is by its value: PostgreSQL takes `$1 = $1` for text otherwise, the
/// client cannot send a token for it, and a batch that fails on it never settles.
fn dialect(sql: &str) -> String {
    sql.replace("CAST(?1 AS TEXT)", "CAST(?1::bigint AS TEXT)")
        .replace("?1 = ?1", "?1::bigint = ?1::bigint")
        .replace("?1", "$1")
        .replace("?2", "$2")
}

/// `sql` prepared with each of its `count` parameters typed as a 64-bit integer, as every
/// parameter the worker gives is: a parameter the text leaves out, or compares with nothing
/// that types it (`$1 > 0`), is typed all the same, as SQLite types it by its value.
fn typed(
    client: &mut postgres::Client,
    sql: &str,
    count: usize,
) -> Result<postgres::Statement, postgres::Error> {
    client.prepare_typed(sql, &vec![postgres::types::Type::INT8; count])
}

/// An error in PostgreSQL's own words, when the database gave it.
fn said(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("PostgreSQL says: {}", db.message()),
        None => error.to_string(),
    }
}

/// Every statement `statements` holds that a worker will run (the fenced writes when the
/// mechanism takes a token, else the unfenced ones), prepared on the PostgreSQL at `url`
/// as the workers will run them, before any starts: the first one PostgreSQL refuses is
/// named by its mechanism-file field, in PostgreSQL's words.
pub fn prepare_all(url: &str, statements: &Statements, fenced: bool) -> Result<(), String> {
    let mut client = PgRefunds::open(url)?;
    let writes = |kind| stamped(statements.of(kind, fenced));
    let count = if fenced { 2 } else { 1 };
    let all = [
        ("statements.open-rows", dialect(statements.open_rows), 1),
        ("statements.sequence", dialect(statements.next_sequence), 1),
        ("statements.claim", writes(WriteKind::Claim), count),
        ("statements.confirm", writes(WriteKind::Confirm), count),
    ];
    for (field, sql, count) in all {
        typed(&mut client, &sql, count).map_err(|e| format!("{field}: {}", said(&e)))?;
    }
    Ok(())
}

/// Work for the connection's thread.
type Job = Box<dyn FnOnce(&mut postgres::Client) + Send>;

/// The connection lives on a thread of its own: the blocking client runs an async runtime
/// of its own inside, which may not be started from within a worker's runtime.
#[derive(Clone)]
pub struct PgRefunds {
    jobs: Arc<Mutex<mpsc::Sender<Job>>>,
    /// The claim and confirm it runs: the model's, or a planted bug's.
    statements: Statements,
}

fn state(text: &str) -> Result<RefundState, String> {
    RefundState::from_sql(text).ok_or_else(|| format!("unknown refund state '{text}'"))
}

fn row_of(row: &postgres::Row) -> Result<RefundRow, String> {
    Ok(RefundRow {
        id: RefundId(row.get::<_, i64>(0) as u32),
        merchant: MerchantId(row.get::<_, i64>(1) as u32),
        amount: Cents(row.get(2)),
        state: state(row.get(3))?,
        fence: row.get(4),
    })
}

impl PgRefunds {
    /// Connects to the database at `url`, and makes the refund tables there if it has none.
    pub fn connect(url: &str) -> Result<PgRefunds, String> {
        let (ready, connected) = mpsc::channel();
        let (jobs, incoming) = mpsc::channel::<Job>();
        let url = url.to_owned();
        std::thread::spawn(move || {
            let mut client = match PgRefunds::open(&url) {
                Ok(client) => client,
                Err(e) => return drop(ready.send(Err(e))),
            };
            let _ = ready.send(Ok(()));
            for job in incoming {
                job(&mut client);
            }
        });
        connected.recv().map_err(|e| e.to_string())??;
        Ok(PgRefunds { jobs: Arc::new(Mutex::new(jobs)), statements: Statements::SQLITE })
    }

    /// The same store, running `statements` for its claims and confirms.
    pub fn with_statements(self, statements: Statements) -> PgRefunds {
        PgRefunds { statements, ..self }
    }

    fn open(url: &str) -> Result<postgres::Client, String> {
        let mut client = postgres::Client::connect(url, postgres::NoTls)
            .map_err(|e| format!("cannot reach PostgreSQL at {url}: {e}"))?;
        let exists = client.query_one("SELECT to_regclass('refund') IS NOT NULL", &[]);
        if !exists.map_err(|e| format!("PostgreSQL at {url}: {e}"))?.get::<_, bool>(0) {
            client
                .batch_execute(&schema())
                .map_err(|e| format!("cannot make the refund tables at {url}: {e}"))?;
        }
        client
            .query_one("SELECT COUNT(*) FROM refund", &[])
            .map_err(|e| format!("the database at {url} is not a refund store: {e}"))?;
        Ok(client)
    }

    /// Runs `f` on the connection's thread and waits for its answer (the harness's own
    /// work besides the rows, too: the row trigger, its record, emptying a kept cluster).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> T + Send + 'static,
    ) -> Result<T, String> {
        let (answer, answered) = mpsc::channel();
        let job: Job = Box::new(move |client| drop(answer.send(f(client))));
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| "the connection is gone")?;
        answered.recv().map_err(|_| "the connection is gone".to_owned())
    }

    fn rows(&self, sql: &'static str, params: Vec<i64>) -> Result<Vec<RefundRow>, String> {
        let rows = self.run(move |client| {
            let params: Vec<&(dyn postgres::types::ToSql + Sync)> = params.iter().map(|p| p as _).collect();
            let statement = typed(client, &dialect(sql), params.len()).map_err(|e| said(&e))?;
            client.query(&statement, &params).map_err(|e| said(&e))
        })??;
        rows.iter().map(row_of).collect()
    }
}

impl Refunds for PgRefunds {
    fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, String> {
        self.rows(self.statements.open_rows, vec![i64::from(merchant.0)])
    }

    fn write(
        &self,
        kind: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<(WriteOutcome, u64), String> {
        let sql = stamped(self.statements.of(kind, guard.token().is_some()));
        let id = i64::from(refund.0);
        let rows = self.run(move |client| {
            let written = match guard {
                WriteGuard::Fence(token) => {
                    let statement = typed(client, &sql, 2)?;
                    client.query(&statement, &[&token.0, &id])
                }
                WriteGuard::Unfenced => {
                    let statement = typed(client, &sql, 1)?;
                    client.query(&statement, &[&id])
                }
            }?;
            // Nothing changed: the row as it stands says why.
            let found = match written.is_empty() {
                true => client.query(&dialect(ROW_IMAGE), &[&id])?,
                false => Vec::new(),
            };
            Ok::<_, postgres::Error>((written, found))
        })?;
        let (rows, found) = rows.map_err(|e| said(&e))?;
        let image =
            |row: &postgres::Row| Ok::<_, String>(RowImage { state: state(row.get(0))?, fence: row.get(1) });
        let found = found.first().map(image).transpose()?;
        let (after, at_us) = match rows.first() {
            Some(row) => (Some(image(row)?), row.get::<_, i64>(2) as u64),
            // Nothing changed: the time the answer came back is as good as any.
            None => (None, wall_us()),
        };
        Ok((WriteOutcome { rows_updated: rows.len() as u64, after, found }, at_us))
    }

    fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, String> {
        let merchant = i64::from(merchant.0);
        let sequence = self.statements.next_sequence;
        let row = self.run(move |client| {
            let statement = typed(client, &dialect(sequence), 1)?;
            client.query_one(&statement, &[&merchant])
        })?;
        row.map(|row| Token(row.get(0))).map_err(|e| said(&e))
    }

    fn set_sequence(&self, merchant: MerchantId, value: i64) -> Result<(), String> {
        let sql = "INSERT INTO fence_seq (merchant, value) VALUES ($1, $2)
                   ON CONFLICT (merchant) DO UPDATE SET value = excluded.value";
        let merchant = i64::from(merchant.0);
        self.run(move |client| client.execute(sql, &[&merchant, &value]))?
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn all_rows(&self) -> Result<Vec<RefundRow>, String> {
        self.rows(ALL_ROWS, Vec::new())
    }

    fn load(&self, rows: &[RefundRow]) -> Result<(), String> {
        let rows = rows.to_vec();
        self.run(move |client| load(client, &rows, true))?.map_err(|e| e.to_string())
    }

    fn add(&self, rows: &[RefundRow]) -> Result<(), String> {
        let rows = rows.to_vec();
        self.run(move |client| load(client, &rows, false))?.map_err(|e| e.to_string())
    }
}

/// Inserts `rows`, after emptying the tables if `clear`, in one transaction.
fn load(client: &mut postgres::Client, rows: &[RefundRow], clear: bool) -> Result<(), postgres::Error> {
    let mut tx = client.transaction()?;
    if clear {
        tx.batch_execute(&CLEAR.join(";"))?;
    }
    let insert = tx.prepare(
        "INSERT INTO refund (id, merchant, amount_cents, state, fence) VALUES ($1, $2, $3, $4, $5)",
    )?;
    for r in rows {
        let params: [&(dyn postgres::types::ToSql + Sync); 5] =
            [&i64::from(r.id.0), &i64::from(r.merchant.0), &r.amount.0, &r.state.as_sql(), &r.fence];
        tx.execute(&insert, &params)?;
    }
    tx.commit()
}

/// A PostgreSQL program (`initdb`, `postgres`), if the machine has one: on the PATH, or
/// where Debian's packages put it.
pub fn postgres_program(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|versions| versions.filter_map(|v| Some(v.ok()?.path().join("bin").join(name))).collect())
        .unwrap_or_default();
    debian.sort();
    debian.reverse();
    on_path.into_iter().chain(debian).find(|path| path.is_file())
}

/// A PostgreSQL cluster of the run's own: made in a temporary directory, listening on a
/// free loopback port only, stopped and removed when dropped.
pub struct PostgresServer {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

/// The user a cluster runs as: PostgreSQL refuses to run as root, so a root run hands it
/// to `nobody`.
fn unprivileged() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    (unsafe { libc::geteuid() } == 0).then_some((65534, 65534))
}

fn as_cluster_user(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = unprivileged() {
        command.uid(uid).gid(gid);
    }
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped())
}

/// Makes a cluster in a fresh directory named after `label`: the directory, the cluster's
/// data directory in it, and the server program to start it with.
fn make_cluster(label: &str) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let missing = "no PostgreSQL on this machine: install Debian's postgresql, or pass --postgres URL";
    let (initdb, postgres) =
        (postgres_program("initdb").ok_or(missing)?, postgres_program("postgres").ok_or(missing)?);
    let dir = std::env::temp_dir().join(format!("fencesim-pg-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    if let Some((uid, gid)) = unprivileged() {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let data = dir.join("data");
    let made = as_cluster_user(Command::new(&initdb).current_dir(&dir))
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", initdb.display()))?;
    if !made.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!("initdb failed: {}", String::from_utf8_lossy(&made.stderr).trim()));
    }
    Ok((dir, data, postgres))
}

/// Starts the server of the cluster in `data` on `port`, its log in `dir`.
fn launch(
    postgres: &Path,
    dir: &Path,
    data: &Path,
    port: u16,
    env: &[(String, String)],
) -> Result<Child, String> {
    let log = std::fs::File::create(dir.join("postgres.log")).map_err(|e| e.to_string())?;
    as_cluster_user(Command::new(postgres).current_dir(dir))
        .arg("-D")
        .arg(data)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="])
        // Commits are acknowledged before their log reaches the disk: atomicity and
        // isolation are unchanged, only a crash of the machine could lose the last ones.
        .args(["-c", "synchronous_commit=off"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", postgres.display()))
}

/// Waits until the server of the cluster in `data` answers on `port`: a server of another
/// cluster there is not taken for it. `Err(None)`: its process ended (the port was taken,
/// most often); `Err(Some(why))`: it did not answer in time.
fn wait_until_ready(child: &mut Child, port: u16, data: &Path) -> Result<(), Option<String>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut config: postgres::Config = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres")
        .parse()
        .map_err(|e| Some(format!("{e}")))?;
    config.connect_timeout(Duration::from_secs(1));
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            let _ = child.wait();
            return Err(None);
        }
        let answered = config.connect(postgres::NoTls).ok().and_then(|mut client| {
            client.query_one("SHOW data_directory", &[]).ok().map(|row| row.get::<_, String>(0))
        });
        if answered.is_some_and(|said| Path::new(&said) == data) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(Some(format!("PostgreSQL on port {port} did not answer within 20 s")))
}

impl PostgresServer {
    /// Makes a cluster in a fresh directory named after `label` and starts it.
    pub fn start(label: &str) -> Result<PostgresServer, String> {
        PostgresServer::start_in(label, &[])
    }

    /// Makes a cluster and starts it with these environment variables added (a clock of
    /// the run's, `live::faketime`).
    pub fn start_in(label: &str, env: &[(String, String)]) -> Result<PostgresServer, String> {
        let (dir, data, postgres) = make_cluster(label)?;
        // A port found free can be taken before the server binds it (by the source port of
        // any connection the machine opens meanwhile): the server then exits at once, and
        // another port is tried.
        let mut taken = Vec::new();
        for _ in 0..5 {
            let port = free_port()?;
            let mut child = launch(&postgres, &dir, &data, port, env)?;
            match wait_until_ready(&mut child, port, &data) {
                Ok(()) => return Ok(PostgresServer { child, dir, port }),
                Err(None) => {
                    crate::live::faketime::forget_process(child.id());
                    taken.push(port.to_string());
                }
                Err(Some(why)) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    crate::live::faketime::forget_process(child.id());
                    let said = std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(format!("{why}: {}", said.trim()));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Err(format!("PostgreSQL exited at once on each port tried ({}): is each taken?", taken.join(", ")))
    }

    pub fn url(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // SIGINT: a fast shutdown, which ends every session and stops at once.
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::live::faketime::forget_process(self.child.id());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster started on a port another cluster holds: it is said to have exited at
    /// once, and the server answering there is not taken for it.
    #[test]
    fn a_cluster_started_on_a_port_another_holds_is_said_to_have_exited() {
        let test = "a_cluster_started_on_a_port_another_holds";
        if postgres_program("initdb").is_none() || postgres_program("postgres").is_none() {
            assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no PostgreSQL was found");
            eprintln!("SKIPPED {test}: no PostgreSQL on this machine (install Debian's postgresql)");
            return;
        }
        let first = PostgresServer::start("holder").unwrap();
        let (dir, data, postgres) = make_cluster("second").unwrap();
        let mut child = launch(&postgres, &dir, &data, first.port, &[]).unwrap();
        let started = Instant::now();
        let ready = wait_until_ready(&mut child, first.port, &data);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(ready, Err(None), "the second cluster's server exits: its port is taken");
        assert!(started.elapsed() < Duration::from_secs(10), "said at once: {:?}", started.elapsed());
    }
}
