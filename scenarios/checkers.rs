//! The invariants, each a named function over the recorded history and the final state.
//!
//! Checkers judge by the truth, not by any worker's belief: every lease Redis really
//! granted is an epoch, and every write is attributed to the epoch of its writer's own
//! acquisition. Each breach names the event that caused it, in words.

use fencesim_model::{Cents, RefundId, RefundState, Step, Token, WorkerId, WriteKind};
use fencesim_sim::{CallOutcome, Epoch, EventKind, RunRecord, WallMs, WorldConfig};
use serde::Serialize;
use std::collections::BTreeMap;

/// When an invariant must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    Always,
    AtRest,
    OnceHealed,
    /// Shown, never failed: it breaks by design under pauses.
    Diagnostic,
}

/// One time an invariant did not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Breach {
    pub at_ms: u64,
    pub detail: String,
}

/// The verdict of one invariant over one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub invariant: &'static str,
    pub kind: CheckKind,
    pub breaches: Vec<Breach>,
}

impl Check {
    pub fn holds(&self) -> bool {
        self.breaches.is_empty()
    }

    /// A violation fails the run; a diagnostic does not.
    pub fn is_violation(&self) -> bool {
        !self.holds() && self.kind != CheckKind::Diagnostic
    }
}

/// The facts the checkers need about a run.
pub struct Facts<'a> {
    pub record: &'a RunRecord,
    pub world: &'a WorldConfig,
    pub base: WallMs,
}

impl Facts<'_> {
    fn at(&self, ms: u64) -> WallMs {
        self.base.plus(ms)
    }

    fn epoch(&self, number: Option<u32>) -> Option<&Epoch> {
        number.and_then(|n| self.record.epochs.get(n as usize - 1))
    }

    /// "B (epoch 2)", "A (epoch 1, whose lease expired at 10:00:30.000)".
    fn who(&self, worker: WorkerId, epoch: Option<u32>) -> String {
        match self.epoch(epoch) {
            None => format!("{worker} (holding no lease)"),
            Some(e) => match e.expired_at_ms {
                Some(at) => format!("{worker} (epoch {}, whose lease expired at {})", e.number, self.at(at)),
                None => format!("{worker} (epoch {})", e.number),
            },
        }
    }
}

/// A value per refund row, indexed by the refund's number: the checkers look rows up
/// once per event, so a dense table beats a map.
pub struct PerRow<T> {
    slots: Vec<T>,
}

impl<T: Clone + Default> PerRow<T> {
    pub fn new(world: &WorldConfig) -> PerRow<T> {
        let len = world.rows.iter().map(|r| r.id.0 as usize + 1).max().unwrap_or(0);
        PerRow { slots: vec![T::default(); len] }
    }

    pub fn get(&self, id: RefundId) -> T {
        self.slots.get(id.0 as usize).cloned().unwrap_or_default()
    }

    pub fn slot(&mut self, id: RefundId) -> &mut T {
        let i = id.0 as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, T::default());
        }
        &mut self.slots[i]
    }

    /// Sets the row's value and returns the one it had.
    pub fn replace(&mut self, id: RefundId, value: T) -> T {
        std::mem::replace(self.slot(id), value)
    }
}

