//! What one connection of the PostgreSQL recording proxy (`pgproxy`) has prepared, and
//! what it waits for: the statements and portals the client named, and the requests the
//! server is yet to answer, in the order they went on. The server answers in that order,
//! so each completion, error and row it sends is matched here to the statement that asked
//! for it, and becomes that statement's record (what is recorded, and when, is told in
//! `pgproxy`).

use crate::live::clock::wall_us;
use crate::live::pgproxy::PgObserved;
use crate::live::pgwire::{
    backend, format_of, frontend, value_text, Backend, Bind, Column, Frontend, Message,
};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The most rows of one statement's result a record keeps.
pub const MAX_ROWS: usize = 1000;

/// The error of a statement the server skipped because an earlier one of its batch failed.
pub const SKIPPED: &str = "skipped after an earlier error";

/// The error of a statement still waiting for its answer when the server closed.
pub const UNANSWERED: &str = "(no answer: the server closed the connection)";

/// What a connection has prepared and what it waits for.
pub(crate) struct Session {
    party: String,
    connection: u32,
    /// The party's statements so far, over all its connections.
    numbers: Arc<AtomicU64>,
    backend_pid: Option<i32>,
    /// The prepared statements by name ("" the unnamed one, replaced by each Parse of it).
    statements: HashMap<String, Arc<Statement>>,
    /// The bound portals by name, the same way.
    portals: HashMap<String, Portal>,
    /// The requests the server is yet to answer, in the order they went on.
    awaited: VecDeque<Awaited>,
}

/// A prepared statement, and the types of its parameters and columns as far as known.
struct Statement {
    sql: String,
    /// The parameter types the Parse gave (0 where it left them to the server).
    declared: Vec<u32>,
    /// What the server said of it when described.
    described: Mutex<Described>,
}

#[derive(Default)]
struct Described {
    params: Vec<u32>,
    columns: Vec<u32>,
}

impl Statement {
    fn described(&self) -> MutexGuard<'_, Described> {
        self.described.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn param_type(&self, index: usize) -> u32 {
        match self.declared.get(index) {
            Some(&declared) if declared != 0 => declared,
            _ => self.described().params.get(index).copied().unwrap_or(0),
        }
    }
}

/// A statement bound to its parameters.
#[derive(Clone)]
struct Portal {
    statement: Option<Arc<Statement>>,
    sql: String,
    params: Vec<Option<String>>,
    formats: Vec<i16>,
}

/// A request the server is yet to answer.
enum Awaited {
    /// A Describe: of the statement named, or of the one a portal named was bound from.
    Describe(Option<Arc<Statement>>),
    /// A Query or an Execute.
    Run(Run),
    /// The end of a batch, answered by ReadyForQuery.
    Sync,
}

/// A statement (or a Query's statements) running, and what came back of it so far.
pub(crate) struct Run {
    /// Its number, given before it went on; `None` for a Query's further statements,
    /// numbered when they complete.
    pub nth: Option<u64>,
    /// Sent as a Query (the simple protocol).
    simple: bool,
    pub sql: String,
    pub params: Vec<Option<String>>,
    sent_us: u64,
    statement: Option<Arc<Statement>>,
    /// The result's format codes and column types, once known.
    formats: Vec<i16>,
    columns: Vec<u32>,
    rows: Vec<Vec<Option<String>>>,
}

impl Run {
    fn push_row(&mut self, values: &[Option<Vec<u8>>]) {
        if self.rows.len() >= MAX_ROWS {
            return;
        }
        let columns = match (&self.statement, self.columns.is_empty()) {
            (Some(statement), true) => statement.described().columns.clone(),
            _ => self.columns.clone(),
        };
        let row = values.iter().enumerate().map(|(i, value)| {
            value_text(value.as_deref(), format_of(&self.formats, i), columns.get(i).copied().unwrap_or(0))
        });
        self.rows.push(row.collect());
    }
}

/// What one message of the server's finished: a statement answered, or statements the
/// server skipped.
#[derive(Default)]
pub(crate) struct Answered {
    pub done: Option<PgObserved>,
    pub skipped: Vec<PgObserved>,
}

