//! Planting a mutant: a wiring of the worker's ports in which one port (or one statement,
//! or the Redis start-up routine) has the bug. Every other port is the model's own.

use super::Mutant;
use fencesim_model::{
    BackendError, Cents, Clock, Delivery, Gateway, GatewayError, IdempotencyKey, JobQueue, LeaseClient,
    LeaseStore, MerchantId, Receipt, RedisInstance, RefundId, RefundStore, SettlementStatements, Statements,
    Token, TokenClient, TokenSource, WorkerId, WriteGuard, WriteOutcome,
};
use fencesim_sim::port::{
    ClockClient, GatewayClient, QueueClient, RedisClient, SettlementClient, StoreClient,
};
use fencesim_sim::{Connections, Wired, WiredOf, Wiring};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// The wiring with `0` planted.
pub struct Planted(pub Mutant);

/// The right statement with one predicate rewritten; the rewrite must change it.
fn rewrite(right: &'static str, from: &str, to: &str) -> String {
    assert!(right.contains(from), "the planted predicate `{from}` is in the statement");
    right.replace(from, to)
}

static CLAIM_FENCE_AT_MOST: LazyLock<String> =
    LazyLock::new(|| rewrite(Statements::SQLITE.claim_fenced, "fence < ?1", "fence <= ?1"));
static CLAIM_ACCEPTS_SENT: LazyLock<String> = LazyLock::new(|| {
    rewrite(Statements::SQLITE.claim_fenced, "('pending', 'sending')", "('pending', 'sending', 'sent')")
});
static FENCE_COMPARED_AS_TEXT: LazyLock<String> = LazyLock::new(|| {
    rewrite(Statements::SQLITE.claim_fenced, "fence < ?1", "CAST(fence AS TEXT) < CAST(?1 AS TEXT)")
});
static CONFIRM_FENCE_AT_LEAST: LazyLock<String> =
    LazyLock::new(|| rewrite(Statements::SQLITE.confirm_fenced, "fence = ?1", "fence >= ?1"));
static CONFIRM_WITHOUT_FENCE: LazyLock<String> =
    LazyLock::new(|| rewrite(Statements::SQLITE.confirm_fenced, "fence = ?1", "?1 = ?1"));
static POSTING_WITHOUT_FENCE: LazyLock<String> =
    LazyLock::new(|| rewrite(SettlementStatements::SQLITE.balance_fenced, "fence <= ?1", "?1 = ?1"));

impl Wiring for Planted {
    type Lease = PlantedLease<LeaseClient<PlantedRedis, ClockClient>>;
    type Tokens = PlantedTokens<TokenClient<PlantedRedis, StoreClient>>;
    type Store = PlantedStore;
    type Gateway = PlantedGateway;
    type Queue = PlantedQueue;
    type Settlement = SettlementClient;

    fn wire(&self, connections: Connections) -> WiredOf<Self> {
        let mutant = self.0;
        let acquisitions = Arc::new(AtomicU32::new(0));
        let redis = connections.redis.iter().map(|r| PlantedRedis { inner: r.clone(), mutant }).collect();
        let lease = PlantedLease {
            inner: connections.lease_over(redis),
            mutant,
            acquisitions: acquisitions.clone(),
            clock: connections.clock.clone(),
            deadlines: Mutex::new(BTreeMap::new()),
        };
        let counter = PlantedRedis { inner: connections.redis[0].clone(), mutant };
        let tokens = connections.tokens_over(counter, connections.store.clone());
        let tokens = PlantedTokens { inner: tokens, mutant, kept: Mutex::new(BTreeMap::new()) };
        let store = PlantedStore {
            inner: connections.store,
            ignore_row_count: mutant == Mutant::ClaimRowCountIgnored,
        };
        let gateway = PlantedGateway {
            inner: connections.gateway,
            mutant,
            worker: connections.worker,
            acquisitions,
            calls: Mutex::new(BTreeMap::new()),
            missed: Mutex::new(BTreeSet::new()),
        };
        let queue = PlantedQueue { inner: connections.queue, ack_on_receive: mutant == Mutant::AckOnReceive };
        Wired { lease, tokens, store, gateway, queue, settlement: connections.settlement }
    }

