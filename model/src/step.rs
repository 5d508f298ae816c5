//! The points of the protocol a worker reaches, as the probe sees them, and why a batch
//! can end early. `StepKind` (a step without its data) is derived from `Step`, so a new
//! step is one new variant and every count and list follows.

use crate::ids::{MerchantId, RefundId, Token};
use crate::job::Job;
use crate::refund::{FenceViolation, GatewayCall, GatewayError, Receipt, WriteKind};
use crate::settlement::SettlementViolation;
use serde::{Deserialize, Serialize};
use strum::{EnumCount, EnumDiscriminants, EnumIter, IntoStaticStr};

/// A point of the protocol a worker reaches, with what it knows there. The probe sees each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, EnumDiscriminants)]
#[serde(tag = "step", rename_all = "snake_case")]
#[strum_discriminants(
    name(StepKind),
    doc = "The step without its data: what a fault trigger names.",
    derive(PartialOrd, Ord, Hash, Serialize, Deserialize, EnumCount, EnumIter, IntoStaticStr),
    serde(rename_all = "snake_case"),
    strum(serialize_all = "kebab-case")
)]
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
    /// The worker asked Redis whether the lease is still its own, right before a write.
    LeaseChecked {
        /// The row about to be written, or none for the check right after the token.
        refund: Option<RefundId>,
        held: bool,
    },
    /// The background renewal ran.
    LeaseRenewed {
        renewed: bool,
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
    /// A gateway request failed; the worker retries, looks the refund up, or gives up.
    /// `attempt` counts this request's tries for the row, from 1.
    GatewayFailed {
        refund: RefundId,
        call: GatewayCall,
        error: GatewayError,
        attempt: u32,
    },
    /// A fenced write updated no row because the row is already `sent` under a fence the
    /// token would have passed: another holder finished it. No fence turned this write
    /// away; what the worker does next is its mechanism's choice.
    RowAlreadySent {
        refund: RefundId,
        write: WriteKind,
        token: Token,
        /// The fence the finished row holds.
        fence: i64,
    },
    /// A row found in `sending`: the worker asked the settlement ledger whether the refund
    /// is posted already (a holder before it may have posted and stopped short of the confirm).
    AfterSettlementLookup {
        refund: RefundId,
        posted: bool,
    },
    /// The refund is posted to the settlement ledger and the confirm has not gone out yet.
    AfterPost {
        refund: RefundId,
    },
    /// A fenced write to the settlement ledger changed nothing: its fence is newer.
    SettlementFenceViolation {
        violation: SettlementViolation,
    },
    // New steps go last: a trace's hash includes each step's variant position.
}

/// Why a batch was given up. The job is not acked, so the queue hands it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbandonReason {
    FenceViolation,
    /// The worker learned that its lease is gone (a failed check or renewal).
    LeaseLost,
    GatewayUnavailable,
    BackendError,
    /// A refund call's outcome stayed unknown: it timed out and no lookup could tell.
    OutcomeUnknown,
    /// A write found its row already `sent` by another holder, and the mechanism gives
    /// the batch up for it.
    RowAlreadySent,
}

impl std::fmt::Display for AbandonReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AbandonReason::FenceViolation => "fence violation",
            AbandonReason::LeaseLost => "lease lost",
            AbandonReason::GatewayUnavailable => "gateway unavailable",
            AbandonReason::BackendError => "backend error",
            AbandonReason::OutcomeUnknown => "refund outcome unknown",
            AbandonReason::RowAlreadySent => "a row already sent by another holder",
        })
    }
}

impl Step {
    pub fn kind(&self) -> StepKind {
        StepKind::from(self)
    }
}

impl StepKind {
    /// Every step kind, in declaration order.
    pub fn all() -> impl Iterator<Item = StepKind> {
        <StepKind as strum::IntoEnumIterator>::iter()
    }

    /// `after-claim`, `lease-acquired`, ...
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether a batch reaches this step once per row (or per try of a row's request),
    /// rather than once or twice per batch.
    pub fn per_row(self) -> bool {
        match self {
            StepKind::LeaseChecked
            | StepKind::AfterLookup
            | StepKind::AfterClaim
            | StepKind::AfterGatewayCall
            | StepKind::AfterConfirm
            | StepKind::WriteSkipped
            | StepKind::GatewayFailed
            | StepKind::RowAlreadySent
            | StepKind::AfterSettlementLookup
            | StepKind::AfterPost => true,
            StepKind::JobReceived
            | StepKind::LeaseAcquired
            | StepKind::LeaseBusy
            | StepKind::TokenTaken
            | StepKind::RowsSelected
            | StepKind::LeaseRenewed
            | StepKind::FenceViolation
            | StepKind::BatchAbandoned
            | StepKind::BatchCompleted
            | StepKind::Released
            | StepKind::SettlementFenceViolation => false,
        }
    }
}