impl Session {
    /// The session of the party's connection `connection`, whose statements are counted
    /// in `numbers`.
    pub fn new(party: &str, connection: u32, numbers: Arc<AtomicU64>) -> Session {
        Session {
            party: party.to_owned(),
            connection,
            numbers,
            backend_pid: None,
            statements: HashMap::new(),
            portals: HashMap::new(),
            awaited: VecDeque::new(),
        }
    }

    /// Takes note of what a client's message prepares, binds or waits for; a request that
    /// runs a statement is returned, numbered, to go on after its hook ([`Session::sent`]).
    pub fn asked(&mut self, message: &Message) -> Option<Run> {
        match frontend(message) {
            Frontend::Query(sql) => {
                return Some(
                    self.run(Portal { statement: None, sql, params: Vec::new(), formats: Vec::new() }, true),
                )
            }
            Frontend::Parse { name, sql, types } => {
                let statement = Statement { sql, declared: types, described: Mutex::default() };
                self.statements.insert(name, Arc::new(statement));
            }
            Frontend::Bind(bind) => {
                let portal = self.bind(&bind);
                self.portals.insert(bind.portal, portal);
            }
            Frontend::Describe { what, name } => {
                let statement = match what {
                    b'S' => self.statements.get(&name).cloned(),
                    _ => self.portals.get(&name).and_then(|portal| portal.statement.clone()),
                };
                self.awaited.push_back(Awaited::Describe(statement));
            }
            Frontend::Execute { portal, .. } => {
                let bound = self.portals.get(&portal).cloned().unwrap_or_else(|| Portal {
                    statement: None,
                    sql: format!("(a portal not bound here: \"{portal}\")"),
                    params: Vec::new(),
                    formats: Vec::new(),
                });
                return Some(self.run(bound, false));
            }
            Frontend::Close { what: b'S', name } => drop(self.statements.remove(&name)),
            Frontend::Close { name, .. } => drop(self.portals.remove(&name)),
            Frontend::Sync => self.awaited.push_back(Awaited::Sync),
            Frontend::Other => {}
        }
        None
    }

