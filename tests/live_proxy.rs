//! The recording proxy between a party and a real redis-server: what the party sends and
//! gets passes unchanged, each request is recorded with its reply and times, a gate holds a
//! request until it is released, and a TLS handshake is closed and said. Needs
//! redis-server; without it the test says loudly that it skipped, and with `CI` set fails.

mod support;

use fencesim::live::proxy::{Gate, Open, RedisProxy};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use support::redis_server;

fn client(proxy: &RedisProxy) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap()
}

#[test]
fn what_a_party_sends_passes_unchanged_and_is_recorded_with_its_reply() {
    let Some(server) = redis_server::start("proxy_records") else { return };
    let proxy = RedisProxy::start(&format!("127.0.0.1:{}", server.port), "A", Arc::new(Open)).unwrap();
    let mut con = client(&proxy);
    let taken: bool = redis::cmd("SET")
        .arg("lock:settle:m_1")
        .arg("A#1")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(&mut con)
        .map(|r: Option<String>| r.is_some())
        .unwrap();
    assert!(taken);
    let token: i64 = redis::cmd("INCR").arg("fence:settle:m_1").query(&mut con).unwrap();
    let script =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    let released: i64 =
        redis::cmd("EVAL").arg(script).arg(1).arg("lock:settle:m_1").arg("A#1").query(&mut con).unwrap();
    let (a, b): (i64, i64) = redis::pipe().cmd("INCR").arg("n").cmd("INCR").arg("n").query(&mut con).unwrap();
    assert_eq!((token, released, a, b), (1, 1, 1, 2), "the replies passed unchanged");
    let seen = proxy.observed();
    let told: Vec<(&str, &str)> = seen
        .iter()
        .filter(|o| !o.request.starts_with("CLIENT"))
        .map(|o| (o.request.as_str(), o.reply.as_str()))
        .collect();
    assert_eq!(
        told,
        [
            ("SET lock:settle:m_1 A#1 NX PX 30000", "OK"),
            ("INCR fence:settle:m_1", "1"),
            (&*format!("EVAL {script} 1 lock:settle:m_1 A#1"), "1"),
            ("INCR n", "1"),
            ("INCR n", "2"),
        ]
    );
    assert!(seen.iter().all(|o| o.party == "A" && o.connection == 1 && o.sent_us <= o.answered_us));
    assert!(seen.windows(2).all(|w| w[0].nth < w[1].nth && w[0].answered_us <= w[1].sent_us), "in order");
}

/// Holds the party's request that sets the value `second` until it is released.
struct HoldSecond {
    released: Mutex<bool>,
    wake: Condvar,
}

impl Gate for HoldSecond {
    fn pass(&self, _party: &str, _nth: u64, request: &str) -> bool {
        if request.ends_with(" second") {
            let mut released = self.released.lock().unwrap();
            while !*released {
                released = self.wake.wait(released).unwrap();
            }
        }
        true
    }
}

#[test]
fn a_held_request_reaches_the_server_only_when_released() {
    let Some(server) = redis_server::start("proxy_holds") else { return };
    let gate = Arc::new(HoldSecond { released: Mutex::new(false), wake: Condvar::new() });
    let proxy = RedisProxy::start(&format!("127.0.0.1:{}", server.port), "B", gate.clone()).unwrap();
    let port = proxy.port;
    let asked = std::thread::spawn(move || {
        let mut con =
            redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("SET").arg("k").arg("first").query(&mut con).unwrap();
        let _: () = redis::cmd("SET").arg("k").arg("second").query(&mut con).unwrap();
    });
    let mut direct =
        redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap().get_connection().unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let value =
        |con: &mut redis::Connection| redis::cmd("GET").arg("k").query::<Option<String>>(con).unwrap();
    while value(&mut direct).is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(value(&mut direct).as_deref(), Some("first"), "the second is held");
    *gate.released.lock().unwrap() = true;
    gate.wake.notify_all();
    asked.join().unwrap();
    assert_eq!(value(&mut direct).as_deref(), Some("second"), "released, it went on");
}

/// Refuses the party's request that sets the value `second`: its process was killed
/// right before it.
struct KillAtSecond;

impl Gate for KillAtSecond {
    fn pass(&self, _party: &str, _nth: u64, request: &str) -> bool {
        !request.ends_with(" second")
    }
}

/// A request whose party a crash killed right before it never reaches the server: its
/// connection ends without it.
#[test]
fn a_refused_request_never_reaches_the_server() {
    let Some(server) = redis_server::start("proxy_refuses") else { return };
    let proxy =
        RedisProxy::start(&format!("127.0.0.1:{}", server.port), "A", Arc::new(KillAtSecond)).unwrap();
    let mut con =
        redis::Client::open(format!("redis://127.0.0.1:{}/", proxy.port)).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("first").query(&mut con).unwrap();
    let refused = redis::cmd("SET").arg("k").arg("second").query::<()>(&mut con);
    assert!(refused.is_err(), "the connection ends: {refused:?}");
    let mut direct =
        redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap().get_connection().unwrap();
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut direct).unwrap();
    assert_eq!(value.as_deref(), Some("first"), "the refused request did nothing");
    let seen: Vec<String> =
        proxy.observed().into_iter().map(|o| o.request).filter(|r| !r.starts_with("CLIENT")).collect();
    assert_eq!(seen, ["SET k first"], "only the request that went on is recorded");
}

#[test]
fn a_party_that_speaks_tls_is_closed_and_said_so() {
    let Some(server) = redis_server::start("proxy_tls") else { return };
    let proxy = RedisProxy::start(&format!("127.0.0.1:{}", server.port), "C", Arc::new(Open)).unwrap();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
    std::io::Write::write_all(&mut stream, &[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]).unwrap();
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut stream, &mut rest);
    assert!(rest.is_empty(), "closed without an answer");
    let seen = proxy.observed();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].request, "(a TLS handshake)");
    assert!(seen[0].reply.contains("plain RESP"), "{}", seen[0].reply);
}

/// The server going away (a restart of the plan) ends the party's connection too, so that
/// its client sees the connection lost and makes a new one, as it would without a proxy,
/// instead of waiting for an answer that never comes.
#[test]
fn a_server_that_goes_away_ends_the_partys_connection() {
    let Some(server) = redis_server::start("proxy_server_gone") else { return };
    let proxy = RedisProxy::start(&format!("127.0.0.1:{}", server.port), "A", Arc::new(Open)).unwrap();
    let mut con = client(&proxy);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    // SAFETY: a signal to the test's own redis-server.
    unsafe { libc::kill(server.pid(), libc::SIGKILL) };
    con.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let lost = redis::cmd("GET").arg("k").query::<Option<String>>(&mut con).unwrap_err();
    assert!(!lost.is_timeout(), "the connection ended rather than hung: {lost:?}");
    assert!(lost.is_io_error() || lost.is_connection_dropped(), "{lost:?}");
}
