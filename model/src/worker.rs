//! The settlement worker and its protocol:
//!
//! 1. take a job for merchant `m` from the queue;
//! 2. acquire the lease `lock:settle:m` with a unique value and a TTL; on failure stop;
//! 3. if the mechanism fences, take a token (`INCR fence:settle:m`) for the whole batch;
//! 4. for each row of `m` that is not `sent`, in id order: if it is `sending`, ask the
//!    gateway whether the refund already exists; claim it; call the gateway with the refund
//!    id as idempotency key (unless the refund already existed), retrying as `payment`
//!    says when the gateway fails; confirm it;
//!    in a world with a second store (the settlement ledger), the holder takes the ledger's
//!    fence when its batch begins, asks the ledger too for a row found in `sending`, and
//!    posts each refund between the gateway call and the confirm;
//! 5. release the lease by compare-and-delete; ack the job only when the batch completed.

use crate::ids::{MerchantId, RefundId, Token, WorkerId};
use crate::job::{Delivery, Job};
use crate::mechanism::{Mechanism, OnRejectedWrite, ReleasePolicy, TokenPolicy};
use crate::payment::Payer;
use crate::ports::{Clock, Gateway, JobQueue, LeaseStore, Probe, RefundStore, SettlementStore, TokenSource};
use crate::refund::{FenceViolation, RefundRow, RefundState, WriteGuard, WriteKind};
use crate::settlement::{Posting, SettlementViolation, SettlementWrite};
use crate::step::{AbandonReason, Step};
use std::sync::atomic::{AtomicBool, Ordering};

/// How one delivery of a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Every open row was settled (or skipped); the job is acked.
    Completed,
    /// Another holder's lease is live; the job comes back after its visibility timeout.
    LeaseBusy,
    Abandoned(AbandonReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    pub id: WorkerId,
    pub mechanism: Mechanism,
    pub ttl_ms: u64,
    /// Whether the world has the second store: settling a refund also posts it there.
    pub settlement: bool,
}

/// The connections a worker process has to the world.
pub struct Ports<L, T, S, G, Q, P, K, D> {
    pub lease: L,
    pub tokens: T,
    pub store: S,
    /// The settlement ledger (used only when the world has it).
    pub settlement: D,
    pub gateway: G,
    pub queue: Q,
    pub probe: P,
    pub clock: K,
}

/// One worker process with its connections to the world.
pub struct Worker<L, T, S, G, Q, P, K, D> {
    pub config: WorkerConfig,
    pub ports: Ports<L, T, S, G, Q, P, K, D>,
    /// Names this process among the worker's lives, so that lock values stay unique
    /// across a crash and restart.
    pub incarnation: u32,
    acquisitions: u32,
}

/// The lease a batch runs under.
struct Held<'a> {
    key: &'a str,
    value: &'a str,
    /// Set by the renewal when it finds the lease gone.
    lost: &'a AtomicBool,
}

/// A write that updated no row, in either store.
#[derive(Clone, Copy)]
enum Rejected {
    Row { refund: RefundId, write: WriteKind },
    Settlement { refund: Option<RefundId>, write: SettlementWrite },
}

/// The end of a batch that did not complete, with the reason to report.
struct Abandon(AbandonReason);

