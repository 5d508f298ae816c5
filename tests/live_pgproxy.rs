//! The recording proxy between a party and a real PostgreSQL server: what the party sends
//! and gets passes unchanged, each statement the server runs is recorded with its text,
//! parameters, tag or error, rows and times, a hook may hold a statement before it goes on
//! or its answer before it comes back, encryption is refused and a TLS handshake closed,
//! and a malformed message closes its connection only. Each test starts a cluster of its
//! own on loopback; without PostgreSQL they say loudly that they skipped, and with `CI`
//! set they fail instead.

mod support;

use fencesim::live::pgproxy::{PgHooks, PgObserved, PgOpen, PgProxy, SKIPPED};
use fencesim::live::pgwire::{read_message, Message, GSSENC_REQUEST, SSL_REQUEST};
use fencesim::live::postgres::PostgresServer;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

fn proxy(server: &PostgresServer, party: &str, hooks: Arc<dyn PgHooks>) -> PgProxy {
    PgProxy::start(&format!("127.0.0.1:{}", server.port), party, hooks).unwrap()
}

/// A client connected through the proxy, as the server's own URL says but for the port.
fn through(proxy: &PgProxy) -> postgres::Client {
    let url = format!("host=127.0.0.1 port={} user=postgres dbname=postgres", proxy.port);
    postgres::Client::connect(&url, postgres::NoTls).unwrap()
}

fn direct(server: &PostgresServer) -> postgres::Client {
    postgres::Client::connect(&server.url(), postgres::NoTls).unwrap()
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some(v.to_string())).collect()
}

const UPDATE: &str = "UPDATE t SET state = 'x' WHERE id = $1 AND state = 'a'";

#[test]
fn each_statement_is_recorded_with_its_parameters_tag_and_rows() {
    let Some(server) = support::postgres::cluster("pgproxy-records") else { return };
    let proxy = proxy(&server, "A", Arc::new(PgOpen));
    let mut client = through(&proxy);
    client.batch_execute("CREATE TABLE t (id bigint primary key, state text)").unwrap();
    client.batch_execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')").unwrap();
    let update = client.prepare(UPDATE).unwrap();
    assert_eq!(client.execute(&update, &[&1_i64]).unwrap(), 1);
    assert_eq!(client.execute(&update, &[&2_i64]).unwrap(), 0);
    let rows = client.query("SELECT id, state FROM t ORDER BY id", &[]).unwrap();
    let states: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(states, [(1, "x".to_owned()), (2, "b".to_owned())], "the answers passed unchanged");
    let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let both = "INSERT INTO t VALUES (3, NULL); DELETE FROM t WHERE id = 3";
    client.batch_execute(both).unwrap();
    let seen = proxy.observed();
    let told: Vec<_> = seen.iter().map(|o| (o.sql.as_str(), o.params.clone(), o.tag.as_deref())).collect();
    assert_eq!(
        told,
        [
            ("CREATE TABLE t (id bigint primary key, state text)", vec![], Some("CREATE TABLE")),
            ("INSERT INTO t VALUES (1, 'a'), (2, 'b')", vec![], Some("INSERT 0 2")),
            (UPDATE, some(&["1"]), Some("UPDATE 1")),
            (UPDATE, some(&["2"]), Some("UPDATE 0")),
            ("SELECT id, state FROM t ORDER BY id", vec![], Some("SELECT 2")),
            ("SELECT pg_backend_pid()", vec![], Some("SELECT 1")),
            (both, vec![], Some("INSERT 0 1")),
            (both, vec![], Some("DELETE 1")),
        ]
    );
    assert_eq!(seen[4].rows, [some(&["1", "x"]), some(&["2", "b"])]);
    assert_eq!(seen[5].rows, [some(&[&pid.to_string()])]);
    assert!(seen.iter().all(|o| o.error.is_none() && o.party == "A" && o.connection == 1));
    assert!(seen.iter().all(|o| o.backend_pid == Some(pid)), "the server process that ran them");
    let numbers: Vec<u64> = seen.iter().map(|o| o.nth).collect();
    assert_eq!(numbers, (1..=8).collect::<Vec<_>>());
    assert!(seen.iter().all(|o| o.sent_us <= o.answered_us));
    assert!(seen.windows(2).all(|w| w[0].answered_us <= w[1].answered_us), "in order");
}

/// Holds every statement a little before it goes on, as a scheduler would.
struct Slow;

impl PgHooks for Slow {
    fn before_send(&self, _party: &str, _nth: u64, _sql: &str, _params: &[Option<String>]) -> bool {
        std::thread::sleep(Duration::from_millis(30));
        true
    }

    fn before_reply(&self, _observed: &PgObserved) {}
}

