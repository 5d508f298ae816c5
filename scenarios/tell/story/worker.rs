//! A worker's own steps, in words: the ones a reader needs (rows selected, lease busy,
//! fence violations, batches abandoned or completed); the routine steps stay silent.

use crate::tell::story::narrator::{fmt_ms, Narrator};
use fencesim_model::{Step, WorkerId};

impl Narrator<'_> {
    pub(super) fn step(&mut self, at: u64, worker: WorkerId, step: &Step) {
        if let Step::RowsSelected { .. } = step {
            self.selected_at.insert(worker, at);
            self.claimed.remove(&worker);
        }
        let (text, diagram) = match step {
            Step::RowsSelected { open, sending } => (
                format!("selects {} open refunds, {sending} of them in sending", fmt_ms(u64::from(*open))),
                vec![format!("{worker}->>D: select open rows"), format!("D-->>{worker}: {open} rows")],
            ),
            Step::LeaseBusy { merchant } => (
                format!("cannot take the lease of {merchant}: stops and leaves the job to the queue"),
                vec![],
            ),
            Step::FenceViolation { violation } => (
                format!(
                    "FenceViolation: its {} of {} with token {} was turned away by the row",
                    violation.write, violation.refund, violation.token
                ),
                vec![format!("Note over {worker}: FenceViolation")],
            ),
            Step::RowAlreadySent { refund, write, token, fence } => (
                format!(
                    "its {write} of {refund} with token {token} finds the row already sent, under fence {fence}: \
                     another holder finished it, and no fence turned this write away"
                ),
                vec![format!("Note over {worker}: {refund} already sent")],
            ),
            Step::SettlementFenceViolation { violation } => (
                format!(
                    "FenceViolation: its {} with token {} was turned away by the settlement ledger's fence",
                    match violation.refund {
                        Some(refund) => format!("{} of {refund}", violation.write),
                        None => violation.write.to_string(),
                    },
                    violation.token
                ),
                vec![format!("Note over {worker}: FenceViolation (settlement ledger)")],
            ),
            Step::BatchAbandoned { reason } => (
                format!("abandons the batch ({reason}), without acking the job"),
                vec![format!("Note over {worker}: abandons the batch")],
            ),
            Step::BatchCompleted { merchant } => (
                format!("completes the batch for {merchant}"),
                vec![format!("Note over {worker}: batch complete")],
            ),
            Step::GatewayFailed { refund, call, error, attempt } => (
                format!("its {call} for {refund} failed ({error}), try {attempt}"),
                vec![format!("Note over {worker}: {call} failed: {error}")],
            ),
            // routine steps: the events of the components they touch tell them
            Step::JobReceived { .. }
            | Step::LeaseAcquired { .. }
            | Step::TokenTaken { .. }
            | Step::LeaseChecked { .. }
            | Step::LeaseRenewed { .. }
            | Step::AfterLookup { .. }
            | Step::AfterClaim { .. }
            | Step::AfterGatewayCall { .. }
            | Step::AfterConfirm { .. }
            | Step::WriteSkipped { .. }
            | Step::AfterSettlementLookup { .. }
            | Step::AfterPost { .. }
            | Step::Released { .. } => return,
        };
        self.push(at, worker, text, diagram)
    }
}
