//! The ports with a planted bug: each wraps the port a worker would have had (simulated
//! or live) and does what the bug does, and nothing else differs.

use super::Mutant;
use fencesim_model::{
    BackendError, Cents, Clock, Delivery, Gateway, GatewayError, IdempotencyKey, JobQueue, LeaseStore,
    MerchantId, Receipt, RedisInstance, RefundId, RefundStore, Token, TokenSource, WorkerId, WriteGuard,
    WriteOutcome,
};
use fencesim_sim::port::{ClockClient, GatewayClient, QueueClient, RedisClient, StoreClient};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// What one planted port tells another in the same process: a bug that spans two ports
/// (the gateway's answer deciding what the store, the ledger or the queue then does).
#[derive(Default)]
pub struct Told {
    /// A refund's outcome was left unknown: the queue acks the delivery in hand
    /// (`unknown-outcome-acked`).
    pub(super) parked: AtomicBool,
    /// Refunds a recovery's lookup found none of (`lookup-miss-skips-ledger-check`).
    pub(super) missed_in_recovery: Mutex<BTreeSet<RefundId>>,
    /// Requests the gateway refused in a row: as many as a worker tries give a batch up
    /// for the gateway being down (`outage-release-by-del`).
    pub(super) refused_in_a_row: AtomicU32,
}