/// The division fails when its Bind is planned, before its Execute runs: the error is
/// still that statement's, however long the hook held its Execute. (A proxy that passed
/// the Bind on before the hook would get that error back during the hold, with no
/// statement yet waiting for it, and record the statement as skipped.)
#[test]
fn an_error_is_recorded_in_the_servers_words_and_the_connection_goes_on() {
    let Some(server) = support::postgres::cluster("pgproxy-errors") else { return };
    let proxy = proxy(&server, "B", Arc::new(Slow));
    let mut client = through(&proxy);
    let missing = client.batch_execute("SELECT * FROM missing").unwrap_err();
    assert_eq!(missing.code(), Some(&postgres::error::SqlState::UNDEFINED_TABLE));
    let divided = client.query_one("SELECT 1 / $1::int", &[&0_i32]).unwrap_err();
    assert_eq!(divided.code(), Some(&postgres::error::SqlState::DIVISION_BY_ZERO));
    assert_eq!(client.query_one("SELECT 7::bigint", &[]).unwrap().get::<_, i64>(0), 7);
    let seen = proxy.observed();
    let told: Vec<(&str, Option<&str>, Option<&str>)> =
        seen.iter().map(|o| (o.sql.as_str(), o.tag.as_deref(), o.error.as_deref())).collect();
    assert_eq!(
        told,
        [
            ("SELECT * FROM missing", None, Some("42P01: relation \"missing\" does not exist")),
            ("SELECT 1 / $1::int", None, Some("22012: division by zero")),
            ("SELECT 7::bigint", Some("SELECT 1"), None),
        ]
    );
    assert_eq!(seen[1].params, some(&["0"]));
    assert_eq!(seen[2].rows, [some(&["7"])]);
}

/// Holds the answer to any UPDATE for `hold`, and says when it does.
struct SlowReply {
    hold: Duration,
    holding: Mutex<mpsc::Sender<()>>,
}

impl PgHooks for SlowReply {
    fn before_send(&self, _party: &str, _nth: u64, _sql: &str, _params: &[Option<String>]) -> bool {
        true
    }

    fn before_reply(&self, observed: &PgObserved) {
        if observed.sql.contains("UPDATE") {
            let _ = self.holding.lock().unwrap().send(());
            std::thread::sleep(self.hold);
        }
    }
}

fn state_of(con: &mut postgres::Client, id: i64) -> Option<String> {
    con.query_one("SELECT state FROM t WHERE id = $1", &[&id]).unwrap().get(0)
}

fn table(server: &PostgresServer) -> postgres::Client {
    let mut con = direct(server);
    con.batch_execute("CREATE TABLE t (id bigint primary key, state text); INSERT INTO t VALUES (1, 'a')")
        .unwrap();
    con
}

#[test]
fn a_held_answer_reaches_the_party_late_after_the_change_was_made() {
    let Some(server) = support::postgres::cluster("pgproxy-held-reply") else { return };
    let mut con = table(&server);
    let (holding, held) = mpsc::channel();
    let hold = Duration::from_millis(200);
    let proxy = proxy(&server, "C", Arc::new(SlowReply { hold, holding: Mutex::new(holding) }));
    let mut client = through(&proxy);
    let asked = std::thread::spawn(move || {
        let started = Instant::now();
        let updated = client.execute(UPDATE, &[&1_i64]).unwrap();
        (updated, started.elapsed())
    });
    held.recv_timeout(Duration::from_secs(10)).expect("the answer is held");
    let until = Instant::now() + Duration::from_millis(150);
    while state_of(&mut con, 1).as_deref() != Some("x") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(state_of(&mut con, 1).as_deref(), Some("x"), "changed while the answer was held");
    assert!(!asked.is_finished(), "the party still waits for its answer");
    let (updated, took) = asked.join().unwrap();
    assert_eq!(updated, 1);
    assert!(took >= hold, "the party's call took {took:?}");
    let seen = proxy.observed();
    assert_eq!(seen.iter().filter(|o| o.tag.as_deref() == Some("UPDATE 1")).count(), 1);
}

/// Holds any UPDATE before it goes on, until released; says when it holds one.
struct HoldUpdate {
    released: Mutex<bool>,
    wake: Condvar,
    holding: Mutex<mpsc::Sender<u64>>,
}

impl PgHooks for HoldUpdate {
    fn before_send(&self, _party: &str, nth: u64, sql: &str, _params: &[Option<String>]) -> bool {
        if sql.contains("UPDATE") {
            let _ = self.holding.lock().unwrap().send(nth);
            let mut released = self.released.lock().unwrap();
            while !*released {
                released = self.wake.wait(released).unwrap();
            }
        }
        true
    }

    fn before_reply(&self, _observed: &PgObserved) {}
}