    /// The next statement of the party's, about to run `portal`.
    fn run(&self, portal: Portal, simple: bool) -> Run {
        Run {
            nth: Some(self.numbers.fetch_add(1, Ordering::SeqCst) + 1),
            simple,
            sql: portal.sql,
            params: portal.params,
            sent_us: 0,
            statement: portal.statement,
            formats: portal.formats,
            columns: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// `run` goes on to the server now: its answer is awaited after everything before it.
    pub fn sent(&mut self, run: Run) {
        self.awaited.push_back(Awaited::Run(Run { sent_us: wall_us(), ..run }));
    }

    /// A portal of `bind`'s: its statement's text, and its parameters as the record shows
    /// them (by the types the Parse gave, or the server described).
    fn bind(&self, bind: &Bind) -> Portal {
        let statement = self.statements.get(&bind.statement).cloned();
        let sql = match &statement {
            Some(statement) => statement.sql.clone(),
            None => format!("(a statement not prepared here: \"{}\")", bind.statement),
        };
        let params = bind.params.iter().enumerate().map(|(i, value)| {
            let type_oid = statement.as_ref().map_or(0, |statement| statement.param_type(i));
            value_text(value.as_deref(), format_of(&bind.param_formats, i), type_oid)
        });
        let params = params.collect();
        Portal { statement, sql, params, formats: bind.result_formats.clone() }
    }

    /// Takes note of what a server's message answers: returns the statement it finished,
    /// or those the server skipped.
    pub fn answered(&mut self, message: &Message) -> Answered {
        let mut answered = Answered::default();
        match backend(message) {
            Backend::BackendKeyData { pid } => self.backend_pid = Some(pid),
            Backend::ParameterDescription(types) => {
                if let Some(Awaited::Describe(Some(statement))) = self.awaited.front() {
                    statement.described().params = types;
                }
            }
            Backend::RowDescription(columns) => self.describe_rows(&columns),
            Backend::NoData => self.describe_rows(&[]),
            Backend::DataRow(values) => {
                if let Some(run) = self.running() {
                    run.push_row(&values);
                }
            }
            Backend::CommandComplete(tag) => answered.done = self.finish(Some(tag), None),
            Backend::EmptyQuery | Backend::PortalSuspended => answered.done = self.finish(None, None),
            Backend::ErrorResponse { code, message } => {
                answered.done = self.finish(None, Some(format!("{code}: {message}")));
            }
            Backend::ReadyForQuery => answered.skipped = self.ready(),
            _ => {}
        }
        answered
    }

    /// A result's columns: of the statement a Describe asked about, or of the Query's
    /// statement whose rows follow.
    fn describe_rows(&mut self, columns: &[Column]) {
        if let Some(Awaited::Describe(statement)) = self.awaited.front() {
            if let Some(statement) = statement {
                statement.described().columns = columns.iter().map(|c| c.type_oid).collect();
            }
            self.awaited.pop_front();
        } else if let Some(run) = self.running().filter(|run| run.simple) {
            run.columns = columns.iter().map(|c| c.type_oid).collect();
            run.formats = columns.iter().map(|c| c.format).collect();
        }
    }

    /// Where the statement running waits: the first Query or Execute before the end of
    /// the batch.
    fn running_at(&self) -> Option<usize> {
        for (at, awaited) in self.awaited.iter().enumerate() {
            match awaited {
                Awaited::Run(_) => return Some(at),
                Awaited::Sync => return None,
                Awaited::Describe(_) => {}
            }
        }
        None
    }

    fn running(&mut self) -> Option<&mut Run> {
        match self.awaited.get_mut(self.running_at()?)? {
            Awaited::Run(run) => Some(run),
            _ => None,
        }
    }

    /// The statement running, finished with `tag` or `error`: an Execute is done with; a
    /// Query waits on for its further statements, and its ReadyForQuery.
    fn finish(&mut self, tag: Option<String>, error: Option<String>) -> Option<PgObserved> {
        let at = self.running_at()?;
        let Some(Awaited::Run(mut run)) = self.awaited.remove(at) else { return None };
        let observed = self.observed(&mut run, tag, error);
        if run.simple {
            self.awaited.insert(at, Awaited::Run(run));
        }
        Some(observed)
    }

    /// A batch or a Query ended: an Execute of it still waiting was skipped by the server.
    fn ready(&mut self) -> Vec<PgObserved> {
        let mut skipped = Vec::new();
        while let Some(awaited) = self.awaited.pop_front() {
            match awaited {
                Awaited::Sync => break,
                Awaited::Run(run) if run.simple => break,
                Awaited::Run(mut run) => skipped.push(self.observed(&mut run, None, Some(SKIPPED.into()))),
                Awaited::Describe(_) => {}
            }
        }
        skipped
    }

    /// The statements still waiting when the server closed (a Query whose statements are
    /// all recorded is not one).
    pub fn abandon(&mut self) -> Vec<PgObserved> {
        let awaited = std::mem::take(&mut self.awaited);
        let unanswered = awaited.into_iter().filter_map(|awaited| match awaited {
            Awaited::Run(mut run) if run.nth.is_some() => {
                Some(self.observed(&mut run, None, Some(UNANSWERED.into())))
            }
            _ => None,
        });
        unanswered.collect()
    }

    /// The record of `run` as it stands, which leaves it ready for a Query's next statement.
    fn observed(&self, run: &mut Run, tag: Option<String>, error: Option<String>) -> PgObserved {
        run.columns.clear();
        run.formats.clear();
        PgObserved {
            party: self.party.clone(),
            connection: self.connection,
            backend_pid: self.backend_pid,
            nth: run.nth.take().unwrap_or_else(|| self.numbers.fetch_add(1, Ordering::SeqCst) + 1),
            sent_us: run.sent_us,
            answered_us: wall_us(),
            sql: run.sql.clone(),
            params: run.params.clone(),
            tag,
            error,
            rows: std::mem::take(&mut run.rows),
        }
    }
}
