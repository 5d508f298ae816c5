//! The model's refund store over a real database file shared by every worker process,
//! each with its own connection. Every statement records what it did, as the simulated
//! store's adapter does.

use crate::live::log::EventLog;
use fencesim_model::{
    BackendError, MerchantId, RefundId, RefundRow, RefundStore, SqliteRefunds, Token, WorkerId, WriteGuard,
    WriteKind, WriteOutcome,
};
use fencesim_sim::EventKind;
use std::sync::Arc;

#[derive(Clone)]
pub struct LiveStore {
    pub refunds: SqliteRefunds,
    pub worker: WorkerId,
    pub log: Arc<EventLog>,
}

fn backend(e: rusqlite::Error) -> BackendError {
    BackendError(format!("database: {e}"))
}

impl LiveStore {
    async fn write(
        &self,
        write: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<WriteOutcome, BackendError> {
        let outcome = self.refunds.write(write, refund, guard).map_err(backend)?;
        let (worker, token, rows, after) = (self.worker, guard.token(), outcome.rows_updated, outcome.after);
        self.log.record(EventKind::Write { worker, epoch: None, write, refund, token, rows, after });
        tokio::task::yield_now().await;
        Ok(outcome)
    }
}

impl RefundStore for LiveStore {
    async fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, BackendError> {
        let rows = self.refunds.open_refunds(merchant).map_err(backend);
        tokio::task::yield_now().await;
        rows
    }

    async fn claim(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.write(WriteKind::Claim, refund, guard).await
    }

    async fn confirm(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.write(WriteKind::Confirm, refund, guard).await
    }

    async fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        let token = self.refunds.next_sequence_token(merchant).map_err(backend)?;
        let key = format!("fence_seq:{merchant}");
        self.log.record(EventKind::TokenIssued { worker: self.worker, key, token });
        tokio::task::yield_now().await;
        Ok(token)
    }
}