#[test]
fn a_held_statement_reaches_the_server_only_when_released() {
    let Some(server) = support::postgres::cluster("pgproxy-held-send") else { return };
    let mut con = table(&server);
    let (holding, held) = mpsc::channel();
    let hooks = Arc::new(HoldUpdate {
        released: Mutex::new(false),
        wake: Condvar::new(),
        holding: Mutex::new(holding),
    });
    let proxy = proxy(&server, "D", hooks.clone());
    let mut client = through(&proxy);
    let asked = std::thread::spawn(move || client.execute(UPDATE, &[&1_i64]).unwrap());
    let nth = held.recv_timeout(Duration::from_secs(10)).expect("the update is held");
    assert_eq!(state_of(&mut con, 1).as_deref(), Some("a"), "held, it has not run");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(state_of(&mut con, 1).as_deref(), Some("a"), "still held");
    let released_us = fencesim::live::clock::wall_us();
    *hooks.released.lock().unwrap() = true;
    hooks.wake.notify_all();
    assert_eq!(asked.join().unwrap(), 1);
    assert_eq!(state_of(&mut con, 1).as_deref(), Some("x"), "released, it ran");
    let seen = proxy.observed();
    let update = seen.iter().find(|o| o.nth == nth).unwrap();
    assert_eq!((update.sql.as_str(), update.tag.as_deref()), (UPDATE, Some("UPDATE 1")));
    assert!(update.sent_us >= released_us, "sent when released");
}

/// A client of the test's own that writes the protocol's bytes by hand.
struct Raw {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    [&[kind][..], &(body.len() as i32 + 4).to_be_bytes(), body].concat()
}

fn startup_packet(code: i32, body: &[u8]) -> Vec<u8> {
    [&(body.len() as i32 + 8).to_be_bytes()[..], &code.to_be_bytes(), body].concat()
}

impl Raw {
    fn connect(proxy: &PgProxy) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { reader: BufReader::new(stream.try_clone().unwrap()), stream }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Logs in as the cluster's user, and returns what the server said up to its first
    /// ReadyForQuery.
    fn start_up(&mut self) -> Vec<Message> {
        self.send(&startup_packet(196_608, b"user\0postgres\0database\0postgres\0\0"));
        self.until_ready()
    }

    fn until_ready(&mut self) -> Vec<Message> {
        let mut got = Vec::new();
        while got.last().is_none_or(|m: &Message| m.kind != b'Z') {
            got.push(read_message(&mut self.reader).unwrap().expect("the connection closed"));
        }
        got
    }

    /// Whether the proxy closed the connection, with nothing more to say.
    fn closed(mut self) -> bool {
        let mut rest = Vec::new();
        self.reader.read_to_end(&mut rest).is_ok() && rest.is_empty()
    }
}

#[test]
fn encryption_is_refused_a_tls_handshake_closed_and_plain_text_goes_on() {
    let Some(server) = support::postgres::cluster("pgproxy-tls") else { return };
    let proxy = proxy(&server, "E", Arc::new(PgOpen));
    let mut raw = Raw::connect(&proxy);
    for code in [GSSENC_REQUEST, SSL_REQUEST] {
        raw.send(&startup_packet(code, b""));
        let mut answer = [0];
        raw.reader.read_exact(&mut answer).unwrap();
        assert_eq!(answer, *b"N", "refused by the proxy itself");
    }
    let logged_in = raw.start_up();
    let key = logged_in.iter().find(|m| m.kind == b'K').expect("the backend's key");
    let pid = i32::from_be_bytes(key.body()[..4].try_into().unwrap());
    raw.send(&message(b'Q', b"SELECT 1\0"));
    let answer = raw.until_ready();
    assert!(answer.iter().any(|m| m.bytes == message(b'C', b"SELECT 1\0")), "answered unchanged");
    let mut tls = Raw::connect(&proxy);
    tls.send(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]);
    assert!(tls.closed(), "closed without an answer");
    let seen = proxy.observed();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!((seen[0].sql.as_str(), seen[0].tag.as_deref()), ("SELECT 1", Some("SELECT 1")));
    assert_eq!((seen[0].backend_pid, &seen[0].rows), (Some(pid), &vec![some(&["1"])]));
    assert_eq!((seen[1].sql.as_str(), seen[1].connection, seen[1].nth), ("(a TLS handshake)", 2, 0));
    assert!(seen[1].error.as_deref().is_some_and(|e| e.contains("plain text")), "{:?}", seen[1].error);
}

/// The extended protocol's messages that run `sql`, unnamed, with no parameters.
fn extended(sql: &str) -> Vec<u8> {
    let parse = message(b'P', &[b"\0", sql.as_bytes(), b"\0\0\0"].concat());
    let bind = message(b'B', &[0, 0, 0, 0, 0, 0, 0, 0]);
    let execute = message(b'E', &[0, 0, 0, 0, 0]);
    [parse, bind, execute].concat()
}