impl<L, T, S, G, Q, P, K, D> Worker<L, T, S, G, Q, P, K, D>
where
    L: LeaseStore + Send + Sync,
    T: TokenSource + Send + Sync,
    S: RefundStore + Send + Sync,
    G: Gateway + Send + Sync,
    Q: JobQueue + Send + Sync,
    P: Probe + Send + Sync,
    K: Clock + Send + Sync,
    D: SettlementStore + Send + Sync,
{
    pub fn new(config: WorkerConfig, ports: Ports<L, T, S, G, Q, P, K, D>, incarnation: u32) -> Self {
        Worker { config, ports, incarnation, acquisitions: 0 }
    }

    /// Takes jobs until the queue closes.
    pub async fn run(mut self) {
        while let Some(delivery) = self.ports.queue.receive().await {
            if self.settle(delivery).await == BatchOutcome::Completed {
                self.ports.queue.ack(delivery).await;
            }
        }
    }

    /// Settles one delivery of a job.
    pub async fn settle(&mut self, delivery: Delivery) -> BatchOutcome {
        let Job { merchant, .. } = delivery.job;
        let ports = &self.ports;
        ports.probe.reached(Step::JobReceived { job: delivery.job, receipt: delivery.receipt }).await;

        let lock_key = self.config.mechanism.spec().lease_key_of(merchant, self.config.id);
        self.acquisitions += 1;
        let lock_value = if self.incarnation > 1 {
            format!("{}.{}#{}", self.config.id, self.incarnation, self.acquisitions)
        } else {
            format!("{}#{}", self.config.id, self.acquisitions)
        };
        let ports = &self.ports;
        match ports.lease.acquire(&lock_key, &lock_value, self.config.ttl_ms).await {
            Ok(true) => {}
            Ok(false) => {
                ports.probe.reached(Step::LeaseBusy { merchant }).await;
                return BatchOutcome::LeaseBusy;
            }
            Err(_) => return self.abandon(AbandonReason::BackendError).await,
        }
        ports.probe.reached(Step::LeaseAcquired { merchant, acquisition: self.acquisitions }).await;

        let lost = AtomicBool::new(false);
        let held = Held { key: &lock_key, value: &lock_value, lost: &lost };
        let outcome = match self.take_token(delivery.job, &held).await {
            Err(abandon) => Err(abandon),
            Ok(token) if self.config.mechanism.spec().renewals_per_ttl > 0 => {
                let batch = std::pin::pin!(self.settle_rows(merchant, token, &held));
                let renewal = std::pin::pin!(self.renew(&held));
                match futures_util::future::select(batch, renewal).await {
                    futures_util::future::Either::Left((outcome, _)) => outcome,
                    futures_util::future::Either::Right(((), batch)) => batch.await,
                }
            }
            Ok(token) => self.settle_rows(merchant, token, &held).await,
        };

        let ports = &self.ports;
        let released = match self.config.mechanism.spec().release {
            ReleasePolicy::CompareAndDelete => ports.lease.release(&lock_key, &lock_value).await,
            ReleasePolicy::PlainDel => ports.lease.delete(&lock_key).await,
        }
        .unwrap_or(false);
        ports.probe.reached(Step::Released { released }).await;
        match outcome {
            Ok(()) => {
                ports.probe.reached(Step::BatchCompleted { merchant }).await;
                BatchOutcome::Completed
            }
            Err(Abandon(reason)) => self.abandon(reason).await,
        }
    }

    async fn abandon(&self, reason: AbandonReason) -> BatchOutcome {
        self.ports.probe.reached(Step::BatchAbandoned { reason }).await;
        BatchOutcome::Abandoned(reason)
    }

    /// Re-arms the lease as many times per TTL as the mechanism says (the built-ins: every
    /// third of it) until a renewal fails. Runs beside the batch in the same process, so a
    /// pause freezes it too.
    async fn renew(&self, held: &Held<'_>) {
        let ttl = self.config.ttl_ms;
        let every = (ttl / u64::from(self.config.mechanism.spec().renewals_per_ttl.max(1))).max(1);
        loop {
            self.ports.clock.sleep_ms(every).await;
            let renewed = self.ports.lease.extend(held.key, held.value, ttl).await.unwrap_or(false);
            self.ports.probe.reached(Step::LeaseRenewed { renewed }).await;
            if !renewed {
                held.lost.store(true, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Takes the batch's token (if the mechanism fences) and, where the mechanism says so,
    /// confirms the lease is still ours once it is issued.
    async fn take_token(&self, job: Job, held: &Held<'_>) -> Result<Option<Token>, Abandon> {
        if self.config.mechanism.spec().tokens == TokenPolicy::None {
            return Ok(None);
        }
        let ports = &self.ports;
        let token =
            ports.tokens.next_token(job.merchant).await.map_err(|_| Abandon(AbandonReason::BackendError))?;
        ports.probe.reached(Step::TokenTaken { token }).await;
        if !self.config.mechanism.spec().check_after_token {
            return Ok(Some(token));
        }
        // Tokens rise in the order leases were granted only if each was issued while its
        // holder's lease was live. A holder held up between its lease and its token (a
        // pause, a slow hop) could otherwise draw a token newer than its successor's and
        // fence the live holder out. A lease that is live now was live when the token was
        // issued: keys do not come back. The servers are asked, not the worker's clock: a
        // Redlock holder whose majority an instance's early expiry broke still has validity
        // left by its own reckoning while another worker holds a majority and a token.
        let ours = ports
            .lease
            .confirm_held(held.key, held.value)
            .await
            .map_err(|_| Abandon(AbandonReason::BackendError))?;
        ports.probe.reached(Step::LeaseChecked { refund: None, held: ours }).await;
        if !ours {
            return Err(Abandon(AbandonReason::LeaseLost));
        }
        Ok(Some(token))
    }

    async fn settle_rows(
        &self,
        merchant: MerchantId,
        token: Option<Token>,
        held: &Held<'_>,
    ) -> Result<(), Abandon> {
        let ports = &self.ports;
        let guard = self.config.mechanism.guard(token);
        self.enroll(merchant, token).await?;

        let rows =
            ports.store.open_refunds(merchant).await.map_err(|_| Abandon(AbandonReason::BackendError))?;
        let sending = rows.iter().filter(|r| r.state == RefundState::Sending).count() as u32;
        ports.probe.reached(Step::RowsSelected { open: rows.len() as u32, sending }).await;

        for row in &rows {
            self.settle_row(row, guard, held).await?;
        }
        Ok(())
    }

    /// Before a write: a lost renewal ends the batch; check-before-write asks Redis.
    async fn still_holding(&self, refund: RefundId, held: &Held<'_>) -> Result<(), Abandon> {
        if held.lost.load(Ordering::Relaxed) {
            return Err(Abandon(AbandonReason::LeaseLost));
        }
        if self.config.mechanism.spec().check_before_write {
            let ports = &self.ports;
            let ours = ports
                .lease
                .holds(held.key, held.value)
                .await
                .map_err(|_| Abandon(AbandonReason::BackendError))?;
            ports.probe.reached(Step::LeaseChecked { refund: Some(refund), held: ours }).await;
            if !ours {
                return Err(Abandon(AbandonReason::LeaseLost));
            }
        }
        Ok(())
    }

    async fn settle_row(&self, row: &RefundRow, guard: WriteGuard, held: &Held<'_>) -> Result<(), Abandon> {
        let ports = &self.ports;
        let payer = Payer { gateway: &ports.gateway, probe: &ports.probe, clock: &ports.clock };
        // A row left in `sending` may mean a call already went out: ask before paying.
        let mut paid = None;
        let mut posted = false;
        if row.state == RefundState::Sending {
            let found = payer.look_up(row.id).await.map_err(Abandon)?;
            ports.probe.reached(Step::AfterLookup { refund: row.id, found: found.is_some() }).await;
            paid = found;
            posted = self.settlement_lookup(row.id).await?;
        }

        self.still_holding(row.id, held).await?;
        if !self.write(WriteKind::Claim, row.id, guard).await? {
            return Ok(());
        }
        ports.probe.reached(Step::AfterClaim { refund: row.id }).await;

        let receipt = match paid {
            Some(receipt) => receipt,
            None => payer.pay(row).await.map_err(Abandon)?,
        };
        ports.probe.reached(Step::AfterGatewayCall { refund: row.id, receipt }).await;
        if !posted {
            self.post(row, guard.token(), held).await?;
        }

        self.still_holding(row.id, held).await?;
        if self.write(WriteKind::Confirm, row.id, guard).await? {
            ports.probe.reached(Step::AfterConfirm { refund: row.id }).await;
        }
        Ok(())
    }

    /// Runs one write. `Ok(true)`: a row was updated; `Ok(false)`: none was and the
    /// mechanism skips the row; `Err`: none was and the mechanism abandons the batch.
    async fn write(&self, kind: WriteKind, refund: RefundId, guard: WriteGuard) -> Result<bool, Abandon> {
        let ports = &self.ports;
        let outcome = match kind {
            WriteKind::Claim => ports.store.claim(refund, guard).await,
            WriteKind::Confirm => ports.store.confirm(refund, guard).await,
        }
        .map_err(|_| Abandon(AbandonReason::BackendError))?;
        match guard {
            WriteGuard::Fence(token) if outcome.found_finished(kind, token) => {
                let fence = outcome.found.map_or(0, |row| row.fence);
                ports.probe.reached(Step::RowAlreadySent { refund, write: kind, token, fence }).await;
                match self.config.mechanism.spec().on_row_already_sent {
                    OnRejectedWrite::Abandon => Err(Abandon(AbandonReason::RowAlreadySent)),
                    OnRejectedWrite::Skip => {
                        ports.probe.reached(Step::WriteSkipped { refund, write: kind }).await;
                        Ok(false)
                    }
                }
            }
            _ => self.decide(outcome.rows_updated, guard, Rejected::Row { refund, write: kind }).await,
        }
    }

    /// What a write that updated `rows` rows means, for either store: a row updated goes
    /// on (`Ok(true)`); none is a fence violation that abandons the batch, or a write the
    /// mechanism skips (`Ok(false)`).
    async fn decide(&self, rows: u64, guard: WriteGuard, rejected: Rejected) -> Result<bool, Abandon> {
        if rows > 0 {
            return Ok(true);
        }
        let probe = &self.ports.probe;
        match (self.config.mechanism.spec().on_rejected_write, guard, rejected) {
            (OnRejectedWrite::Abandon, WriteGuard::Fence(token), Rejected::Row { refund, write }) => {
                let violation = FenceViolation { refund, token, write };
                probe.reached(Step::FenceViolation { violation }).await;
                Err(Abandon(AbandonReason::FenceViolation))
            }
            (OnRejectedWrite::Abandon, WriteGuard::Fence(token), Rejected::Settlement { refund, write }) => {
                let violation = SettlementViolation { refund, token, write };
                probe.reached(Step::SettlementFenceViolation { violation }).await;
                Err(Abandon(AbandonReason::FenceViolation))
            }
            (_, _, Rejected::Row { refund, write }) => {
                probe.reached(Step::WriteSkipped { refund, write }).await;
                Ok(false)
            }
            // An unfenced posting always lands; a skipped enrolment or posting leaves the
            // ledger as it was and the batch goes on.
            (_, _, Rejected::Settlement { .. }) => Ok(false),
        }
    }

    /// Takes the settlement ledger's fence for the batch, when the world has the ledger
    /// and the mechanism fences it.
    async fn enroll(&self, merchant: MerchantId, token: Option<Token>) -> Result<(), Abandon> {
        let guard = self.config.mechanism.settlement_guard(token);
        let WriteGuard::Fence(token) = guard else { return Ok(()) };
        if !self.config.settlement {
            return Ok(());
        }
        let outcome = self
            .ports
            .settlement
            .enroll(merchant, token)
            .await
            .map_err(|_| Abandon(AbandonReason::BackendError))?;
        let rejected = Rejected::Settlement { refund: None, write: SettlementWrite::Enroll };
        self.decide(outcome.rows_updated, guard, rejected).await.map(|_| ())
    }

    /// For a row found in `sending`: is the refund posted to the ledger already?
    async fn settlement_lookup(&self, refund: RefundId) -> Result<bool, Abandon> {
        if !self.config.settlement {
            return Ok(false);
        }
        let posted =
            self.ports.settlement.posted(refund).await.map_err(|_| Abandon(AbandonReason::BackendError))?;
        self.ports.probe.reached(Step::AfterSettlementLookup { refund, posted }).await;
        Ok(posted)
    }

    /// Posts the refund to the settlement ledger, under the mechanism's guard for it.
    async fn post(&self, row: &RefundRow, token: Option<Token>, held: &Held<'_>) -> Result<(), Abandon> {
        if !self.config.settlement {
            return Ok(());
        }
        self.still_holding(row.id, held).await?;
        let guard = self.config.mechanism.settlement_guard(token);
        let posting = Posting { refund: row.id, merchant: row.merchant, amount: row.amount };
        let outcome = self
            .ports
            .settlement
            .post(posting, guard)
            .await
            .map_err(|_| Abandon(AbandonReason::BackendError))?;
        let rejected = Rejected::Settlement { refund: Some(row.id), write: SettlementWrite::Post };
        if self.decide(outcome.rows_updated, guard, rejected).await? {
            self.ports.probe.reached(Step::AfterPost { refund: row.id }).await;
        }
        Ok(())
    }
}
