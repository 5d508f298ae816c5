//! The traits the worker needs from the world. Each returns a `Send` future so that a
//! worker can run as a task of its own.

use crate::ids::{Cents, JobId, MerchantId, RefundId, Token};
use crate::refund::{RefundRow, WriteGuard, WriteOutcome};
use crate::worker::Step;
use serde::{Deserialize, Serialize};
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

/// A lease with a TTL: `SET key value NX PX ttl`, released by compare-and-delete.
pub trait LeaseStore {
    /// Takes the lease if nobody holds it. `Ok(false)`: another holder is live.
    fn acquire(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// Deletes the key only if it still holds `value`. `Ok(false)`: it was not ours any more.
    fn release(&self, key: &str, value: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
}

/// Issues fencing tokens, strictly increasing per key in the order they are asked for.
pub trait TokenSource {
    fn next_token(&self, key: &str) -> impl Future<Output = Result<Token, BackendError>> + Send;
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
}

/// The gateway's answer for a refund: its own number for the money movement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Receipt {
    pub gateway_ref: u32,
    pub amount: Cents,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GatewayError {
    /// The call may or may not have moved money; the caller cannot tell.
    Unavailable(String),
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::Unavailable(why) => write!(f, "gateway unavailable: {why}"),
        }
    }
}

/// The payment gateway, which moves real money.
pub trait Gateway {
    /// Is there already a refund with this reference?
    fn find(&self, reference: RefundId)
        -> impl Future<Output = Result<Option<Receipt>, GatewayError>> + Send;

    /// Refunds `amount`, with the refund id as the idempotency key.
    fn refund(
        &self,
        key: RefundId,
        amount: Cents,
    ) -> impl Future<Output = Result<Receipt, GatewayError>> + Send;
}

/// A settlement job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    pub merchant: MerchantId,
}

/// One delivery of a job; the receipt names this delivery, so that a stale ack is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Delivery {
    pub job: Job,
    pub receipt: u32,
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