    fn statements(&self) -> Statements {
        let right = Statements::SQLITE;
        match self.0 {
            Mutant::ClaimFenceAtMost => Statements { claim_fenced: &CLAIM_FENCE_AT_MOST, ..right },
            Mutant::ClaimAcceptsSent => Statements { claim_fenced: &CLAIM_ACCEPTS_SENT, ..right },
            Mutant::FenceComparedAsText => Statements { claim_fenced: &FENCE_COMPARED_AS_TEXT, ..right },
            Mutant::ConfirmFenceAtLeast => Statements { confirm_fenced: &CONFIRM_FENCE_AT_LEAST, ..right },
            Mutant::ConfirmWithoutFence => Statements { confirm_fenced: &CONFIRM_WITHOUT_FENCE, ..right },
            Mutant::ClaimRowCountIgnored
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::ExtendRecreates
            | Mutant::NoReseedAfterRestart
            | Mutant::KeyPerAttempt
            | Mutant::AckOnReceive
            | Mutant::ReleaseByGetThenDel
            | Mutant::AcquireSetnxThenPexpire
            | Mutant::ExtendTtlAsSeconds
            | Mutant::TokenWrapsAt32Bits
            | Mutant::RenewalIgnoresResult
            | Mutant::TimeoutTakenAsFailure
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey
            | Mutant::ExpiryJudgedOnClientClock
            | Mutant::SubsecondTtlTruncated
            | Mutant::PostingWithoutFence
            | Mutant::WaitAnswerIgnored
            | Mutant::LookupMissMintsNewKey => right,
        }
    }

    fn settlement_statements(&self) -> SettlementStatements {
        let right = SettlementStatements::SQLITE;
        match self.0 {
            Mutant::PostingWithoutFence => {
                SettlementStatements { balance_fenced: &POSTING_WITHOUT_FENCE, ..right }
            }
            Mutant::ClaimFenceAtMost
            | Mutant::ConfirmFenceAtLeast
            | Mutant::ConfirmWithoutFence
            | Mutant::ClaimRowCountIgnored
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::ExtendRecreates
            | Mutant::NoReseedAfterRestart
            | Mutant::KeyPerAttempt
            | Mutant::ClaimAcceptsSent
            | Mutant::AckOnReceive
            | Mutant::ReleaseByGetThenDel
            | Mutant::AcquireSetnxThenPexpire
            | Mutant::ExtendTtlAsSeconds
            | Mutant::FenceComparedAsText
            | Mutant::TokenWrapsAt32Bits
            | Mutant::RenewalIgnoresResult
            | Mutant::TimeoutTakenAsFailure
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey
            | Mutant::ExpiryJudgedOnClientClock
            | Mutant::SubsecondTtlTruncated
            | Mutant::WaitAnswerIgnored
            | Mutant::LookupMissMintsNewKey => right,
        }
    }

    fn start_routine(&self) -> bool {
        self.0 != Mutant::NoReseedAfterRestart
    }
}

/// A Redis connection with its scripts written wrong: under `extend-recreates` the renewal
/// sets a missing key again, under `extend-ttl-ms-as-seconds` it re-arms a thousand times
/// too long; under `release-by-get-then-del` the release is two commands, and under
/// `acquire-setnx-then-pexpire` so is the acquisition; under `wait-answer-ignored` a
/// `WAIT` is sent and whatever it answers is taken as every replica's acknowledgement.
pub struct PlantedRedis {
    inner: RedisClient,
    mutant: Mutant,
}