impl Told {
    pub(super) fn set(set: &Mutex<BTreeSet<RefundId>>) -> std::sync::MutexGuard<'_, BTreeSet<RefundId>> {
        set.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The commands a planted bug sends that the model's protocol never does: a `SET` without
/// `NX` or without a TTL, and a `PEXPIRE` of whatever the key holds.
pub trait RawRedis: RedisInstance {
    /// `SETNX key value`: the key taken with no expiry.
    fn set_nx(&self, key: &str, value: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// `PEXPIRE key ttl`: whoever holds the key.
    fn pexpire(&self, key: &str, ttl_ms: u64) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// `SET key value PX ttl`: whoever holds the key, it is this value's now.
    fn set_px(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
}

impl RawRedis for RedisClient {
    async fn set_nx(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        RedisClient::set_nx(self, key, value).await
    }

    async fn pexpire(&self, key: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        RedisClient::pexpire(self, key, ttl_ms).await
    }

    async fn set_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<(), BackendError> {
        RedisClient::set_px(self, key, value, ttl_ms).await
    }
}

/// A Redis connection with its scripts written wrong: under `extend-recreates` the renewal
/// sets a missing key again, under `extend-ttl-ms-as-seconds` it re-arms a thousand times
/// too long; under `release-by-get-then-del` the release is two commands, and under
/// `acquire-setnx-then-pexpire` so is the acquisition; under `wait-answer-ignored` a
/// `WAIT` is sent and whatever it answers is taken as every replica's acknowledgement.
pub struct PlantedRedis<R = RedisClient> {
    pub(super) inner: R,
    pub(super) mutant: Mutant,
}

impl<R: RawRedis + Sync> RedisInstance for PlantedRedis<R> {
    async fn set_nx_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        // the bug: whole seconds, and an expiry of 0 deletes the key (as the report describes)
        let truncated = self.mutant == Mutant::SubsecondTtlTruncated;
        let ttl_ms = if truncated { ttl_ms / 1_000 * 1_000 } else { ttl_ms };
        if self.mutant == Mutant::RefusedInstanceCounted {
            // the bug: an instance that did not answer "may have taken it", and is counted
            return Ok(self.inner.set_nx_px(key, value, ttl_ms).await.unwrap_or(true));
        }
        if self.mutant != Mutant::AcquireSetnxThenPexpire && !(truncated && ttl_ms == 0) {
            return self.inner.set_nx_px(key, value, ttl_ms).await;
        }
        let taken = self.inner.set_nx(key, value).await?;
        if taken {
            self.inner.pexpire(key, ttl_ms).await?;
        }
        Ok(taken)
    }

    async fn acquire_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<bool, BackendError> {
        self.inner.acquire_script(script, key, value, ttl_ms).await
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

    async fn release_script(&self, script: &str, key: &str, value: &str) -> Result<bool, BackendError> {
        if self.mutant != Mutant::ReleaseByGetThenDel {
            return self.inner.release_script(script, key, value).await;
        }
        // the bug: the key can change hands between the check and the delete
        if self.inner.get(key).await?.as_deref() != Some(value) {
            return Ok(false);
        }
        self.inner.del(key).await
    }

    async fn renew_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<bool, BackendError> {
        let ttl_ms = if self.mutant == Mutant::ExtendTtlAsSeconds { ttl_ms * 1_000 } else { ttl_ms };
        let extended = self.inner.renew_script(script, key, value, ttl_ms).await.unwrap_or(false);
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
pub struct PlantedLease<L, C = ClockClient> {
    pub(super) inner: L,
    pub(super) mutant: Mutant,
    pub(super) acquisitions: Arc<AtomicU32>,
    pub(super) clock: C,
    /// When each lease (key, value) runs out by the worker's own reckoning.
    pub(super) deadlines: Mutex<BTreeMap<(String, String), u64>>,
    pub(super) told: Arc<Told>,
}

impl<L, C> PlantedLease<L, C> {
    fn value<'a>(&self, value: &'a str) -> &'a str {
        if self.mutant == Mutant::SharedLockValue {
            "worker"
        } else {
            value
        }
    }
}

impl<L: LeaseStore + Sync, C: Clock + Sync> LeaseStore for PlantedLease<L, C> {
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
        let gave_up = self.told.refused_in_a_row.load(Ordering::Relaxed) >= fencesim_model::RETRY.tries;
        if self.mutant == Mutant::ReleaseWithDel || (gave_up && self.mutant == Mutant::OutageReleaseByDel) {
            // under `outage-release-by-del` the bug is the error path's own clean-up
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

impl<L, C> PlantedLease<L, C> {
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
    pub(super) inner: T,
    pub(super) mutant: Mutant,
    /// Keyed by merchant under `token-per-job`, by nothing under `token-per-worker`.
    pub(super) kept: Mutex<BTreeMap<Option<MerchantId>, Token>>,
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
pub struct PlantedStore<S = StoreClient> {
    pub(super) inner: S,
    pub(super) ignore_row_count: bool,
}

impl<S: RefundStore + Sync> RefundStore for PlantedStore<S> {
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
pub struct PlantedGateway<G = GatewayClient> {
    pub(super) inner: G,
    pub(super) mutant: Mutant,
    pub(super) worker: WorkerId,
    pub(super) acquisitions: Arc<AtomicU32>,
    /// How many refund calls this process sent for each refund (`retry-mints-new-key`).
    pub(super) calls: Mutex<BTreeMap<RefundId, u32>>,
    /// The refunds this process's last lookup of found none of (or whose last call met a
    /// conflict), not paid since.
    pub(super) missed: Mutex<BTreeSet<RefundId>>,
    /// The process's start-up generation (1, then one more after each crash).
    pub(super) generation: u32,
    /// The refunds whose last call timed out, until a lookup after it answers, with the
    /// lookups after it that failed (`unknown-outcome-acked`).
    pub(super) timed_out: Mutex<BTreeMap<RefundId, u32>>,
    pub(super) told: Arc<Told>,
}

impl<G> PlantedGateway<G> {
    fn key(&self, reference: RefundId, key: IdempotencyKey) -> IdempotencyKey {
        if self.mutant == Mutant::KeyPerAttempt {
            let attempt = self.acquisitions.load(Ordering::Relaxed);
            return IdempotencyKey(format!("{reference}/{}.{attempt}", self.worker));
        }
        if self.mutant == Mutant::KeyPerStartGeneration {
            // the bug: the key names the process's start-up generation
            return IdempotencyKey(format!("{}.g{}", key.0, self.generation));
        }
        if matches!(
            self.mutant,
            Mutant::LookupMissMintsNewKey
                | Mutant::ConflictMintsNewKey
                | Mutant::RefusalMintsNewKey
                | Mutant::RestartRecoveryMintsNewKey
        ) {
            // the bug: "the lookup found nothing, so no call went out" (or "the key is stuck
            // in a conflict", "the refused key is spent", "this life has no attempt for
            // it"): a key of this call's own
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

impl<G: Gateway + Sync> Gateway for PlantedGateway<G> {
    async fn find(&self, reference: RefundId) -> Result<Option<Receipt>, GatewayError> {
        let found = self.inner.find(reference).await;
        self.count_refusals(found.as_ref().err());
        self.after_lookup(reference, &found);
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
        self.count_refusals(answer.as_ref().err());
        if answer == Err(GatewayError::Timeout) {
            self.lock(&self.timed_out).insert(reference, 0);
        }
        let minting = match answer {
            Err(GatewayError::Conflict) => self.mutant == Mutant::ConflictMintsNewKey,
            Err(GatewayError::Unavailable) => self.mutant == Mutant::RefusalMintsNewKey,
            _ => false,
        };
        if minting {
            // the bug: the next try gets a key of its own
            self.lock(&self.missed).insert(reference);
        }
        if self.mutant == Mutant::TimeoutTakenAsFailure && answer == Err(GatewayError::Timeout) {
            return Err(GatewayError::Unavailable);
        }
        if self.mutant == Mutant::FailureTakenAsRefunded && answer.is_err() {
            return Ok(Receipt { gateway_ref: 0, amount });
        }
        answer
    }
}

impl<G> PlantedGateway<G> {
    fn lock<'a, T>(&self, mutex: &'a Mutex<T>) -> std::sync::MutexGuard<'a, T> {
        mutex.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the gateway's refusals in a row (any other answer starts the count again).
    fn count_refusals(&self, error: Option<&GatewayError>) {
        let refused = &self.told.refused_in_a_row;
        match error {
            Some(GatewayError::Unavailable) => refused.fetch_add(1, Ordering::Relaxed),
            _ => refused.swap(0, Ordering::Relaxed),
        };
    }

    /// What a lookup tells the bugs that act on it. A lookup not after a timeout is a
    /// recovery's (of a row found in `sending`): under `lookup-miss-skips-ledger-check` a
    /// miss skips the ledger's check, under `restart-recovery-mints-new-key` a restarted
    /// process pays the refund under a key of its own. After a timeout, under
    /// `unknown-outcome-acked`, the worker's last try failing parks the refund.
    fn after_lookup(&self, reference: RefundId, found: &Result<Option<Receipt>, GatewayError>) {
        let mut timed_out = self.lock(&self.timed_out);
        let Some(failed) = timed_out.get_mut(&reference) else {
            // a lookup not after a timeout is a recovery's, of a row found in `sending`
            if *found == Ok(None) && self.mutant == Mutant::LookupMissSkipsLedgerCheck {
                Told::set(&self.told.missed_in_recovery).insert(reference);
            }
            if *found == Ok(None) && self.mutant == Mutant::RestartRecoveryMintsNewKey && self.generation > 1
            {
                // the bug: a restarted process has no attempt of its own for the row
                self.lock(&self.missed).insert(reference);
            }
            return;
        };
        *failed += u32::from(found.is_err());
        if found.is_ok() {
            timed_out.remove(&reference);
        } else if *failed >= fencesim_model::RETRY.tries && self.mutant == Mutant::UnknownOutcomeAcked {
            // the bug: the worker's last lookup failed, the outcome is unknown, and the
            // refund is parked and its job acked
            timed_out.remove(&reference);
            self.told.parked.store(true, Ordering::Relaxed);
        }
    }
}

/// The job queue, under `ack-on-receive` acking each delivery as it arrives, under
/// `unknown-outcome-acked` acking the delivery whose refund was parked.
pub struct PlantedQueue<Q = QueueClient> {
    pub(super) inner: Q,
    pub(super) mutant: Mutant,
    pub(super) told: Arc<Told>,
    /// The delivery in hand.
    pub(super) last: Mutex<Option<Delivery>>,
}

impl<Q: JobQueue + Sync> JobQueue for PlantedQueue<Q> {
    async fn receive(&self) -> Option<Delivery> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(last) = last.filter(|_| self.told.parked.swap(false, Ordering::Relaxed)) {
            // the bug: "parked for reconciliation", and nobody reconciles
            self.inner.ack(last).await;
        }
        let delivery = self.inner.receive().await?;
        if self.mutant == Mutant::AckOnReceive {
            self.inner.ack(delivery).await;
        }
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(delivery);
        Some(delivery)
    }

    async fn ack(&self, delivery: Delivery) -> bool {
        self.inner.ack(delivery).await
    }
}

/// The settlement ledger, under `lookup-miss-skips-ledger-check` not asked whether a refund
/// a recovery's lookup found none of was posted ("never paid, so never posted").
pub struct PlantedSettlement<D = fencesim_sim::port::SettlementClient> {
    pub(super) inner: D,
    pub(super) mutant: Mutant,
    pub(super) told: Arc<Told>,
}

impl<D: fencesim_model::SettlementStore + Sync> fencesim_model::SettlementStore for PlantedSettlement<D> {
    async fn enroll(
        &self,
        merchant: MerchantId,
        token: Token,
    ) -> Result<fencesim_model::SettlementOutcome, BackendError> {
        self.inner.enroll(merchant, token).await
    }

    async fn posted(&self, refund: RefundId) -> Result<bool, BackendError> {
        let missed = Told::set(&self.told.missed_in_recovery).remove(&refund);
        if missed && self.mutant == Mutant::LookupMissSkipsLedgerCheck {
            // the bug: the ledger is not asked
            return Ok(false);
        }
        self.inner.posted(refund).await
    }

    async fn post(
        &self,
        posting: fencesim_model::Posting,
        guard: WriteGuard,
    ) -> Result<fencesim_model::SettlementOutcome, BackendError> {
        self.inner.post(posting, guard).await
    }
}
