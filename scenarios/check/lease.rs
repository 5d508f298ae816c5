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
/// A renewal that extends the key while another worker holds it breaks it too, and so
/// does a worker that goes on as the holder when Redis granted it nothing (an acquisition
/// whose refusal was not read).
///
/// What it misses: a lease key a restart or a failover kept, taken or removed by someone
/// else afterwards (the instance's holders are forgotten there); a holder that extends
/// its own lease after it has lost it and got it back under the same value (a value that
/// is not unique per acquisition); and an acquisition that ignores its answer on a free
/// key (its `SET NX` was granted, so nothing went wrong yet).
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
            EventKind::LeaseRearmed { worker, instance, key, holder: Some(_), .. }
            | EventKind::LeaseExtended { worker, instance, key, extended: true } => {
                if let Some((owner, value)) = holder.get(&(*instance, key.as_str())) {
                    if owner != worker {
                        let how = match &event.kind {
                            EventKind::LeaseRearmed { .. } => "re-armed the expiry of",
                            _ => "renewed",
                        };
                        breaches.push(Breach {
                            at_ms: event.at_ms, event: Some(index),
                            detail: format!(
                                "{worker} {how} {key} while the key held {owner}'s lease (value {value}), not {worker}'s: a lease was kept alive by someone who does not hold it"
                            ),
                        });
                    }
                }
            }
            EventKind::Step { worker, step: Step::LeaseAcquired { merchant, .. } }
                if !granted_since_asked(facts, index, *worker) =>
            {
                breaches.push(Breach {
                    at_ms: event.at_ms,
                    event: Some(index),
                    detail: format!(
                        "{worker} went on as the holder of {}, but Redis granted it nothing: its acquisition's answer was not read",
                        facts.world.mechanism.spec().lease_key_of(*merchant, *worker)
                    ),
                });
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

/// Did Redis answer `worker` with grants from a majority of the lease's instances (a
/// `SET NX` it won, or a `SET` it made, on each) since the worker last took up a job or
/// an acquisition, before its step at `index`? What the instances did with the key after
/// they answered (a restart that lost it) is not the worker's reading of the answers.
fn granted_since_asked(facts: &Facts<'_>, index: usize, worker: WorkerId) -> bool {
    let events = &facts.record.events[..index];
    let asked = events.iter().rposition(|event| {
        matches!(&event.kind, EventKind::Step { worker: w, step: Step::JobReceived { .. } | Step::LeaseAcquired { .. } | Step::LeaseBusy { .. } } if *w == worker)
    });
    // one bit per instance that granted it (at most eight, as the ledger's)
    let granted = events[asked.map_or(0, |at| at + 1)..].iter().fold(0u8, |bits, event| match &event.kind {
        EventKind::LeaseGranted { worker: w, instance, .. }
        | EventKind::LeaseSet { worker: w, instance, .. }
            if *w == worker =>
        {
            bits | 1 << instance
        }
        _ => bits,
    });
    granted.count_ones() as usize > facts.world.redis_instances() / 2
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
                        detail: format!(
                            "{worker} and {other} both believe they hold {}",
                            facts.world.mechanism.spec().lease_key_of(*merchant, *worker)
                        ),
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
