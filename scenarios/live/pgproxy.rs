//! A loopback proxy of the project's own between one party (a worker program it does not
//! control) and a PostgreSQL server: every message passes through it unchanged, and it
//! records each statement the server ran for the party (its text, its parameters, its tag
//! or error, its rows) with the wall-clock times it was sent on and answered, so that what
//! a party did to the database is known from what the server saw, without the party's
//! cooperation. Two hooks are where a scheduler and a fault injector take hold: one before
//! a request that runs a statement goes on, one before the statement's answer goes back;
//! either may block to hold it (the open hooks hold nothing).
//!
//! A connection is relayed by two threads, one each way, because a client may pipeline:
//! send several statements before it reads any answer. They share what the connection is
//! waiting for: the requests that run statements, in the order they went on, which the
//! server answers in that order. The client's messages are passed on in order, and the
//! server's one by one, so that each statement's request and answer can be held by itself.
//!
//! What is recorded, and when:
//! - a simple-protocol Query that holds several statements is one request (the hook before
//!   it is called once, with the number of its first statement) and one record per
//!   statement the server ran, each with the Query's whole text: the first under the
//!   number the hook saw, each further one under the next number free when it completes;
//! - in the extended protocol, a statement is run by its Execute, with the text of the
//!   Parse its Bind named and that Bind's parameters. After an error the server skips
//!   the rest of the batch, up to its Sync: the error is recorded against the first
//!   Execute of the batch still waiting (whatever failed, its Parse, its Bind or the run,
//!   that statement did not run), and every later Execute of the batch gets a record of
//!   its own with the error [`SKIPPED`] and no hook before its (absent) answer;
//! - an Execute stopped at its row limit, and an empty query, are recorded with no tag;
//! - statements still waiting when the server closes the connection are recorded with the
//!   error [`UNANSWERED`]; an error with no statement waiting (a refused Parse of a
//!   statement prepared on its own, a refused log-in) is passed on unrecorded.
//!
//! A client that asks for TLS or GSSAPI encryption is answered `N` (refused) by the proxy
//! itself, and goes on in plain text; one that opens with a TLS handshake is closed, and
//! the record says so. A request to cancel a query is passed on to the server as it came.
//! A message whose length is not PostgreSQL's closes the connection with a record that
//! says so; a connection that closes mid-message ends quietly.

use crate::live::clock::wall_us;
use crate::live::pgsession::Session;
use crate::live::pgwire::{
    is_malformed, read_message, read_startup, Message, CANCEL_REQUEST, GSSENC_REQUEST, SSL_REQUEST,
};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// One statement the server ran for a party, as the proxy saw it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PgObserved {
    pub party: String,
    /// The party's connection, counted from 1 in the order it opened them.
    pub connection: u32,
    /// The server process that ran it, as the server told the connection at log-in.
    pub backend_pid: Option<i32>,
    /// The statement's number among all the party's statements, from 1; 0 for a record
    /// of a connection refused or cut (a TLS handshake, a malformed message).
    pub nth: u64,
    /// When the request that ran it (its Query or its Execute) went on to the server, and
    /// when its completion or its error came back, in wall-clock microseconds.
    pub sent_us: u64,
    pub answered_us: u64,
    pub sql: String,
    /// The Bind's parameters (none for a Query), as [`value_text`] shows them; `None` for
    /// NULL.
    pub params: Vec<Option<String>>,
    /// The completion's tag: `UPDATE 1`, `SELECT 42`, `BEGIN`.
    pub tag: Option<String>,
    /// The server's refusal, as `SQLSTATE: message`.
    pub error: Option<String>,
    /// The rows of its result, at most [`MAX_ROWS`] (the rest are passed on unrecorded),
    /// each value as [`value_text`] shows it.
    pub rows: Vec<Vec<Option<String>>>,
}

pub use crate::live::pgsession::{MAX_ROWS, SKIPPED, UNANSWERED};

/// Where a party's statement, or its answer, waits, if anywhere.
pub trait PgHooks: Send + Sync {
    /// Returns when the request that runs the party's statement `nth` (`sql`, with
    /// `params`) may go on to the server: `true`, or `false` when the party is gone (a
    /// crash fired right before the request) and its connection ends without it.
    fn before_send(&self, party: &str, nth: u64, sql: &str, params: &[Option<String>]) -> bool;

    /// Returns when the answer to `observed` (read from the server, not yet passed on) may
    /// go back to the party.
    fn before_reply(&self, observed: &PgObserved);
}

/// The hooks that hold nothing.
pub struct PgOpen;

impl PgHooks for PgOpen {
    fn before_send(&self, _party: &str, _nth: u64, _sql: &str, _params: &[Option<String>]) -> bool {
        true
    }
    fn before_reply(&self, _observed: &PgObserved) {}
}

