//! The model's refund store over a real database shared by every worker process, each
//! with its own connection: a SQLite file, or PostgreSQL. Both run the model's own
//! statements (PostgreSQL with its placeholders). Every statement records what it did, as
//! the simulated store's adapter does.

use crate::live::clock::wall_us;
use crate::live::faults::LiveFaults;
use crate::live::log::EventLog;
use fencesim_model::{
    BackendError, MerchantId, RefundId, RefundRow, RefundStore, SequenceAdmin, SqliteRefunds, Token,
    WorkerId, WriteGuard, WriteKind, WriteOutcome,
};
use fencesim_sim::{EventKind, Hop};
use std::sync::Arc;

/// A real refund database, as a live run uses it.
pub trait Refunds: Send + Sync + 'static {
    fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, String>;
    /// A claim or a confirm, and the wall-clock microsecond it took effect at: read while
    /// the write still holds its lock, so that the writes of every process are dated in the
    /// order the database applied them (a time read after the answer could put a write
    /// after another's that it preceded).
    fn write(
        &self,
        kind: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<(WriteOutcome, u64), String>;
    fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, String>;
    fn set_sequence(&self, merchant: MerchantId, value: i64) -> Result<(), String>;
    fn all_rows(&self) -> Result<Vec<RefundRow>, String>;
    /// Empties the store and loads `rows`.
    fn load(&self, rows: &[RefundRow]) -> Result<(), String>;
    /// Adds `rows` (refunds that arrive while the run goes on).
    fn add(&self, rows: &[RefundRow]) -> Result<(), String>;
}

impl Refunds for SqliteRefunds {
    fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, String> {
        SqliteRefunds::open_refunds(self, merchant).map_err(|e| e.to_string())
    }

    fn write(
        &self,
        kind: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<(WriteOutcome, u64), String> {
        SqliteRefunds::write_then(self, kind, refund, guard, wall_us).map_err(|e| e.to_string())
    }

    fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, String> {
        SqliteRefunds::next_sequence_token(self, merchant).map_err(|e| e.to_string())
    }

    fn set_sequence(&self, merchant: MerchantId, value: i64) -> Result<(), String> {
        SqliteRefunds::set_sequence(self, merchant, value).map_err(|e| e.to_string())
    }

    fn all_rows(&self) -> Result<Vec<RefundRow>, String> {
        SqliteRefunds::all_rows(self).map_err(|e| e.to_string())
    }

    fn load(&self, rows: &[RefundRow]) -> Result<(), String> {
        self.clear().and_then(|()| self.insert(rows)).map_err(|e| e.to_string())
    }

    fn add(&self, rows: &[RefundRow]) -> Result<(), String> {
        self.insert(rows).map_err(|e| e.to_string())
    }
}

/// Where a worker finds the refund database.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreAt {
    Sqlite { file: std::path::PathBuf },
    Postgres { url: String },
}

/// A live store's sequences, where the deployment places the token counters.
pub struct Sequences<'a, R: ?Sized>(pub &'a R);

impl<R: Refunds + ?Sized> SequenceAdmin for Sequences<'_, R> {
    type Error = String;

    fn set_sequence(&self, merchant: MerchantId, value: i64) -> Result<(), String> {
        self.0.set_sequence(merchant, value)
    }
}

#[derive(Clone)]
pub struct LiveStore<R> {
    pub refunds: R,
    pub worker: WorkerId,
    pub log: Arc<EventLog>,
    pub faults: Arc<LiveFaults>,
}

fn backend(e: String) -> BackendError {
    BackendError(format!("database: {e}"))
}

/// Waits for a database call on a thread of its own, so that the worker's other task (a
/// renewal) keeps its time while the call is out, as it does in the simulation: a first
/// statement on a new PostgreSQL connection took longer than a shrunk world's renewal
/// period, and the renewal fired after the crash it had to come before.
async fn off_the_runtime<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, BackendError> {
    let done = tokio::task::spawn_blocking(call).await;
    done.unwrap_or_else(|e| Err(format!("the call did not finish: {e}"))).map_err(backend)
}

impl<R: Refunds + Clone> LiveStore<R> {
    /// A statement's answer; a refusal is recorded in the database's own words.
    fn told<T>(&self, statement: &str, answer: Result<T, BackendError>) -> Result<T, BackendError> {
        if let Err(BackendError(message)) = &answer {
            let message = message.strip_prefix("database: ").unwrap_or(message).to_owned();
            let (worker, statement) = (self.worker, statement.to_owned());
            self.log.record(EventKind::StatementFailed { worker, statement, message });
        }
        answer
    }

    async fn write(
        &self,
        write: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<WriteOutcome, BackendError> {
        self.faults.call(Hop::Database).await;
        let refunds = self.refunds.clone();
        let written = off_the_runtime(move || refunds.write(write, refund, guard)).await;
        self.faults.answered(Hop::Database).await;
        let (outcome, at_us) = self.told(fencesim_sim::history::statement_field(write), written)?;
        let (worker, token, rows, after) = (self.worker, guard.token(), outcome.rows_updated, outcome.after);
        self.log
            .record_at(at_us, EventKind::Write { worker, epoch: None, write, refund, token, rows, after });
        tokio::task::yield_now().await;
        Ok(outcome)
    }
}

impl<R: Refunds + Clone> RefundStore for LiveStore<R> {
    async fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, BackendError> {
        self.faults.call(Hop::Database).await;
        let refunds = self.refunds.clone();
        let rows = off_the_runtime(move || refunds.open_refunds(merchant)).await;
        self.faults.answered(Hop::Database).await;
        tokio::task::yield_now().await;
        self.told("statements.open-rows", rows)
    }

    async fn claim(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.write(WriteKind::Claim, refund, guard).await
    }

    async fn confirm(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.write(WriteKind::Confirm, refund, guard).await
    }

    async fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        self.faults.call(Hop::Database).await;
        let refunds = self.refunds.clone();
        let token = off_the_runtime(move || refunds.next_sequence_token(merchant)).await;
        self.faults.answered(Hop::Database).await;
        let token = self.told("statements.sequence", token)?;
        let key = format!("fence_seq:{merchant}");
        self.log.record(EventKind::TokenIssued { worker: self.worker, key, token });
        tokio::task::yield_now().await;
        Ok(token)
    }
}