impl RedisInstance for PlantedRedis {
    async fn set_nx_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        // the bug: whole seconds, and an expiry of 0 deletes the key (as the report describes)
        let truncated = self.mutant == Mutant::SubsecondTtlTruncated;
        let ttl_ms = if truncated { ttl_ms / 1_000 * 1_000 } else { ttl_ms };
        if self.mutant != Mutant::AcquireSetnxThenPexpire && !(truncated && ttl_ms == 0) {
            return self.inner.set_nx_px(key, value, ttl_ms).await;
        }
        let taken = self.inner.set_nx(key, value).await?;
        if taken {
            self.inner.pexpire(key, ttl_ms).await?;
        }
        Ok(taken)
    }

    async fn get(&self, key: &str) -> Result<Option<String>, BackendError> {
        self.inner.get(key).await
    }

    async fn del(&self, key: &str) -> Result<bool, BackendError> {
        self.inner.del(key).await
    }

    async fn incr(&self, key: &str) -> Result<i64, BackendError> {
        self.inner.incr(key).await
    }

    async fn compare_and_delete(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        if self.mutant != Mutant::ReleaseByGetThenDel {
            return self.inner.compare_and_delete(key, value).await;
        }
        // the bug: the key can change hands between the check and the delete
        if self.inner.get(key).await?.as_deref() != Some(value) {
            return Ok(false);
        }
        self.inner.del(key).await
    }

    async fn compare_and_extend(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let ttl_ms = if self.mutant == Mutant::ExtendTtlAsSeconds { ttl_ms * 1_000 } else { ttl_ms };
        let extended = self.inner.compare_and_extend(key, value, ttl_ms).await.unwrap_or(false);
        // the bug: a missing key is simply set again
        let recreated = !extended
            && self.mutant == Mutant::ExtendRecreates
            && self.inner.get(key).await.unwrap_or(None).is_none()
            && self.inner.set_px(key, value, ttl_ms).await.is_ok();
        Ok(extended || recreated)
    }

    async fn wait_replicas(&self, timeout_ms: u64) -> Result<bool, BackendError> {
        let answer = self.inner.wait_replicas(timeout_ms).await;
        // the bug: the WAIT is sent, its count (or its failure) is never looked at
        if self.mutant == Mutant::WaitAnswerIgnored {
            return Ok(true);
        }
        answer
    }
}

/// The lease, under `shared-lock-value` with one value for every worker, under
/// `release-with-del` given back with a plain `DEL`, under `expiry-judged-on-client-clock`
/// held until the worker's own clock says the TTL is over. Counts acquisitions for the
/// gateway's per-attempt key.
pub struct PlantedLease<L> {
    inner: L,
    mutant: Mutant,
    acquisitions: Arc<AtomicU32>,
    clock: ClockClient,
    /// When each lease (key, value) runs out by the worker's own reckoning.
    deadlines: Mutex<BTreeMap<(String, String), u64>>,
}

impl<L> PlantedLease<L> {
    fn value<'a>(&self, value: &'a str) -> &'a str {
        if self.mutant == Mutant::SharedLockValue {
            "worker"
        } else {
            value
        }
    }
}

impl<L: LeaseStore + Sync> LeaseStore for PlantedLease<L> {
    async fn acquire(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        let asked_at = self.clock.now_ms();
        let taken = self.inner.acquire(key, self.value(value), ttl_ms).await?;
        if taken {
            self.reckon(key, value, asked_at + ttl_ms);
        }
        Ok(taken)
    }

    async fn release(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        if self.mutant == Mutant::ReleaseWithDel {
            return self.inner.delete(key).await;
        }
        self.inner.release(key, self.value(value)).await
    }

    async fn delete(&self, key: &str) -> Result<bool, BackendError> {
        self.inner.delete(key).await
    }

    async fn extend(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let asked_at = self.clock.now_ms();
        let extended = self.inner.extend(key, self.value(value), ttl_ms).await;
        if extended == Ok(true) {
            self.reckon(key, value, asked_at + ttl_ms);
        }
        if self.mutant == Mutant::RenewalIgnoresResult {
            // the bug: the script's 0 is never looked at
            return extended.map(|_| true);
        }
        extended
    }

    async fn confirm_held(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        self.inner.confirm_held(key, self.value(value)).await
    }

    async fn holds(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        if self.mutant == Mutant::ExpiryJudgedOnClientClock {
            // the bug: the worker's own reckoning stands in for asking Redis
            let deadlines = self.deadlines.lock().unwrap_or_else(|p| p.into_inner());
            let deadline = deadlines.get(&(key.to_owned(), value.to_owned())).copied();
            return Ok(deadline.is_some_and(|d| self.clock.now_ms() < d));
        }
        self.inner.holds(key, self.value(value)).await
    }
}

impl<L> PlantedLease<L> {
    /// Notes when the lease runs out by the worker's own clock (only the mutant that
    /// judges by it keeps the notes).
    fn reckon(&self, key: &str, value: &str, deadline_ms: u64) {
        if self.mutant != Mutant::ExpiryJudgedOnClientClock {
            return;
        }
        let mut deadlines = self.deadlines.lock().unwrap_or_else(|p| p.into_inner());
        deadlines.insert((key.to_owned(), value.to_owned()), deadline_ms);
    }
}