/// The byte a TLS handshake opens with.
const TLS_HANDSHAKE: u8 = 0x16;

/// What the proxy's threads share.
struct Shared {
    party: String,
    upstream: String,
    hooks: Arc<dyn PgHooks>,
    observed: Mutex<Vec<PgObserved>>,
    /// The party's statements so far, over all its connections.
    numbers: Arc<AtomicU64>,
    connections: AtomicU32,
    stop: AtomicBool,
    /// The open connections, the party's and the server's, by the party's connection they
    /// serve: shut when the proxy stops, forgotten when that connection ends.
    open: Mutex<Vec<(u32, TcpStream)>>,
}

/// A running proxy; stopped, its connections closed, when dropped.
pub struct PgProxy {
    pub port: u16,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl PgProxy {
    /// Listens on a free port of 127.0.0.1 for `party`, and relays to the server at
    /// `upstream` (`host:port`) through `hooks`.
    pub fn start(upstream: &str, party: &str, hooks: Arc<dyn PgHooks>) -> io::Result<PgProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            party: party.to_owned(),
            upstream: upstream.to_owned(),
            hooks,
            observed: Mutex::default(),
            numbers: Arc::default(),
            connections: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            open: Mutex::default(),
        });
        let accepting = shared.clone();
        let thread = std::thread::spawn(move || accept(&listener, &accepting));
        Ok(PgProxy { port, shared, thread: Some(thread) })
    }

    /// Every statement the party ran so far, in the order their answers came back.
    pub fn observed(&self) -> Vec<PgObserved> {
        self.shared.observed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // wakes the accepting thread, which then sees the stop
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        for (_, stream) in self.shared.open.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
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
        let number = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
        shared.keep_open(number, &client);
        let session = Mutex::new(Session::new(&shared.party, number, shared.numbers.clone()));
        let connection = Arc::new(Connection { shared: shared.clone(), number, session });
        std::thread::spawn(move || {
            let _ = connection.serve(&client);
            let _ = client.shutdown(Shutdown::Both);
            connection.shared.forget(number);
        });
    }
}

impl Shared {
    fn keep_open(&self, connection: u32, stream: &TcpStream) {
        if let Ok(kept) = stream.try_clone() {
            self.open.lock().unwrap_or_else(|p| p.into_inner()).push((connection, kept));
        }
    }

    /// Closes what is kept of an ended connection: a long run opens many.
    fn forget(&self, connection: u32) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).retain(|(kept, _)| *kept != connection);
    }

    fn keep(&self, observed: impl IntoIterator<Item = PgObserved>) {
        self.observed.lock().unwrap_or_else(|p| p.into_inner()).extend(observed);
    }

    /// Records what happened to a connection that is not a statement (numbered 0).
    fn note(&self, connection: u32, what: &str, error: &str) {
        let now = wall_us();
        self.keep([PgObserved {
            party: self.party.clone(),
            connection,
            backend_pid: None,
            nth: 0,
            sent_us: now,
            answered_us: now,
            sql: what.to_owned(),
            params: Vec::new(),
            tag: None,
            error: Some(error.to_owned()),
            rows: Vec::new(),
        }]);
    }
}

/// One client connection: what its two threads share.
struct Connection {
    shared: Arc<Shared>,
    number: u32,
    session: Mutex<Session>,
}

/// Writes to the client until it is gone; after that the server's answers are still read
/// and recorded (the statements ran), and dropped.
struct Forward {
    writer: BufWriter<TcpStream>,
    gone: bool,
}

impl Forward {
    fn write(&mut self, bytes: &[u8]) {
        self.gone = self.gone || self.writer.write_all(bytes).is_err();
    }

    fn flush(&mut self) {
        self.gone = self.gone || self.writer.flush().is_err();
    }
}