type Checker = fn(&Facts<'_>) -> Check;

/// Every invariant of the design, in the order reports list them.
pub const CHECKERS: [Checker; 8] = [
    no_double_refund,
    no_stale_confirm,
    monotonic_fences,
    state_machine,
    lease_integrity,
    ledger_matches_rows,
    progress,
    single_holder,
];

/// The invariants' names, in the same order.
pub const INVARIANTS: [&str; 8] = [
    "no-double-refund",
    "no-stale-confirm",
    "monotonic-fences",
    "state-machine",
    "lease-integrity",
    "ledger-matches-rows",
    "progress",
    "single-holder",
];

pub fn check_all(facts: &Facts<'_>) -> Vec<Check> {
    CHECKERS.iter().map(|c| c(facts)).collect()
}

/// The gateway ledger moves money at most once per refund id, for that row's amount.
pub fn no_double_refund(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    let mut row_amount: PerRow<Option<Cents>> = PerRow::new(f.world);
    for row in &f.world.rows {
        *row_amount.slot(row.id) = Some(row.amount);
    }
    let mut paid: PerRow<Option<(u32, WorkerId, u64)>> = PerRow::new(f.world);
    for e in &f.record.events {
        let EventKind::RefundCalled {
            worker,
            epoch,
            refund,
            amount,
            outcome: CallOutcome::Created,
            gateway_ref,
            ..
        } = &e.kind
        else {
            continue;
        };
        if let Some(expected) = row_amount.get(*refund) {
            if expected != *amount {
                breaches.push(Breach {
                    at_ms: e.at_ms,
                    detail: format!(
                        "{refund} was refunded {amount} by {}, but the row says {expected}",
                        f.who(*worker, *epoch)
                    ),
                });
            }
        }
        match paid.get(*refund) {
            None => *paid.slot(*refund) = Some((*gateway_ref, *worker, e.at_ms)),
            Some((first_ref, first_worker, first_at)) => breaches.push(Breach {
                at_ms: e.at_ms,
                detail: format!(
                    "{refund} was refunded twice: {amount} again, as refund #{gateway_ref}, by {}; {first_worker}'s refund #{first_ref} had paid it at {}",
                    f.who(*worker, *epoch),
                    f.at(first_at)
                ),
            }),
        }
    }
    Check { invariant: "no-double-refund", kind: CheckKind::Always, breaches }
}

/// A row reaches `sent` only by the epoch that made its last accepted claim.
pub fn no_stale_confirm(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    let mut last_claim: PerRow<Option<(Option<u32>, WorkerId)>> = PerRow::new(f.world);
    for e in &f.record.events {
        let EventKind::Write { worker, epoch, write, refund, rows, .. } = &e.kind else {
            continue;
        };
        if *rows == 0 {
            continue;
        }
        match write {
            WriteKind::Claim => *last_claim.slot(*refund) = Some((*epoch, *worker)),
            WriteKind::Confirm => match last_claim.get(*refund) {
                Some((claim_epoch, _)) if claim_epoch == *epoch => {}
                Some((claim_epoch, claimer)) => breaches.push(Breach {
                    at_ms: e.at_ms,
                    detail: format!(
                        "{refund} was confirmed as sent by {}, but its last accepted claim was made by {}",
                        f.who(*worker, *epoch),
                        f.who(claimer, claim_epoch)
                    ),
                }),
                None => breaches.push(Breach {
                    at_ms: e.at_ms,
                    detail: format!(
                        "{refund} was confirmed as sent by {} without any accepted claim",
                        f.who(*worker, *epoch)
                    ),
                }),
            },
        }
    }
    Check { invariant: "no-stale-confirm", kind: CheckKind::Always, breaches }
}

/// Per row, accepted writes never go back to an older epoch and the stored fence never
/// goes down; per counter, tokens are issued strictly increasing.
pub fn monotonic_fences(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    let mut last_writer: PerRow<Option<(u32, WorkerId)>> = PerRow::new(f.world);
    let mut fence: PerRow<i64> = PerRow::new(f.world);
    for row in &f.world.rows {
        *fence.slot(row.id) = row.fence;
    }
    let mut tokens: BTreeMap<&str, Token> = BTreeMap::new();
    for e in &f.record.events {
        match &e.kind {
            EventKind::Write { worker, epoch, write, refund, rows, after, .. } if *rows > 0 => {
                if let Some(epoch) = epoch {
                    let last = last_writer.get(*refund);
                    if let Some((newest, newest_worker)) = last {
                        if *epoch < newest {
                            breaches.push(Breach {
                                at_ms: e.at_ms,
                                detail: format!(
                                    "{refund} accepted a {write} from {} after {} had written it: the row went back to an older lease",
                                    f.who(*worker, Some(*epoch)),
                                    f.who(newest_worker, Some(newest))
                                ),
                            });
                        }
                    }
                    if *epoch >= last.map_or(0, |w| w.0) {
                        *last_writer.slot(*refund) = Some((*epoch, *worker));
                    }
                }
                if let Some(image) = after {
                    let before = fence.replace(*refund, image.fence);
                    if image.fence < before {
                        breaches.push(Breach {
                            at_ms: e.at_ms,
                            detail: format!("{refund}'s stored fence went down from {before} to {} on a {write} by {worker}", image.fence),
                        });
                    }
                }
            }
            EventKind::TokenIssued { worker, key, token } => {
                if let Some(previous) = tokens.insert(key.as_str(), *token) {
                    if *token <= previous {
                        breaches.push(Breach {
                            at_ms: e.at_ms,
                            detail: format!("{key} issued token {token} to {worker} after token {previous}: tokens must only rise"),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Check { invariant: "monotonic-fences", kind: CheckKind::Always, breaches }
}

/// Rows move only `pending -> sending -> sent`; `sent` is final; the table at the end is
/// what the writes left.
pub fn state_machine(f: &Facts<'_>) -> Check {
    use RefundState::*;
    let mut breaches = Vec::new();
    let mut state: PerRow<Option<RefundState>> = PerRow::new(f.world);
    for row in &f.world.rows {
        *state.slot(row.id) = Some(row.state);
    }
    for e in &f.record.events {
        let EventKind::Write { worker, write, refund, rows, after, .. } = &e.kind else {
            continue;
        };
        if *rows == 0 {
            continue;
        }
        let Some(image) = after else {
            breaches.push(Breach {
                at_ms: e.at_ms,
                detail: format!("a {write} of {refund} by {worker} changed a row the store did not return"),
            });
            continue;
        };
        let before = state.replace(*refund, Some(image.state)).unwrap_or(Pending);
        let allowed = matches!(
            (write, before, image.state),
            (WriteKind::Claim, Pending | Sending, Sending) | (WriteKind::Confirm, Sending, Sent)
        );
        if !allowed {
            breaches.push(Breach {
                at_ms: e.at_ms,
                detail: format!("{refund} moved {before} -> {} on a {write} by {worker}", image.state),
            });
        }
    }
    for row in &f.record.final_rows {
        let expected = state.get(row.id);
        if expected != Some(row.state) {
            breaches.push(Breach {
                at_ms: f.record.ended_at_ms,
                detail: format!(
                    "{} is {} in the table at the end, but its recorded writes left it {:?}",
                    row.id, row.state, expected
                ),
            });
        }
    }
    Check { invariant: "state-machine", kind: CheckKind::Always, breaches }
}

/// A lease key is taken only by `SET NX` and removed only by its own holder or by
/// expiry: nobody frees or overwrites another worker's live lease.
pub fn lease_integrity(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    // who holds each (instance, key) now, as Redis granted it
    let mut holder: BTreeMap<(u8, &str), (WorkerId, &str)> = BTreeMap::new();
    for e in &f.record.events {
        match &e.kind {
            EventKind::LeaseGranted { worker, instance, key, value, .. } => {
                holder.insert((*instance, key.as_str()), (*worker, value.as_str()));
            }
            EventKind::LeaseSet { worker, instance, key, value, .. } => {
                breaches.push(Breach {
                    at_ms: e.at_ms,
                    detail: format!(
                        "{worker} set {key} to {value} without NX: a lease was taken without asking"
                    ),
                });
                holder.insert((*instance, key.as_str()), (*worker, value.as_str()));
            }
            EventKind::LeaseExpired { instance, key, .. } => {
                holder.remove(&(*instance, key.as_str()));
            }
            EventKind::RedisRestarted { instance, .. } => holder.retain(|(i, _), _| i != instance),
            EventKind::LeaseReleased { worker, instance, key, deleted: true, .. }
            | EventKind::LeaseDeleted { worker, instance, key, holder: Some(_) } => {
                if let Some((owner, value)) = holder.remove(&(*instance, key.as_str())) {
                    if owner != *worker {
                        breaches.push(Breach {
                            at_ms: e.at_ms,
                            detail: format!(
                                "{worker} deleted {key} while it held {owner}'s lease (value {value}): the lock was freed under its holder"
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Check { invariant: "lease-integrity", kind: CheckKind::Always, breaches }
}

/// At rest: every `sent` row has exactly one ledger entry, and the sums agree to the cent.
pub fn ledger_matches_rows(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    let end = f.record.ended_at_ms;
    if f.record.settled {
        let mut entries: PerRow<u32> = PerRow::new(f.world);
        for entry in &f.record.ledger {
            *entries.slot(entry.refund) += 1;
        }
        for row in f.record.final_rows.iter().filter(|r| r.state == RefundState::Sent) {
            let n = entries.get(row.id);
            if n != 1 {
                breaches.push(Breach {
                    at_ms: end,
                    detail: format!("{} is sent but the ledger holds {n} refunds for it", row.id),
                });
            }
        }
        let rows: Cents =
            f.record.final_rows.iter().filter(|r| r.state == RefundState::Sent).map(|r| r.amount).sum();
        let ledger: Cents = f.record.ledger.iter().map(|e| e.amount).sum();
        if rows != ledger {
            breaches.push(Breach {
                at_ms: end,
                detail: format!("the sent rows add up to {rows} but the gateway moved {ledger}"),
            });
        }
    }
    Check { invariant: "ledger-matches-rows", kind: CheckKind::AtRest, breaches }
}

/// Once healed: every job completes within the settle bound after the last fault; a stall
/// is reported with its cause.
pub fn progress(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    if !f.record.settled {
        let cause = stall_cause(f);
        for (job, deliveries) in &f.record.open_jobs {
            breaches.push(Breach {
                at_ms: f.record.ended_at_ms,
                detail: format!(
                    "{} for {} was not done {} ms after the last fault ({} deliveries); {cause}",
                    job.id, job.merchant, f.world.settle_ms, deliveries
                ),
            });
        }
    }
    Check { invariant: "progress", kind: CheckKind::OnceHealed, breaches }
}

fn stall_cause(f: &Facts<'_>) -> String {
    let last_violation = f.record.events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Step { worker, step: Step::FenceViolation { violation } } => {
            Some((e.at_ms, *worker, *violation))
        }
        _ => None,
    });
    match last_violation {
        Some((at, worker, v)) => {
            let stored = f.record.final_rows.iter().find(|r| r.id == v.refund).map_or(0, |r| r.fence);
            format!(
                "cause: every attempt is turned away, last at {} when {worker}'s {} of {} with token {} updated 0 rows (stored fence {stored})",
                f.at(at),
                v.write,
                v.refund,
                v.token
            )
        }
        None => "cause: no worker finished a batch (no fence violation was recorded)".to_owned(),
    }
}

/// Diagnostic: at most one worker believes it holds a merchant's lease at a time.
pub fn single_holder(f: &Facts<'_>) -> Check {
    let mut breaches = Vec::new();
    let mut believers: BTreeMap<WorkerId, (fencesim_model::MerchantId, u64)> = BTreeMap::new();
    for e in &f.record.events {
        let EventKind::Step { worker, step } = &e.kind else {
            continue;
        };
        match step {
            Step::LeaseAcquired { merchant, .. } => {
                if let Some((other, _)) = believers.iter().find(|(w, (m, _))| *w != worker && m == merchant) {
                    breaches.push(Breach {
                        at_ms: e.at_ms,
                        detail: format!("{worker} and {other} both believe they hold lock:settle:{merchant}"),
                    });
                }
                believers.insert(*worker, (*merchant, e.at_ms));
            }
            Step::Released { .. } | Step::BatchAbandoned { .. } => {
                believers.remove(worker);
            }
            _ => {}
        }
    }
    Check { invariant: "single-holder", kind: CheckKind::Diagnostic, breaches }
}

/// The first breach of every invariant that does not hold, as the run's violations.
pub fn violations(checks: &[Check]) -> impl Iterator<Item = (&Check, &Breach)> {
    checks.iter().filter(|c| c.is_violation()).map(|c| (c, &c.breaches[0]))
}
