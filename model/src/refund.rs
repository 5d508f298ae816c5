//! The refund row, the write guard a mechanism puts on each write, and the fence violation;
//! the gateway's receipt, the calls a worker makes to the gateway and how they fail.

use crate::ids::{Cents, MerchantId, RefundId, Token};
use serde::{Deserialize, Serialize};
use std::fmt;

/// `pending -> sending -> sent`; `sent` is final. A row in `sending` may mean a gateway
/// call already went out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefundState {
    Pending,
    Sending,
    Sent,
}

impl RefundState {
    pub fn as_sql(self) -> &'static str {
        match self {
            RefundState::Pending => "pending",
            RefundState::Sending => "sending",
            RefundState::Sent => "sent",
        }
    }

    pub fn from_sql(text: &str) -> Option<RefundState> {
        match text {
            "pending" => Some(RefundState::Pending),
            "sending" => Some(RefundState::Sending),
            "sent" => Some(RefundState::Sent),
            _ => None,
        }
    }
}

impl fmt::Display for RefundState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_sql())
    }
}

/// One refund as the store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefundRow {
    pub id: RefundId,
    pub merchant: MerchantId,
    pub amount: Cents,
    pub state: RefundState,
    pub fence: i64,
}

/// The state and fence of a row right after a write changed it, as the store returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RowImage {
    pub state: RefundState,
    pub fence: i64,
}

/// What a write carries so that the store can turn a stale writer away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WriteGuard {
    /// No predicate on the fence: whoever writes, wins (the TTL lease alone).
    Unfenced,
    /// The claim needs `fence < token` and stores the token; the confirm needs `fence = token`.
    Fence(Token),
}

impl WriteGuard {
    pub fn token(self) -> Option<Token> {
        match self {
            WriteGuard::Unfenced => None,
            WriteGuard::Fence(t) => Some(t),
        }
    }
}

/// The two writes of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteKind {
    /// `pending|sending -> sending`, before the gateway call.
    Claim,
    /// `sending -> sent`, after the gateway answered.
    Confirm,
}

impl fmt::Display for WriteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteKind::Claim => "claim",
            WriteKind::Confirm => "confirm",
        })
    }
}

/// What one write did: the row count the store reported and, when a row changed, its new
/// state and fence; when none did, the row as it stood (read back in the same turn on the
/// database), which tells a write turned away by a newer fence from one that found the row
/// already `sent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WriteOutcome {
    pub rows_updated: u64,
    pub after: Option<RowImage>,
    /// The row, unchanged, when the write updated nothing (`None` when a row changed, or
    /// there is no such row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<RowImage>,
}

impl WriteOutcome {
    /// Why a fenced write with `token` updated nothing, from the row it found: `true` when
    /// the row is `sent` under a fence the token's write would have passed (another holder
    /// finished it, no newer fence turned this one away).
    pub fn found_finished(&self, kind: WriteKind, token: Token) -> bool {
        let Some(row) = self.found.filter(|_| self.rows_updated == 0) else { return false };
        let fence_passes = match kind {
            WriteKind::Claim => row.fence < token.0,
            WriteKind::Confirm => row.fence == token.0,
        };
        row.state == RefundState::Sent && fence_passes
    }
}

/// A fenced write updated zero rows: the token is older than the row's fence (or, when the
/// row is already `sent` under an older fence, another holder finished it). Either way the
/// batch is abandoned under the article's rule, never retried with the same token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FenceViolation {
    pub refund: RefundId,
    pub token: Token,
    pub write: WriteKind,
}

impl fmt::Display for FenceViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fence violation: {} of {} with token {} updated 0 rows",
            self.write, self.refund, self.token
        )
    }
}

impl std::error::Error for FenceViolation {}

/// The gateway's answer for a refund: its own number for the money movement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Receipt {
    pub gateway_ref: u32,
    pub amount: Cents,
}

/// How a gateway call can fail. What the caller may conclude differs by kind, so a
/// careful caller handles each on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayError {
    /// Refused before it was processed (overloaded, down for a moment): nothing moved, and
    /// the same call may be tried again later.
    Unavailable,
    /// No answer in time: the call may or may not have moved money, now or later. Only a
    /// lookup by reference can tell.
    Timeout,
    /// Another call with the same idempotency key is in flight.
    Conflict,
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GatewayError::Unavailable => "gateway unavailable",
            GatewayError::Timeout => "timed out, outcome unknown",
            GatewayError::Conflict => "conflict: a call with the same idempotency key is in flight",
        })
    }
}

/// The two requests a worker makes to the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayCall {
    /// "Is there already a refund with this reference?"
    Lookup,
    /// "Refund this amount under this idempotency key."
    Refund,
}

impl fmt::Display for GatewayCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GatewayCall::Lookup => "lookup",
            GatewayCall::Refund => "refund call",
        })
    }
}