/// Tokens, under `token-per-job` kept per merchant's job and under `token-per-worker` kept
/// once for every batch, instead of taken anew for each acquisition.
pub struct PlantedTokens<T> {
    inner: T,
    mutant: Mutant,
    /// Keyed by merchant under `token-per-job`, by nothing under `token-per-worker`.
    kept: Mutex<BTreeMap<Option<MerchantId>, Token>>,
}

impl<T: TokenSource + Sync> TokenSource for PlantedTokens<T> {
    async fn next_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        if self.mutant == Mutant::TokenWrapsAt32Bits {
            // the bug: the token is kept in a signed 32-bit integer
            return self.inner.next_token(merchant).await.map(|token| Token(i64::from(token.0 as i32)));
        }
        let slot = if self.mutant == Mutant::TokenPerJob {
            Some(merchant)
        } else if self.mutant == Mutant::TokenPerWorker {
            None
        } else {
            // every other mutant takes a token per acquisition, as the model does
            return self.inner.next_token(merchant).await;
        };
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner()).get(&slot).copied();
        if let Some(token) = kept {
            return Ok(token);
        }
        let token = self.inner.next_token(merchant).await?;
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).insert(slot, token);
        Ok(token)
    }
}

/// The store, under `claim-row-count-ignored` reporting a claim that updated no row as one
/// that did.
pub struct PlantedStore {
    inner: StoreClient,
    ignore_row_count: bool,
}

impl RefundStore for PlantedStore {
    async fn open_refunds(
        &self,
        merchant: MerchantId,
    ) -> Result<Vec<fencesim_model::RefundRow>, BackendError> {
        self.inner.open_refunds(merchant).await
    }

    async fn claim(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        let mut outcome = self.inner.claim(refund, guard).await?;
        if self.ignore_row_count {
            outcome.rows_updated = outcome.rows_updated.max(1);
        }
        Ok(outcome)
    }

    async fn confirm(&self, refund: RefundId, guard: WriteGuard) -> Result<WriteOutcome, BackendError> {
        self.inner.confirm(refund, guard).await
    }

    async fn next_sequence_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        self.inner.next_sequence_token(merchant).await
    }
}

/// The gateway, under `key-per-attempt` called with a key made per acquisition instead of
/// the refund id, under `retry-mints-new-key` with a new key for each retry; under
/// `timeout-taken-as-failure` reporting a timeout as a refusal, under
/// `failure-taken-as-refunded` reporting any failed call as paid, and under
/// `lookup-miss-mints-new-key` paying a refund its lookup did not find under a new key.
pub struct PlantedGateway {
    inner: GatewayClient,
    mutant: Mutant,
    worker: WorkerId,
    acquisitions: Arc<AtomicU32>,
    /// How many refund calls this process sent for each refund.
    calls: Mutex<BTreeMap<RefundId, u32>>,
    /// The refunds this process's last lookup of found none of, not paid since.
    missed: Mutex<BTreeSet<RefundId>>,
}

impl PlantedGateway {
    fn key(&self, reference: RefundId, key: IdempotencyKey) -> IdempotencyKey {
        if self.mutant == Mutant::KeyPerAttempt {
            let attempt = self.acquisitions.load(Ordering::Relaxed);
            return IdempotencyKey(format!("{reference}/{}.{attempt}", self.worker));
        }
        if self.mutant == Mutant::LookupMissMintsNewKey {
            // the bug: "the lookup found nothing, so no call went out": a key of this call's own
            let missed = self.missed.lock().unwrap_or_else(|p| p.into_inner()).remove(&reference);
            let attempt = self.acquisitions.load(Ordering::Relaxed);
            return if missed {
                IdempotencyKey(format!("{reference}/{}.{attempt}", self.worker))
            } else {
                key
            };
        }
        if self.mutant != Mutant::RetryMintsNewKey {
            return key;
        }
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let sent = calls.entry(reference).or_default();
        *sent += 1;
        match *sent {
            1 => key,
            n => IdempotencyKey(format!("{reference}/retry-{n}")),
        }
    }
}

