//! The settlement worker and its protocol:
//!
//! 1. take a job for merchant `m` from the queue;
//! 2. acquire the lease `lock:settle:m` with a unique value and a TTL; on failure stop;
//! 3. if the mechanism fences, take a token (`INCR fence:settle:m`) for the whole batch;
//! 4. for each row of `m` that is not `sent`, in id order: if it is `sending`, ask the
//!    gateway whether the refund already exists; claim it; call the gateway with the refund
//!    id as idempotency key (unless the refund already existed); confirm it;
//! 5. release the lease by compare-and-delete; ack the job only when the batch completed.

use crate::ids::{MerchantId, RefundId, Token, WorkerId};
use crate::mechanism::{Mechanism, OnRejectedWrite, TokenPolicy};
use crate::ports::{Delivery, Gateway, Job, JobQueue, LeaseStore, Probe, Receipt, RefundStore, TokenSource};
use crate::refund::{FenceViolation, RefundRow, RefundState, WriteGuard, WriteKind};
use serde::{Deserialize, Serialize};

/// A point of the protocol a worker reaches, with what it knows there. The probe sees each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    JobReceived {
        job: Job,
        receipt: u32,
    },
    LeaseAcquired {
        merchant: MerchantId,
        acquisition: u32,
    },
    LeaseBusy {
        merchant: MerchantId,
    },
    TokenTaken {
        token: Token,
    },
    RowsSelected {
        open: u32,
        sending: u32,
    },
    AfterLookup {
        refund: RefundId,
        found: bool,
    },
    /// The row is claimed and the gateway call has not gone out yet.
    AfterClaim {
        refund: RefundId,
    },
    AfterGatewayCall {
        refund: RefundId,
        receipt: Receipt,
    },
    AfterConfirm {
        refund: RefundId,
    },
    /// A write matched no row and the mechanism skips it.
    WriteSkipped {
        refund: RefundId,
        write: WriteKind,
    },
    FenceViolation {
        violation: FenceViolation,
    },
    BatchAbandoned {
        reason: AbandonReason,
    },
    BatchCompleted {
        merchant: MerchantId,
    },
    Released {
        released: bool,
    },
}

/// The step without its data: what a fault trigger names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    JobReceived,
    LeaseAcquired,
    LeaseBusy,
    TokenTaken,
    RowsSelected,
    AfterLookup,
    AfterClaim,
    AfterGatewayCall,
    AfterConfirm,
    WriteSkipped,
    FenceViolation,
    BatchAbandoned,
    BatchCompleted,
    Released,
}

impl StepKind {
    pub const COUNT: usize = 14;

    pub fn name(self) -> &'static str {
        match self {
            StepKind::JobReceived => "job-received",
            StepKind::LeaseAcquired => "lease-acquired",
            StepKind::LeaseBusy => "lease-busy",
            StepKind::TokenTaken => "token-taken",
            StepKind::RowsSelected => "rows-selected",
            StepKind::AfterLookup => "after-lookup",
            StepKind::AfterClaim => "after-claim",
            StepKind::AfterGatewayCall => "after-gateway-call",
            StepKind::AfterConfirm => "after-confirm",
            StepKind::WriteSkipped => "write-skipped",
            StepKind::FenceViolation => "fence-violation",
            StepKind::BatchAbandoned => "batch-abandoned",
            StepKind::BatchCompleted => "batch-completed",
            StepKind::Released => "released",
        }
    }
}

impl Step {
    pub fn kind(&self) -> StepKind {
        match self {
            Step::JobReceived { .. } => StepKind::JobReceived,
            Step::LeaseAcquired { .. } => StepKind::LeaseAcquired,
            Step::LeaseBusy { .. } => StepKind::LeaseBusy,
            Step::TokenTaken { .. } => StepKind::TokenTaken,
            Step::RowsSelected { .. } => StepKind::RowsSelected,
            Step::AfterLookup { .. } => StepKind::AfterLookup,
            Step::AfterClaim { .. } => StepKind::AfterClaim,
            Step::AfterGatewayCall { .. } => StepKind::AfterGatewayCall,
            Step::AfterConfirm { .. } => StepKind::AfterConfirm,
            Step::WriteSkipped { .. } => StepKind::WriteSkipped,
            Step::FenceViolation { .. } => StepKind::FenceViolation,
            Step::BatchAbandoned { .. } => StepKind::BatchAbandoned,
            Step::BatchCompleted { .. } => StepKind::BatchCompleted,
            Step::Released { .. } => StepKind::Released,
        }
    }
}

/// Why a batch was given up. The job is not acked, so the queue hands it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbandonReason {
    FenceViolation,
    GatewayUnavailable,
    BackendError,
}

impl std::fmt::Display for AbandonReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AbandonReason::FenceViolation => "fence violation",
            AbandonReason::GatewayUnavailable => "gateway unavailable",
            AbandonReason::BackendError => "backend error",
        })
    }
}

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
}

/// One worker process with its connections to the world.
pub struct Worker<L, T, S, G, Q, P> {
    pub config: WorkerConfig,
    pub lease: L,
    pub tokens: T,
    pub store: S,
    pub gateway: G,
    pub queue: Q,
    pub probe: P,
    acquisitions: u32,
}

/// The end of a batch that did not complete, with the reason to report.
struct Abandon(AbandonReason);

