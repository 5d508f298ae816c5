//! The simulated payment gateway: a money ledger, which is the truth about refunds, and
//! an idempotency record per key.
//!
//! Money moves when a call arrives; the response comes back after the call's latency. In
//! idempotent mode a key seen before moves no money: a finished key answers from its
//! record at once, a key still in flight answers when the first call completes.

use crate::history::{CallOutcome, EventKind};
use fencesim_model::{Cents, IdempotencyKey, Receipt, RefundId, WorkerId};
use serde::Serialize;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GatewayMode {
    /// The refund id is an idempotency key: a second call with it moves no money.
    Idempotent,
    /// Every call moves money.
    NonIdempotent,
}

impl GatewayMode {
    pub const ALL: [GatewayMode; 2] = [GatewayMode::Idempotent, GatewayMode::NonIdempotent];

    pub fn name(self) -> &'static str {
        match self {
            GatewayMode::Idempotent => "idempotent",
            GatewayMode::NonIdempotent => "non-idempotent",
        }
    }
}

fencesim_model::named_enum!(GatewayMode, "gateway mode");

/// One movement of money.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct LedgerEntry {
    pub gateway_ref: u32,
    pub refund: RefundId,
    pub amount: Cents,
    pub at_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct KeyRecord {
    receipt: Receipt,
    completes_at_ms: u64,
}

/// The gateway's answer to a call, and when the caller receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallReply {
    pub receipt: Receipt,
    pub outcome: CallOutcome,
    pub respond_at_ms: u64,
}

#[derive(Clone, Debug)]
pub struct GatewayCore {
    mode: GatewayMode,
    ledger: Vec<LedgerEntry>,
    /// Looked up, never iterated: a fixed-key hasher keeps it deterministic and draws
    /// nothing from the run's randomness.
    keys: HashMap<IdempotencyKey, KeyRecord, BuildHasherDefault<DefaultHasher>>,
}

impl GatewayCore {
    pub fn new(mode: GatewayMode) -> GatewayCore {
        GatewayCore::for_refunds(mode, 0)
    }

    /// A gateway sized for about `refunds` calls: its ledger and key table grow no further
    /// while the run stays near that, so no call copies a large table.
    pub fn for_refunds(mode: GatewayMode, refunds: usize) -> GatewayCore {
        let keys = HashMap::with_capacity_and_hasher(refunds, BuildHasherDefault::default());
        GatewayCore { mode, ledger: Vec::with_capacity(refunds), keys }
    }

    pub fn mode(&self) -> GatewayMode {
        self.mode
    }

    pub fn ledger(&self) -> &[LedgerEntry] {
        &self.ledger
    }

    /// A refund call arriving at `now_ms` whose processing takes `latency_ms`. With
    /// `refuse_concurrent`, a call whose key is still in flight gets a conflict.
    pub fn refund(
        &mut self,
        reference: RefundId,
        key: IdempotencyKey,
        amount: Cents,
        now_ms: u64,
        latency_ms: u64,
        refuse_concurrent: bool,
    ) -> CallReply {
        if self.mode == GatewayMode::Idempotent {
            if let Some(record) = self.keys.get(&key) {
                if refuse_concurrent && record.completes_at_ms > now_ms {
                    return CallReply {
                        receipt: record.receipt,
                        outcome: CallOutcome::Conflict,
                        respond_at_ms: now_ms + latency_ms.min(5),
                    };
                }
                return CallReply {
                    receipt: record.receipt,
                    outcome: CallOutcome::Replayed,
                    respond_at_ms: record.completes_at_ms.max(now_ms),
                };
            }
        }
        let gateway_ref = self.ledger.len() as u32 + 1;
        self.ledger.push(LedgerEntry { gateway_ref, refund: reference, amount, at_ms: now_ms });
        let receipt = Receipt { gateway_ref, amount };
        let completes_at_ms = now_ms + latency_ms;
        self.keys.entry(key).or_insert(KeyRecord { receipt, completes_at_ms });
        CallReply { receipt, outcome: CallOutcome::Created, respond_at_ms: completes_at_ms }
    }

    /// The first refund made with this reference, if any.
    /// A scan of the ledger: a worker looks up only the rows it found in `sending`, a few
    /// a batch, while every call would pay for an index.
    pub fn find(&self, reference: RefundId) -> Option<Receipt> {
        self.first_entry(reference).map(|e| Receipt { gateway_ref: e.gateway_ref, amount: e.amount })
    }

    /// The first refund with this reference whose money moved by `horizon_ms`: what a
    /// lookup answered from a copy that holds the ledger up to then sees.
    pub fn find_as_of(&self, reference: RefundId, horizon_ms: u64) -> Option<Receipt> {
        self.first_entry(reference)
            .filter(|e| e.at_ms <= horizon_ms)
            .map(|e| Receipt { gateway_ref: e.gateway_ref, amount: e.amount })
    }

    /// The first ledger entry of this reference (the ledger is in the order money moved).
    pub fn first_entry(&self, reference: RefundId) -> Option<&LedgerEntry> {
        self.ledger.iter().find(|e| e.refund == reference)
    }

