//! The traits the worker needs from the world. Each returns a `Send` future so that a
//! worker can run as a task of its own.

use crate::ids::{Cents, MerchantId, RefundId, Token};
use crate::job::Delivery;
use crate::refund::{GatewayError, Receipt, RefundRow, WriteGuard, WriteOutcome};
use crate::settlement::{Posting, SettlementOutcome};
use crate::step::Step;
use std::fmt;
use std::future::Future;

/// A backend did not answer as it should (connection lost, storage error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendError(pub String);

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackendError {}

/// One Redis instance, as a client sees it.
pub trait RedisInstance {
    /// `SET key value NX PX ttl`: `true` if the key was set.
    fn set_nx_px(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// `GET key` as a string.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<String>, BackendError>> + Send;
    /// `DEL key`: `true` if a key was deleted.
    fn del(&self, key: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// `INCR key`.
    fn incr(&self, key: &str) -> impl Future<Output = Result<i64, BackendError>> + Send;
    /// Runs an acquisition script (`EVAL script 1 key value ttl`): `true` if it returned 1
    /// or `OK`, a grant as `set_nx_px`'s would be.
    fn acquire_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Runs a release script (`EVAL script 1 key value`): `true` if it returned 1.
    fn release_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Runs a renewal script (`EVAL script 1 key value ttl`): `true` if it returned 1.
    fn renew_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// `WAIT replicas timeout`, for as many replicas as the deployment runs: `true` if every
    /// one of them acknowledged every write this connection made, within `timeout_ms`
    /// (a deployment without replicas answers `true` at once).
    fn wait_replicas(&self, timeout_ms: u64) -> impl Future<Output = Result<bool, BackendError>> + Send;
}

/// The worker's own clock: for validity times and the renewal timer.
pub trait Clock {
    fn now_ms(&self) -> u64;
    fn sleep_ms(&self, ms: u64) -> impl Future<Output = ()> + Send;
}

/// A lease with a TTL, however it is held.
pub trait LeaseStore {
    /// Takes the lease if nobody holds it. `Ok(false)`: another holder is live.
    fn acquire(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Gives the lease back only if it is still ours (compare-and-delete).
    fn release(&self, key: &str, value: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Deletes the lease key whoever holds it (`DEL`).
    fn delete(&self, key: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Re-arms the TTL if the lease is still ours.
    fn extend(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Is the lease ours right now (`GET` and compare)?
    fn holds(&self, key: &str, value: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Do the servers still hold the lease as ours, asked now (a `GET` and compare on each
    /// instance, a majority of them)? The same as `holds` where that asks the servers;
    /// under Redlock, whose `holds` judges the validity on the worker's own clock, this is
    /// the question put to the instances themselves, which an instance's early expiry
    /// answers and the worker's clock cannot.
    fn confirm_held(&self, key: &str, value: &str)
        -> impl Future<Output = Result<bool, BackendError>> + Send;
}

/// Issues fencing tokens for a merchant, in the order they are asked for.
pub trait TokenSource {
    fn next_token(&self, merchant: MerchantId) -> impl Future<Output = Result<Token, BackendError>> + Send;
}

/// The refund rows and the two fenced writes.
pub trait RefundStore {
    /// The merchant's rows that are not `sent`, in id order.
    fn open_refunds(
        &self,
        merchant: MerchantId,
    ) -> impl Future<Output = Result<Vec<RefundRow>, BackendError>> + Send;

    fn claim(
        &self,
        refund: RefundId,
        guard: WriteGuard,
    ) -> impl Future<Output = Result<WriteOutcome, BackendError>> + Send;

    fn confirm(
        &self,
        refund: RefundId,
        guard: WriteGuard,
    ) -> impl Future<Output = Result<WriteOutcome, BackendError>> + Send;

    /// The next value of the merchant's token sequence, kept in the same database.
    fn next_sequence_token(
        &self,
        merchant: MerchantId,
    ) -> impl Future<Output = Result<Token, BackendError>> + Send;
}

/// The second store: the merchant's settlement ledger, on a database of its own.
pub trait SettlementStore {
    /// Takes the merchant's ledger fence with `token` if the stored one is older.
    fn enroll(
        &self,
        merchant: MerchantId,
        token: Token,
    ) -> impl Future<Output = Result<SettlementOutcome, BackendError>> + Send;
    /// Is an entry for `refund` in the journal already?
    fn posted(&self, refund: RefundId) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// One entry for the refund and its amount added to the balance, under `guard`.
    fn post(
        &self,
        posting: Posting,
        guard: WriteGuard,
    ) -> impl Future<Output = Result<SettlementOutcome, BackendError>> + Send;
}

/// The key the gateway deduplicates calls by, as the gateway's API takes it: text. The
/// right key is the refund id alone (`r_815`), so that every call for one refund is the
/// same call, whoever makes it and however often.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IdempotencyKey(pub String);

impl IdempotencyKey {
    pub fn of(refund: RefundId) -> IdempotencyKey {
        IdempotencyKey(refund.to_string())
    }
}

/// The payment gateway, which moves real money.
pub trait Gateway {
    /// Is there already a refund with this reference?
    fn find(&self, reference: RefundId)
        -> impl Future<Output = Result<Option<Receipt>, GatewayError>> + Send;

    /// Refunds `amount` for `reference`, under the idempotency key `key`.
    fn refund(
        &self,
        reference: RefundId,
        key: IdempotencyKey,
        amount: Cents,
    ) -> impl Future<Output = Result<Receipt, GatewayError>> + Send;
}

/// At-least-once delivery with a visibility timeout.
pub trait JobQueue {
    /// The next job for this worker; `None` when the queue is closed.
    fn receive(&self) -> impl Future<Output = Option<Delivery>> + Send;
    /// Marks the job done. `false`: the delivery is no longer current (it was handed on).
    fn ack(&self, delivery: Delivery) -> impl Future<Output = bool> + Send;
}

/// Told each time the worker reaches a protocol step: production code would log or trace
/// here; a test harness may also stop the process at that exact point.
pub trait Probe {
    fn reached(&self, step: Step) -> impl Future<Output = ()> + Send;
}
