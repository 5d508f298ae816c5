//! Rows: a row is confirmed only by the lease that claimed it last, accepted writes never
//! go back to an older lease, and rows move only forward through their states.

use crate::check::facts::{Breach, Facts, PerRow};
use fencesim_model::{RefundState, Step, Token, WorkerId, WriteKind};
use fencesim_sim::EventKind;
use std::collections::BTreeMap;

/// no-stale-confirm: a row reaches `sent` only by the epoch that made its last accepted claim.
pub fn no_stale_confirm(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut last_claim: PerRow<Option<(Option<u32>, WorkerId)>> = PerRow::new(facts.world);
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::Write { worker, epoch, write, refund, rows, .. } = &event.kind else {
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
                    at_ms: event.at_ms,
                    event: Some(index),
                    detail: format!(
                        "{refund} was confirmed as sent by {}, but its last accepted claim was made by {}",
                        facts.who(*worker, *epoch),
                        facts.who(claimer, claim_epoch)
                    ),
                }),
                None => breaches.push(Breach {
                    at_ms: event.at_ms,
                    event: Some(index),
                    detail: format!(
                        "{refund} was confirmed as sent by {} without any accepted claim",
                        facts.who(*worker, *epoch)
                    ),
                }),
            },
        }
    }
    breaches
}

/// monotonic-fences: per row, accepted writes never go back to an older epoch and the
/// stored fence never goes down; per counter, tokens are issued strictly increasing.
///
/// What it misses: under a mechanism that waits for the replica, a token issued again
/// after the worker it was first issued to let it go unused (its wait failed): never used,
/// it is not counted.
pub fn monotonic_fences(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut last_writer: PerRow<Option<(u32, WorkerId)>> = PerRow::new(facts.world);
    let mut fence: PerRow<i64> = PerRow::new(facts.world);
    for row in &facts.world.rows {
        *fence.slot(row.id) = row.fence;
    }
    for (index, event) in facts.record.events.iter().enumerate() {
        match &event.kind {
            EventKind::Write { worker, epoch, write, refund, rows, after, .. } if *rows > 0 => {
                if let Some(epoch) = epoch {
                    let last = last_writer.get(*refund);
                    if let Some((newest, newest_worker)) = last {
                        if *epoch < newest {
                            breaches.push(Breach {
                                at_ms: event.at_ms, event: Some(index),
                                detail: format!(
                                    "{refund} accepted a {write} from {} after {} had written it: the row went back to an older lease",
                                    facts.who(*worker, Some(*epoch)),
                                    facts.who(newest_worker, Some(newest))
                                ),
                            });
                        }
                    }
                    if *epoch >= last.map_or(0, |writer| writer.0) {
                        *last_writer.slot(*refund) = Some((*epoch, *worker));
                    }
                }
                if let Some(image) = after {
                    let before = fence.replace(*refund, image.fence);
                    if image.fence < before {
                        breaches.push(Breach {
                            at_ms: event.at_ms, event: Some(index),
                            detail: format!("{refund}'s stored fence went down from {before} to {} on a {write} by {worker}", image.fence),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    breaches.extend(tokens_rise(facts));
    breaches.sort_by_key(|breach| breach.event);
    breaches
}

/// Per counter, the tokens issued for use rise strictly. A token counts when Redis issues
/// it; under a mechanism that waits for the replica, once its worker takes it for a batch
/// (after the replica acknowledged it): a token whose wait failed is never used, and a
/// failover may rightly issue it again.
fn tokens_rise(facts: &Facts<'_>) -> Vec<Breach> {
    let waits = facts.world.mechanism.spec().wait_replica;
    let events = &facts.record.events;
    let mut breaches = Vec::new();
    let mut tokens: BTreeMap<&str, BTreeMap<usize, Token>> = BTreeMap::new();
    let mut waiting: BTreeMap<WorkerId, (usize, &str, Token)> = BTreeMap::new();
    for (index, event) in events.iter().enumerate() {
        let counted = match &event.kind {
            EventKind::TokenIssued { worker, key, token } if waits && !key.starts_with("fence_seq:") => {
                waiting.insert(*worker, (index, key.as_str(), *token));
                None
            }
            EventKind::TokenIssued { key, token, .. } => Some((index, key.as_str(), *token)),
            EventKind::Step { worker, step: Step::TokenTaken { token } } => {
                waiting.remove(worker).filter(|(_, _, issued)| issued == token)
            }
            _ => None,
        };
        let Some((issued, key, token)) = counted else { continue };
        // in the order Redis issued them (a wait may be answered out of that order)
        let counted = tokens.entry(key).or_default();
        let before = counted.range(..issued).next_back().map(|(_, t)| *t);
        let after = counted.range(issued..).next().map(|(at, t)| (*at, *t));
        counted.insert(issued, token);
        let (at, token, previous) = match (before, after) {
            (Some(previous), _) if token <= previous => (issued, token, previous),
            (_, Some((later, next))) if next <= token => (later, next, token),
            _ => continue,
        };
        let EventKind::TokenIssued { worker, .. } = &events[at].kind else { continue };
        breaches.push(Breach {
            at_ms: events[at].at_ms,
            event: Some(at),
            detail: format!(
                "{key} issued token {token} to {worker} after token {previous}: tokens must only rise"
            ),
        });
    }
    breaches
}

/// state-machine: rows move only `pending -> sending -> sent`; `sent` is final; the table
/// at the end is what the writes left.
pub fn state_machine(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut state: PerRow<Option<RefundState>> = PerRow::new(facts.world);
    for row in &facts.world.rows {
        *state.slot(row.id) = Some(row.state);
    }
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::Write { worker, write, refund, rows, after, .. } = &event.kind else {
            continue;
        };
        if *rows == 0 {
            continue;
        }
        let Some(image) = after else {
            breaches.push(Breach {
                at_ms: event.at_ms,
                event: Some(index),
                detail: format!("a {write} of {refund} by {worker} changed a row the store did not return"),
            });
            continue;
        };
        let before = state.replace(*refund, Some(image.state)).unwrap_or(RefundState::Pending);
        let allowed = matches!(
            (write, before, image.state),
            (WriteKind::Claim, RefundState::Pending | RefundState::Sending, RefundState::Sending)
                | (WriteKind::Confirm, RefundState::Sending, RefundState::Sent)
        );
        if !allowed {
            breaches.push(Breach {
                at_ms: event.at_ms,
                event: Some(index),
                detail: format!("{refund} moved {before} -> {} on a {write} by {worker}", image.state),
            });
        }
    }
    for row in &facts.record.final_rows {
        let expected = state.get(row.id);
        if expected != Some(row.state) {
            breaches.push(Breach {
                at_ms: facts.record.ended_at_ms,
                event: None,
                detail: format!(
                    "{} is {} in the table at the end, but its recorded writes left it {:?}",
                    row.id, row.state, expected
                ),
            });
        }
    }
    breaches
}