#[test]
fn after_an_error_the_rest_of_a_pipelined_batch_is_recorded_as_skipped() {
    let Some(server) = support::postgres::cluster("pgproxy-skipped") else { return };
    let proxy = proxy(&server, "F", Arc::new(PgOpen));
    let mut raw = Raw::connect(&proxy);
    raw.start_up();
    let batch = [extended("SELECT 2"), extended("SELECT 1 / 0"), extended("SELECT 3"), message(b'S', b"")];
    raw.send(&batch.concat());
    raw.until_ready();
    raw.send(&[extended("SELECT 4"), message(b'S', b"")].concat());
    raw.until_ready();
    let seen = proxy.observed();
    let told: Vec<(u64, &str, Option<&str>, Option<&str>)> =
        seen.iter().map(|o| (o.nth, o.sql.as_str(), o.tag.as_deref(), o.error.as_deref())).collect();
    assert_eq!(
        told,
        [
            (1, "SELECT 2", Some("SELECT 1"), None),
            (2, "SELECT 1 / 0", None, Some("22012: division by zero")),
            (3, "SELECT 3", None, Some(SKIPPED)),
            (4, "SELECT 4", Some("SELECT 1"), None),
        ]
    );
    assert_eq!(seen[0].rows, [some(&["2"])], "text, as the Bind asked");
}

#[test]
fn a_malformed_message_closes_its_connection_only() {
    let Some(server) = support::postgres::cluster("pgproxy-malformed") else { return };
    let proxy = proxy(&server, "G", Arc::new(PgOpen));
    for length in [2_i32, i32::MAX] {
        let mut raw = Raw::connect(&proxy);
        raw.start_up();
        raw.send(&[&b"Q"[..], &length.to_be_bytes()].concat());
        assert!(raw.closed(), "a length of {length} closes the connection");
    }
    let mut cut = Raw::connect(&proxy);
    cut.start_up();
    cut.send(&[b'Q', 0, 0, 0, 100, b'S']);
    drop(cut);
    let mut client = through(&proxy);
    assert_eq!(client.query_one("SELECT 5::bigint", &[]).unwrap().get::<_, i64>(0), 5, "still serving");
    let seen = proxy.observed();
    let told: Vec<(u32, &str, Option<&str>)> =
        seen.iter().map(|o| (o.connection, o.sql.as_str(), o.error.as_deref())).collect();
    assert_eq!(
        told,
        [
            (1, "(a message from the client)", Some("(malformed message: a length of 2)")),
            (2, "(a message from the client)", Some("(malformed message: a length of 2147483647)")),
            (4, "SELECT 5::bigint", None),
        ],
        "a connection cut mid-message ends quietly"
    );
}

#[test]
fn a_cancel_request_reaches_the_server_as_it_came() {
    let Some(server) = support::postgres::cluster("pgproxy-cancel") else { return };
    let proxy = proxy(&server, "H", Arc::new(PgOpen));
    let mut client = through(&proxy);
    let cancel = client.cancel_token();
    let sleeper = std::thread::spawn(move || client.batch_execute("SELECT pg_sleep(30)").unwrap_err());
    let mut con = direct(&server);
    let running =
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'";
    let until = Instant::now() + Duration::from_secs(10);
    while con.query_one(running, &[]).unwrap().get::<_, i64>(0) == 0 {
        assert!(Instant::now() < until, "the sleep never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    cancel.cancel_query(postgres::NoTls).unwrap();
    let error = sleeper.join().unwrap();
    assert_eq!(error.code(), Some(&postgres::error::SqlState::QUERY_CANCELED));
    let seen = proxy.observed();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].error.as_deref(), Some("57014: canceling statement due to user request"));
}

#[test]
fn a_long_result_is_kept_to_its_cap_and_a_dropped_proxy_closes_its_connections() {
    let Some(server) = support::postgres::cluster("pgproxy-cap") else { return };
    let proxy = proxy(&server, "I", Arc::new(PgOpen));
    let mut client = through(&proxy);
    let rows = client.query("SELECT generate_series(1, 1500)::bigint", &[]).unwrap();
    assert_eq!(rows.len(), 1500, "every row passed on");
    let seen = proxy.observed();
    assert_eq!(seen[0].tag.as_deref(), Some("SELECT 1500"));
    assert_eq!(seen[0].rows.len(), fencesim::live::pgproxy::MAX_ROWS);
    assert_eq!(seen[0].rows.last(), Some(&some(&["1000"])));
    drop(proxy);
    assert!(client.batch_execute("SELECT 1").is_err(), "the connection was shut");
}