impl Gateway for PlantedGateway {
    async fn find(&self, reference: RefundId) -> Result<Option<Receipt>, GatewayError> {
        let found = self.inner.find(reference).await;
        if self.mutant == Mutant::LookupMissMintsNewKey {
            let mut missed = self.missed.lock().unwrap_or_else(|p| p.into_inner());
            match found {
                Ok(None) => missed.insert(reference),
                Ok(Some(_)) | Err(_) => missed.remove(&reference),
            };
        }
        found
    }

    async fn refund(
        &self,
        reference: RefundId,
        key: IdempotencyKey,
        amount: Cents,
    ) -> Result<Receipt, GatewayError> {
        let key = self.key(reference, key);
        let answer = self.inner.refund(reference, key, amount).await;
        if self.mutant == Mutant::TimeoutTakenAsFailure && answer == Err(GatewayError::Timeout) {
            return Err(GatewayError::Unavailable);
        }
        if self.mutant == Mutant::FailureTakenAsRefunded && answer.is_err() {
            return Ok(Receipt { gateway_ref: 0, amount });
        }
        answer
    }
}

/// The job queue, under `ack-on-receive` acking each delivery as it arrives.
pub struct PlantedQueue {
    inner: QueueClient,
    ack_on_receive: bool,
}

impl JobQueue for PlantedQueue {
    async fn receive(&self) -> Option<Delivery> {
        let delivery = self.inner.receive().await?;
        if self.ack_on_receive {
            self.inner.ack(delivery).await;
        }
        Some(delivery)
    }

    async fn ack(&self, delivery: Delivery) -> bool {
        self.inner.ack(delivery).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::{RefundRow, RefundState, SqliteRefunds, WriteKind};

    fn store_with(state: RefundState, fence: i64, statements: Statements) -> SqliteRefunds {
        let store = SqliteRefunds::open_in_memory().unwrap().with_statements(statements);
        let row =
            RefundRow { id: RefundId(815), merchant: MerchantId(4471), amount: Cents(7025), state, fence };
        store.insert(&[row]).unwrap();
        store
    }

    #[test]
    fn each_planted_statement_lets_through_exactly_what_the_right_one_refuses() {
        let stale = WriteGuard::Fence(Token(33));
        let cases = [
            // (mutant, state, fence, write): refused by the right statement, accepted by the mutant's
            (Mutant::ConfirmFenceAtLeast, RefundState::Sending, 34, WriteKind::Confirm),
            (Mutant::ConfirmWithoutFence, RefundState::Sending, 34, WriteKind::Confirm),
            (Mutant::ClaimFenceAtMost, RefundState::Sending, 33, WriteKind::Claim),
            (Mutant::ClaimAcceptsSent, RefundState::Sent, 3, WriteKind::Claim),
            // '100' < '33' as text
            (Mutant::FenceComparedAsText, RefundState::Sending, 100, WriteKind::Claim),
        ];
        for (mutant, state, fence, write) in cases {
            let right = store_with(state, fence, Statements::SQLITE);
            assert_eq!(right.write(write, RefundId(815), stale).unwrap().rows_updated, 0, "{mutant}");
            let wrong = store_with(state, fence, Planted(mutant).statements());
            assert_eq!(wrong.write(write, RefundId(815), stale).unwrap().rows_updated, 1, "{mutant}");
        }
    }

    #[test]
    fn only_the_sql_mutants_change_the_statements() {
        for mutant in Mutant::ALL {
            let changed = Planted(mutant).statements() != Statements::SQLITE
                || Planted(mutant).settlement_statements() != SettlementStatements::SQLITE;
            assert_eq!(changed, mutant.planted_in().contains("statement"), "{mutant}");
        }
    }

    /// The ledger's posting without its fence takes a posting whose token is older than
    /// the ledger's fence; the right statement turns it away.
    #[test]
    fn the_posting_without_its_fence_takes_a_stale_posting() {
        use fencesim_model::{Posting, SqliteSettlement};
        let posting = Posting { refund: RefundId(815), merchant: MerchantId(4471), amount: Cents(7025) };
        for (statements, rows) in [
            (SettlementStatements::SQLITE, 0),
            (Planted(Mutant::PostingWithoutFence).settlement_statements(), 1),
        ] {
            let ledger = SqliteSettlement::open_in_memory().unwrap().with_statements(statements);
            ledger.enroll(MerchantId(4471), Token(34)).unwrap();
            assert_eq!(ledger.post(posting, WriteGuard::Fence(Token(33))).unwrap().rows_updated, rows);
        }
    }
}
