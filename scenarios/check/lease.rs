//! Leases: nobody takes, frees or overwrites another worker's live lease; and, as a
//! diagnostic, how often two workers believed they held the same lease.

use crate::check::facts::{Breach, Facts};
use fencesim_model::{MerchantId, Step, WorkerId};
use fencesim_sim::EventKind;
use std::collections::BTreeMap;

/// lease-integrity: a lease key is taken only by `SET NX`, and removed or re-armed only by
/// its own holder (or removed by expiry): nobody frees, overwrites or keeps alive another
/// worker's live lease.
///
/// What it misses: a lease key a restart or a failover kept, taken or removed by someone
/// else afterwards (the instance's holders are forgotten there); and a holder that extends
/// its own lease after it has lost it and got it back
/// under the same value (a value that is not unique per acquisition).
pub fn lease_integrity(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    // who holds each (instance, key) now, as Redis granted it
    let mut holder: BTreeMap<(u8, &str), (WorkerId, &str)> = BTreeMap::new();
    for (index, event) in facts.record.events.iter().enumerate() {
        match &event.kind {
            EventKind::LeaseGranted { worker, instance, key, value, .. } => {
                holder.insert((*instance, key.as_str()), (*worker, value.as_str()));
            }
            EventKind::LeaseSet { worker, instance, key, value, .. } => {
                breaches.push(Breach {
                    at_ms: event.at_ms,
                    event: Some(index),
                    detail: format!(
                        "{worker} set {key} to {value} without NX: a lease was taken without asking"
                    ),
                });
                holder.insert((*instance, key.as_str()), (*worker, value.as_str()));
            }
            EventKind::LeaseExpired { instance, key, .. } => {
                holder.remove(&(*instance, key.as_str()));
            }
            EventKind::LeaseRearmed { worker, instance, key, holder: Some(_), .. } => {
                if let Some((owner, value)) = holder.get(&(*instance, key.as_str())) {
                    if owner != worker {
                        breaches.push(Breach {
                            at_ms: event.at_ms, event: Some(index),
                            detail: format!(
                                "{worker} re-armed the expiry of {key} while the key held {owner}'s lease (value {value}), not {worker}'s: a lease was kept alive by someone who does not hold it"
                            ),
                        });
                    }
                }
            }
            // what a restart or a failover keeps, nobody was granted again: the checker
            // forgets the instance's holders rather than guess which came back
            EventKind::RedisRestarted { instance, .. } | EventKind::RedisFailedOver { instance, .. } => {
                holder.retain(|(held_on, _), _| held_on != instance)
            }
            EventKind::LeaseReleased { worker, instance, key, deleted: true, .. }
            | EventKind::LeaseDeleted { worker, instance, key, holder: Some(_) } => {
                if let Some((owner, value)) = holder.remove(&(*instance, key.as_str())) {
                    if owner != *worker {
                        breaches.push(Breach {
                            at_ms: event.at_ms, event: Some(index),
                            detail: format!(
                                "{worker} deleted {key} while the key held {owner}'s lease (value {value}), not {worker}'s: the lock was freed under its holder"
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    breaches
}

/// single-holder, a diagnostic: at most one worker believes it holds a merchant's lease at
/// a time. It breaks by design under pauses: shown, never failed.
pub fn single_holder(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut believers: BTreeMap<WorkerId, (MerchantId, u64)> = BTreeMap::new();
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::Step { worker, step } = &event.kind else {
            continue;
        };
        match step {
            Step::LeaseAcquired { merchant, .. } => {
                let other =
                    believers.iter().find(|(believer, (held, _))| *believer != worker && held == merchant);
                if let Some((other, _)) = other {
                    breaches.push(Breach {
                        at_ms: event.at_ms,
                        event: Some(index),
                        detail: format!("{worker} and {other} both believe they hold lock:settle:{merchant}"),
                    });
                }
                believers.insert(*worker, (*merchant, event.at_ms));
            }
            Step::Released { .. } | Step::BatchAbandoned { .. } => {
                believers.remove(worker);
            }
            Step::JobReceived { .. }
            | Step::GatewayFailed { .. }
            | Step::LeaseBusy { .. }
            | Step::TokenTaken { .. }
            | Step::RowsSelected { .. }
            | Step::LeaseChecked { .. }
            | Step::LeaseRenewed { .. }
            | Step::AfterLookup { .. }
            | Step::AfterClaim { .. }
            | Step::AfterGatewayCall { .. }
            | Step::AfterConfirm { .. }
            | Step::WriteSkipped { .. }
            | Step::FenceViolation { .. }
            | Step::RowAlreadySent { .. }
            | Step::AfterSettlementLookup { .. }
            | Step::AfterPost { .. }
            | Step::SettlementFenceViolation { .. }
            | Step::BatchCompleted { .. } => {}
        }
    }
    breaches
}