    /// `worker`'s lookup of `reference` at `now_ms`, answered from a copy that holds the
    /// ledger up to `horizon` (none: nothing yet): what it finds, and the events that tell
    /// it (the lookup, and what the copy did not show yet).
    pub fn look_up(
        &self,
        worker: WorkerId,
        reference: RefundId,
        now_ms: u64,
        horizon: Option<u64>,
    ) -> (Option<Receipt>, Vec<EventKind>) {
        let found = horizon.and_then(|horizon| self.find_as_of(reference, horizon));
        let mut told =
            vec![EventKind::Lookup { worker, refund: reference, found: found.map(|r| r.gateway_ref) }];
        if let Some(entry) = self.first_entry(reference).filter(|_| found.is_none()) {
            told.push(EventKind::LookupBehind {
                worker,
                refund: reference,
                gateway_ref: entry.gateway_ref,
                paid_at_ms: entry.at_ms,
                behind_ms: now_ms - horizon.unwrap_or(0).min(now_ms),
            });
        }
        (found, told)
    }
}

/// The copy the gateway answers lookups from: the world's lag behind the ledger, and
/// stalled while a lookup-lag fault holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LookupCopy {
    /// It stopped catching up at the first time and starts again at the second.
    frozen: Option<(u64, u64)>,
}

impl LookupCopy {
    /// The copy stops catching up now, for `for_ms` (a freeze in force goes on from where
    /// it stopped, until the later end).
    pub fn freeze(&mut self, now_ms: u64, for_ms: u64) {
        self.frozen = Some(match self.frozen {
            Some((since, until)) if now_ms < until => (since, until.max(now_ms + for_ms)),
            Some(_) | None => (now_ms, now_ms + for_ms),
        });
    }

    /// Up to when the copy a lookup at `now_ms` reads holds the ledger, with a lag of
    /// `lag_ms` and any freeze in force; none when it holds nothing yet.
    pub fn horizon(&self, now_ms: u64, lag_ms: u64) -> Option<u64> {
        let caught_up_to = match self.frozen {
            Some((since, until)) if now_ms < until => since.min(now_ms),
            Some(_) | None => now_ms,
        };
        caught_up_to.checked_sub(lag_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idempotent_gateway_moves_money_once_per_key() {
        let mut g = GatewayCore::new(GatewayMode::Idempotent);
        let first =
            g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 31_005, 30, false);
        assert_eq!(first.outcome, CallOutcome::Created);
        assert_eq!(first.respond_at_ms, 31_035);
        // in flight: the second caller waits for the first call's answer
        let during =
            g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 31_010, 30, false);
        assert_eq!((during.outcome, during.respond_at_ms), (CallOutcome::Replayed, 31_035));
        // finished: answered from the record at once
        let after =
            g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 34_000, 30, false);
        assert_eq!(
            (after.outcome, after.respond_at_ms, after.receipt),
            (CallOutcome::Replayed, 34_000, first.receipt)
        );
        assert_eq!(g.ledger().len(), 1);
        assert_eq!(g.find(RefundId(815)), Some(first.receipt));
        assert_eq!(g.find(RefundId(816)), None);
    }

    /// Without idempotency every call pays again; a lookup by reference finds the first.
    #[test]
    fn a_lookup_finds_the_first_refund_of_a_reference_paid_twice() {
        let mut g = GatewayCore::new(GatewayMode::NonIdempotent);
        let first = g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 0, 30, false);
        g.refund(RefundId(908), IdempotencyKey::of(RefundId(908)), Cents(100), 5, 30, false);
        let again = g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 10, 30, false);
        assert_eq!((again.outcome, g.ledger().len()), (CallOutcome::Created, 3));
        assert_ne!(again.receipt, first.receipt);
        assert_eq!(g.find(RefundId(815)), Some(first.receipt));
    }

    /// A copy that holds the ledger up to a moment sees no refund made after it.
    #[test]
    fn a_lookup_from_a_copy_sees_only_what_moved_by_its_horizon() {
        let mut g = GatewayCore::new(GatewayMode::Idempotent);
        let paid = g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 26_120, 30, false);
        assert_eq!(g.find_as_of(RefundId(815), 26_119), None);
        assert_eq!(g.find_as_of(RefundId(815), 26_120), Some(paid.receipt));
        assert_eq!(g.find(RefundId(815)), Some(paid.receipt));
        assert_eq!(g.first_entry(RefundId(815)).map(|e| e.at_ms), Some(26_120));
    }

    #[test]
    fn a_concurrent_call_can_be_refused_with_a_conflict() {
        let mut g = GatewayCore::new(GatewayMode::Idempotent);
        g.refund(RefundId(1), IdempotencyKey::of(RefundId(1)), Cents(100), 0, 30, true);
        let during = g.refund(RefundId(1), IdempotencyKey::of(RefundId(1)), Cents(100), 10, 30, true);
        assert_eq!(during.outcome, CallOutcome::Conflict);
        let after = g.refund(RefundId(1), IdempotencyKey::of(RefundId(1)), Cents(100), 40, 30, true);
        assert_eq!(after.outcome, CallOutcome::Replayed);
        assert_eq!(g.ledger().len(), 1);
    }

    #[test]
    fn a_non_idempotent_gateway_pays_every_call() {
        let mut g = GatewayCore::new(GatewayMode::NonIdempotent);
        g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 31_005, 30, false);
        let again =
            g.refund(RefundId(815), IdempotencyKey::of(RefundId(815)), Cents(7025), 34_000, 30, false);
        assert_eq!(again.outcome, CallOutcome::Created);
        assert_eq!(g.ledger().iter().map(|e| e.amount).sum::<Cents>(), Cents(14_050));
    }

    #[test]
    fn modes_parse_by_name() {
        assert_eq!("non-idempotent".parse(), Ok(GatewayMode::NonIdempotent));
        assert!("sometimes".parse::<GatewayMode>().unwrap_err().contains("unknown gateway mode 'sometimes'"));
    }
}
