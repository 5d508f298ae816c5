//! The second store as a worker reaches it: every request goes out on its own hop, waits
//! out the settlement ledger's latency (and any delay a fault armed for it), then runs its
//! real SQL on the ledger's own SQLite database, and the answer can be held up on its way
//! back as the refund store's can.

use super::Link;
use crate::fault::Hop;
use crate::history::EventKind;
use fencesim_model::{
    BackendError, MerchantId, Posting, RefundId, SettlementOutcome, SettlementStore, Token, WriteGuard,
};

#[derive(Clone)]
pub struct SettlementClient(pub(crate) Link);

fn backend(e: rusqlite::Error) -> BackendError {
    BackendError(e.to_string())
}

impl SettlementClient {
    async fn to_ledger(&self) {
        self.0.request(Hop::Settlement).await;
        let Link { world, worker } = &self.0;
        let delay = world.lock().faults.take_delay(*worker, Hop::Settlement);
        let latency = world.config.settlement.map_or(0, |s| s.latency_ms);
        world.clock.sleep_ms(latency + delay).await;
    }

    /// Records what the ledger did (under the world's lock, in the order it happened) and
    /// waits out the delay a fault armed for the answer.
    async fn answer_back(&self, event: impl FnOnce(Option<u32>) -> EventKind) {
        let Link { world, worker } = &self.0;
        let back = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let epoch = state.ledger.current(*worker);
            state.record(now, event(epoch));
            state.faults.take_reply_delay(*worker, Hop::Settlement)
        };
        if back > 0 {
            world.clock.sleep_ms(back).await;
        }
    }

    fn ledger(&self) -> Result<&fencesim_model::SqliteSettlement, BackendError> {
        self.0
            .world
            .settlement
            .as_ref()
            .ok_or_else(|| BackendError("this world has no settlement ledger".into()))
    }
}

impl SettlementStore for SettlementClient {
    async fn enroll(&self, merchant: MerchantId, token: Token) -> Result<SettlementOutcome, BackendError> {
        self.to_ledger().await;
        let ledger = self.ledger()?;
        let outcome = crate::sql_watch::timed(|| ledger.enroll(merchant, token)).map_err(backend)?;
        let worker = self.0.worker;
        let rows = outcome.rows_updated;
        self.answer_back(|epoch| EventKind::SettlementEnrolled { worker, epoch, merchant, token, rows })
            .await;
        Ok(outcome)
    }

    async fn posted(&self, refund: RefundId) -> Result<bool, BackendError> {
        self.to_ledger().await;
        let ledger = self.ledger()?;
        let posted = crate::sql_watch::timed(|| ledger.posted(refund)).map_err(backend)?;
        let worker = self.0.worker;
        self.answer_back(|_| EventKind::SettlementLookup { worker, refund, posted }).await;
        Ok(posted)
    }

    async fn post(&self, posting: Posting, guard: WriteGuard) -> Result<SettlementOutcome, BackendError> {
        self.to_ledger().await;
        let ledger = self.ledger()?;
        let outcome = crate::sql_watch::timed(|| ledger.post(posting, guard)).map_err(backend)?;
        let worker = self.0.worker;
        let Posting { refund, merchant, amount } = posting;
        let event = |epoch| EventKind::SettlementPosted {
            worker,
            epoch,
            refund,
            merchant,
            amount,
            token: guard.token(),
            rows: outcome.rows_updated,
            balance: outcome.balance,
        };
        self.answer_back(event).await;
        Ok(outcome)
    }
}