impl<L, T, S, G, Q, P> Worker<L, T, S, G, Q, P>
where
    L: LeaseStore + Send + Sync,
    T: TokenSource + Send + Sync,
    S: RefundStore + Send + Sync,
    G: Gateway + Send + Sync,
    Q: JobQueue + Send + Sync,
    P: Probe + Send + Sync,
{
    pub fn new(config: WorkerConfig, lease: L, tokens: T, store: S, gateway: G, queue: Q, probe: P) -> Self {
        Worker { config, lease, tokens, store, gateway, queue, probe, acquisitions: 0 }
    }

    /// Takes jobs until the queue closes.
    pub async fn run(mut self) {
        while let Some(delivery) = self.queue.receive().await {
            if self.settle(delivery).await == BatchOutcome::Completed {
                self.queue.ack(delivery).await;
            }
        }
    }

    /// Settles one delivery of a job.
    pub async fn settle(&mut self, delivery: Delivery) -> BatchOutcome {
        let Job { merchant, .. } = delivery.job;
        self.probe.reached(Step::JobReceived { job: delivery.job, receipt: delivery.receipt }).await;

        let lock_key = format!("lock:settle:{merchant}");
        self.acquisitions += 1;
        let lock_value = format!("{}#{}", self.config.id, self.acquisitions);
        match self.lease.acquire(&lock_key, &lock_value, self.config.ttl_ms).await {
            Ok(true) => {}
            Ok(false) => {
                self.probe.reached(Step::LeaseBusy { merchant }).await;
                return BatchOutcome::LeaseBusy;
            }
            Err(_) => return self.abandon(Abandon(AbandonReason::BackendError)).await,
        }
        self.probe.reached(Step::LeaseAcquired { merchant, acquisition: self.acquisitions }).await;

        let outcome = self.settle_rows(merchant).await;

        let released = self.lease.release(&lock_key, &lock_value).await.unwrap_or(false);
        self.probe.reached(Step::Released { released }).await;
        match outcome {
            Ok(()) => {
                self.probe.reached(Step::BatchCompleted { merchant }).await;
                BatchOutcome::Completed
            }
            Err(abandon) => self.abandon(abandon).await,
        }
    }

    async fn abandon(&self, Abandon(reason): Abandon) -> BatchOutcome {
        self.probe.reached(Step::BatchAbandoned { reason }).await;
        BatchOutcome::Abandoned(reason)
    }

    async fn settle_rows(&self, merchant: MerchantId) -> Result<(), Abandon> {
        let policy = self.config.mechanism.policy();
        let token = match policy.tokens {
            TokenPolicy::None => None,
            TokenPolicy::Incr => {
                let key = format!("fence:settle:{merchant}");
                let token =
                    self.tokens.next_token(&key).await.map_err(|_| Abandon(AbandonReason::BackendError))?;
                self.probe.reached(Step::TokenTaken { token }).await;
                Some(token)
            }
        };
        let guard = self.config.mechanism.guard(token);

        let rows =
            self.store.open_refunds(merchant).await.map_err(|_| Abandon(AbandonReason::BackendError))?;
        let sending = rows.iter().filter(|r| r.state == RefundState::Sending).count() as u32;
        self.probe.reached(Step::RowsSelected { open: rows.len() as u32, sending }).await;

        for row in &rows {
            self.settle_row(row, guard).await?;
        }
        Ok(())
    }

    async fn settle_row(&self, row: &RefundRow, guard: WriteGuard) -> Result<(), Abandon> {
        // A row left in `sending` may mean a call already went out: ask before paying.
        let mut paid = None;
        if row.state == RefundState::Sending {
            let found =
                self.gateway.find(row.id).await.map_err(|_| Abandon(AbandonReason::GatewayUnavailable))?;
            self.probe.reached(Step::AfterLookup { refund: row.id, found: found.is_some() }).await;
            paid = found;
        }

        if !self.write(WriteKind::Claim, row.id, guard).await? {
            return Ok(());
        }
        self.probe.reached(Step::AfterClaim { refund: row.id }).await;

        let receipt = match paid {
            Some(receipt) => receipt,
            None => self
                .gateway
                .refund(row.id, row.amount)
                .await
                .map_err(|_| Abandon(AbandonReason::GatewayUnavailable))?,
        };
        self.probe.reached(Step::AfterGatewayCall { refund: row.id, receipt }).await;

        if self.write(WriteKind::Confirm, row.id, guard).await? {
            self.probe.reached(Step::AfterConfirm { refund: row.id }).await;
        }
        Ok(())
    }

    /// Runs one write. `Ok(true)`: a row was updated; `Ok(false)`: none was and the
    /// mechanism skips the row; `Err`: none was and the mechanism abandons the batch.
    async fn write(&self, kind: WriteKind, refund: RefundId, guard: WriteGuard) -> Result<bool, Abandon> {
        let outcome = match kind {
            WriteKind::Claim => self.store.claim(refund, guard).await,
            WriteKind::Confirm => self.store.confirm(refund, guard).await,
        }
        .map_err(|_| Abandon(AbandonReason::BackendError))?;
        if outcome.rows_updated > 0 {
            return Ok(true);
        }
        match (self.config.mechanism.policy().on_rejected_write, guard) {
            (OnRejectedWrite::Abandon, WriteGuard::Fence(token)) => {
                let violation = FenceViolation { refund, token, write: kind };
                self.probe.reached(Step::FenceViolation { violation }).await;
                Err(Abandon(AbandonReason::FenceViolation))
            }
            _ => {
                self.probe.reached(Step::WriteSkipped { refund, write: kind }).await;
                Ok(false)
            }
        }
    }
}
