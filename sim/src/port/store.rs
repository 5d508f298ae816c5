//! The refund store as a worker reaches it: every request waits out the database latency
//! (and any delay a fault armed for it), then runs its real SQL on the shared SQLite store.

use super::Link;
use crate::fault::Hop;
use crate::history::EventKind;
use fencesim_model::{
    BackendError, MerchantId, RefundId, RefundRow, RefundStore, Token, WriteGuard, WriteKind, WriteOutcome,
};

#[derive(Clone)]
pub struct StoreClient(pub(crate) Link);

fn backend(e: rusqlite::Error) -> BackendError {
    BackendError(e.to_string())
}

impl StoreClient {
    /// Waits out the database latency and any delay a fault armed for this request.
    async fn to_database(&self) {
        self.0.request(Hop::Database).await;
        let Link { world, worker } = &self.0;
        let delay = world.lock().faults.take_delay(*worker, Hop::Database);
        world.clock.sleep_ms(world.config.db_latency_ms + delay).await;
        self.0.arrived(Hop::Database);
    }

    /// The database refused `statement`: recorded in its own words, and handed to the worker.
    fn failed(&self, statement: &str, error: rusqlite::Error) -> BackendError {
        let Link { world, worker } = &self.0;
        let message = format!("SQLite says: {error}");
        let now = world.clock.now_ms();
        let kind = EventKind::StatementFailed { worker: *worker, statement: statement.to_owned(), message };
        world.lock().record(now, kind);
        backend(error)
    }

    /// Waits out the delay a fault armed for the answer on its way back (`back`, taken
    /// under the lock the request already held).
    async fn answer_back(&self, back: u64) {
        if back > 0 {
            self.0.world.clock.sleep_ms(back).await;
        }
    }

    async fn write(
        &self,
        write: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> Result<WriteOutcome, BackendError> {
        let Link { world, worker } = &self.0;
        self.to_database().await;
        let outcome = crate::sql_watch::timed(|| world.store.write(write, refund, guard))
            .map_err(|e| self.failed(crate::history::statement_field(write), e))?;
        let back = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let epoch = state.ledger.current(*worker);
            let kind = EventKind::Write {
                worker: *worker,
                epoch,
                write,
                refund,
                token: guard.token(),
                rows: outcome.rows_updated,
                after: outcome.after,
            };
            state.record(now, kind);
            state.faults.take_reply_delay(*worker, Hop::Database)
        };
        self.answer_back(back).await;
        Ok(outcome)
    }
}

impl RefundStore for StoreClient {
    async fn open_refunds(&self, merchant: MerchantId) -> Result<Vec<RefundRow>, BackendError> {
        self.to_database().await;
        let Link { world, worker } = &self.0;
        let rows = crate::sql_watch::timed(|| world.store.open_refunds(merchant))
            .map_err(|e| self.failed("statements.open-rows", e))?;
        let back = world.lock().faults.take_reply_delay(*worker, Hop::Database);
        self.answer_back(back).await;
        Ok(rows)
    }

    async fn claim(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.write(WriteKind::Claim, refund, guard).await
    }

    async fn confirm(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.write(WriteKind::Confirm, refund, guard).await
    }

    async fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        self.to_database().await;
        let Link { world, worker } = &self.0;
        let token = crate::sql_watch::timed(|| world.store.next_sequence_token(merchant))
            .map_err(|e| self.failed("statements.sequence", e))?;
        let back = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let key = format!("fence_seq:{merchant}");
            state.record(now, EventKind::TokenIssued { worker: *worker, key, token });
            state.faults.take_reply_delay(*worker, Hop::Database)
        };
        self.answer_back(back).await;
        Ok(token)
    }
}