impl Connection {
    fn session(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `result`, with a record of it first when it failed on a malformed message from
    /// `whom`.
    fn noted<T>(&self, result: io::Result<T>, whom: &str) -> io::Result<T> {
        if let Err(e) = &result {
            if is_malformed(e) {
                self.shared.note(self.number, &format!("(a message from the {whom})"), &format!("({e})"));
            }
        }
        result
    }

    /// Relays the connection from its start-up to its end: the client's messages on this
    /// thread, the server's on one of their own.
    fn serve(self: &Arc<Self>, client: &TcpStream) -> io::Result<()> {
        let mut from_client = BufReader::new(client.try_clone()?);
        let started = self.start_up(client, &mut from_client);
        let Some(startup) = self.noted(started, "client")? else { return Ok(()) };
        let server = TcpStream::connect(&self.shared.upstream)?;
        self.shared.keep_open(self.number, &server);
        // what is passed on goes at once (the relays below gather messages themselves)
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        (&server).write_all(&startup.bytes)?;
        let (from_server, to_client) = (BufReader::new(server.try_clone()?), client.try_clone()?);
        let connection = self.clone();
        let answers = std::thread::spawn(move || connection.answer(from_server, to_client));
        let asked = self.relay_frontend(&mut from_client, &server);
        let asked = self.noted(asked, "client");
        // a malformed message ends the connection; else the server answers what it was sent
        let how = match &asked {
            Err(e) if is_malformed(e) => Shutdown::Both,
            _ => Shutdown::Write,
        };
        let _ = server.shutdown(how);
        let _ = answers.join();
        asked
    }

    /// Reads the client's start-up packets up to its StartupMessage, which it returns (or
    /// `None` when the connection ends first): refuses encryption itself, closes a TLS
    /// handshake, and passes a cancel request on to the server.
    fn start_up(
        &self,
        client: &TcpStream,
        from_client: &mut BufReader<TcpStream>,
    ) -> io::Result<Option<Message>> {
        loop {
            if from_client.fill_buf()?.first() == Some(&TLS_HANDSHAKE) {
                let closed = "(closed: the proxy speaks PostgreSQL's protocol in plain text only)";
                self.shared.note(self.number, "(a TLS handshake)", closed);
                return Ok(None);
            }
            let Some(packet) = read_startup(from_client)? else { return Ok(None) };
            match packet.startup_code() {
                Some(SSL_REQUEST | GSSENC_REQUEST) => {
                    let mut to_client = client;
                    to_client.write_all(b"N")?;
                }
                Some(CANCEL_REQUEST) => {
                    let mut server = TcpStream::connect(&self.shared.upstream)?;
                    server.write_all(&packet.bytes)?;
                    // the server answers nothing, and closes when it has read the request
                    io::copy(&mut server, &mut io::sink())?;
                    return Ok(None);
                }
                _ => return Ok(Some(packet)),
            }
        }
    }

    /// Passes the client's messages on in order; a request that runs a statement waits
    /// for its hook first. A Parse, a Bind, a Describe or a Close waits to go on with the
    /// message after it (the server answers them only at a Flush or a Sync, but sends an
    /// error at once): so the Parse and Bind of an Execute go on with it, after its hook,
    /// and an error in them is surely that Execute's. Anything else goes on as soon as the
    /// client has sent nothing more.
    fn relay_frontend(
        &self,
        from_client: &mut BufReader<TcpStream>,
        mut to_server: &TcpStream,
    ) -> io::Result<()> {
        let mut held = Vec::new();
        while let Some(message) = read_message(from_client)? {
            let asked = self.session().asked(&message);
            if let Some(run) = &asked {
                let nth = run.nth.unwrap_or_default();
                if !self.shared.hooks.before_send(&self.shared.party, nth, &run.sql, &run.params) {
                    return Ok(());
                }
            }
            held.extend_from_slice(&message.bytes);
            let waits = match &asked {
                Some(_) => false,
                None => matches!(message.kind, b'P' | b'B' | b'D' | b'C') || !from_client.buffer().is_empty(),
            };
            if let Some(run) = asked {
                self.session().sent(run);
            }
            if !waits {
                to_server.write_all(&held)?;
                held.clear();
            }
        }
        to_server.write_all(&held)
    }

    /// Relays the server's messages until it closes, then closes the client's connection
    /// too: what was still waiting for an answer is recorded as unanswered.
    fn answer(&self, mut from_server: BufReader<TcpStream>, to_client: TcpStream) {
        let mut to_client = Forward { writer: BufWriter::new(to_client), gone: false };
        let answered = self.relay_backend(&mut from_server, &mut to_client);
        if self.noted(answered, "server").is_err() {
            let _ = from_server.get_ref().shutdown(Shutdown::Both);
        }
        let unanswered = self.session().abandon();
        self.shared.keep(unanswered);
        to_client.flush();
        let _ = to_client.writer.get_ref().shutdown(Shutdown::Both);
    }

    /// Passes the server's messages on, one by one; a statement's answer waits for its
    /// hook first, with everything the server sent before it already passed on.
    fn relay_backend(
        &self,
        from_server: &mut BufReader<TcpStream>,
        to_client: &mut Forward,
    ) -> io::Result<()> {
        while let Some(message) = read_message(from_server)? {
            let answered = self.session().answered(&message);
            if let Some(done) = &answered.done {
                to_client.flush();
                self.shared.hooks.before_reply(done);
            }
            self.shared.keep(answered.skipped.into_iter().chain(answered.done));
            to_client.write(&message.bytes);
            if from_server.buffer().is_empty() {
                to_client.flush();
            }
        }
        Ok(())
    }
}
