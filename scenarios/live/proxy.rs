//! A loopback proxy of the project's own between one party (a worker program it does not
//! control) and a Redis server: every request and its reply pass through it whole, and it
//! records each pair with the wall-clock times it was sent on and answered, so that what a
//! party did is known from what the server saw, without the party's cooperation. Before a
//! request goes on, the proxy asks its gate: a gate that holds the request until it is
//! released is where a scheduler of requests takes hold (the open gate lets all through).
//!
//! A party that opens its connection with a TLS handshake is answered by closing it, and
//! the record says so: the proxy speaks the plain protocol only.

use crate::live::clock::wall_us;
use crate::live::resp::{parts, read_value, words};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One request a party sent and the reply it got, as the proxy saw them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    pub party: String,
    /// The party's connection, counted from 1 in the order it opened them.
    pub connection: u32,
    /// The request's number among all the party's requests, from 1.
    pub nth: u64,
    /// When the request went on to the server, and when its reply came back, in wall-clock
    /// microseconds.
    pub sent_us: u64,
    pub answered_us: u64,
    pub request: String,
    pub reply: String,
    /// The request's arguments one by one (`request` joins them with spaces).
    pub args: Vec<String>,
}

/// Where a party's request waits, if anywhere, before it goes on to the server, and where
/// its reply waits before it goes back.
pub trait Gate: Send + Sync {
    /// Returns when the party's `nth` request (`request`, in words) may go on: `true`, or
    /// `false` when the party is gone (a crash fired right before the request) and its
    /// connection ends without it.
    fn pass(&self, party: &str, nth: u64, request: &str) -> bool;

    /// Returns when the reply `observed` tells of may go back to the party: a fault that
    /// stops the party right after a reply stops it here, and the reply lands while it is
    /// stopped.
    fn replied(&self, _observed: &Observed) {}

    /// Before the proxy opens the party's connection to the server (a gate may hold it
    /// while the server is away).
    fn connecting(&self, _party: &str) {}

    /// A request `pass` let through got no reply: the server closed the connection.
    fn unanswered(&self, _party: &str) {}
}

/// The gate that lets every request through at once.
pub struct Open;

impl Gate for Open {
    fn pass(&self, _party: &str, _nth: u64, _request: &str) -> bool {
        true
    }
}

/// The byte a TLS handshake opens with.
const TLS_HANDSHAKE: u8 = 0x16;

/// What the proxy's threads share.
struct Shared {
    party: String,
    upstream: String,
    gate: Arc<dyn Gate>,
    observed: Mutex<Vec<Observed>>,
    requests: AtomicU64,
    connections: AtomicU32,
    stop: AtomicBool,
    /// The parties' open connections, shut when the proxy stops.
    open: Mutex<Vec<TcpStream>>,
}

/// A running proxy; stopped, its connections closed, when dropped.
pub struct RedisProxy {
    pub port: u16,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl RedisProxy {
    /// Listens on a free port of 127.0.0.1 for `party`, and relays to the server at
    /// `upstream` (`host:port`) through `gate`.
    pub fn start(upstream: &str, party: &str, gate: Arc<dyn Gate>) -> io::Result<RedisProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            party: party.to_owned(),
            upstream: upstream.to_owned(),
            gate,
            observed: Mutex::default(),
            requests: AtomicU64::new(0),
            connections: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            open: Mutex::default(),
        });
        let accepting = shared.clone();
        let thread = std::thread::spawn(move || accept(&listener, &accepting));
        Ok(RedisProxy { port, shared, thread: Some(thread) })
    }

    /// Everything the party sent so far, in the order the replies came back.
    pub fn observed(&self) -> Vec<Observed> {
        self.shared.observed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for RedisProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // wakes the accepting thread, which then sees the stop
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        for stream in self.shared.open.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        if let Ok(kept) = client.try_clone() {
            shared.open.lock().unwrap_or_else(|p| p.into_inner()).push(kept);
        }
        let connection = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
        let shared = shared.clone();
        std::thread::spawn(move || {
            let closing = client.try_clone();
            let _ = relay(client, connection, &shared);
            // the party's connection ends with the server's (a restart): the clone kept for
            // the proxy's own end would otherwise hold it open, the party waiting for ever
            if let Ok(client) = closing {
                let _ = client.shutdown(Shutdown::Both);
            }
        });
    }
}

/// Relays one connection, a request then its reply, until either side closes it.
fn relay(client: TcpStream, connection: u32, shared: &Shared) -> io::Result<()> {
    let mut from_client = BufReader::new(client.try_clone()?);
    if from_client.fill_buf()?.first() == Some(&TLS_HANDSHAKE) {
        shared.record(
            connection,
            0,
            "(a TLS handshake)".into(),
            "(closed: the proxy speaks plain RESP)".into(),
        );
        return client.shutdown(Shutdown::Both);
    }
    shared.gate.connecting(&shared.party);
    let server = TcpStream::connect(&shared.upstream)?;
    let (mut to_client, mut to_server) = (client, server.try_clone()?);
    let mut from_server = BufReader::new(server);
    while let Some(request) = read_value(&mut from_client)? {
        let nth = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let args = parts(&request);
        let asked = args.join(" ");
        if !shared.gate.pass(&shared.party, nth, &asked) {
            return to_client.shutdown(Shutdown::Both);
        }
        let sent_us = wall_us();
        let answer = to_server.write_all(&request).and_then(|()| read_value(&mut from_server));
        let reply = match answer {
            Ok(Some(reply)) => reply,
            Ok(None) | Err(_) => {
                shared.gate.unanswered(&shared.party);
                return Err(io::Error::other("the server closed"));
            }
        };
        let answered_us = wall_us();
        let observed = Observed {
            party: shared.party.clone(),
            connection,
            nth,
            sent_us,
            answered_us,
            request: asked,
            reply: words(&reply),
            args,
        };
        shared.gate.replied(&observed);
        shared.observed.lock().unwrap_or_else(|p| p.into_inner()).push(observed);
        to_client.write_all(&reply)?;
    }
    Ok(())
}

impl Shared {
    fn record(&self, connection: u32, nth: u64, request: String, reply: String) {
        let now = wall_us();
        let observed = Observed {
            party: self.party.clone(),
            connection,
            nth,
            sent_us: now,
            answered_us: now,
            args: vec![request.clone()],
            request,
            reply,
        };
        self.observed.lock().unwrap_or_else(|p| p.into_inner()).push(observed);
    }
}
