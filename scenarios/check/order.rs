//! Order: leases and the tokens they write with. Each lease Redis grants for a lock key
//! must write with a larger token than every earlier lease of that key (the whole point
//! of a fencing token), and, as a diagnostic, how many accepted writes a writer made after
//! its own lease had ended.

use crate::check::facts::{Breach, Facts};
use fencesim_model::Token;
use fencesim_sim::EventKind;
use std::collections::BTreeMap;

/// The tokens of each epoch's accepted writes: the smallest and the largest, and when the
/// smallest was first written.
#[derive(Clone, Copy)]
struct Written {
    least: Token,
    most: Token,
    first_at_ms: u64,
    /// The write that first carried the smallest token.
    first_event: usize,
}

fn written_by_epoch(facts: &Facts<'_>) -> BTreeMap<u32, Written> {
    let mut written: BTreeMap<u32, Written> = BTreeMap::new();
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::Write { epoch: Some(epoch), token: Some(token), rows, .. } = &event.kind else {
            continue;
        };
        if *rows == 0 {
            continue;
        }
        let entry = written.entry(*epoch).or_insert(Written {
            least: *token,
            most: *token,
            first_at_ms: event.at_ms,
            first_event: index,
        });
        if *token < entry.least {
            (entry.least, entry.first_at_ms, entry.first_event) = (*token, event.at_ms, index);
        }
        entry.most = entry.most.max(*token);
    }
    written
}

/// token-order: per lock key, in grant order, each lease's accepted writes carry a larger
/// token than any accepted write of an earlier lease of that key. Only writes that carry
/// a token count: a mechanism without tokens has nothing to order.
///
/// What it misses: a lease that wrote nothing, and a token order the rows never saw (two
/// leases whose tokens are out of order but whose writes were all turned away).
pub fn token_order(facts: &Facts<'_>) -> Vec<Breach> {
    let written = written_by_epoch(facts);
    let mut highest: BTreeMap<&str, (Token, u32)> = BTreeMap::new();
    let mut breaches = Vec::new();
    for epoch in &facts.record.epochs {
        let Some(mine) = written.get(&epoch.number) else { continue };
        if let Some(&(earlier, earlier_epoch)) = highest.get(epoch.key.as_str()) {
            if mine.least <= earlier {
                let holder = facts.record.epochs[earlier_epoch as usize - 1].worker;
                breaches.push(Breach {
                    at_ms: mine.first_at_ms,
                    event: Some(mine.first_event),
                    detail: format!(
                        "{} wrote with token {}, but {} of the earlier lease on {} had written with token {}: a later lease must write with a larger token",
                        facts.who(epoch.worker, Some(epoch.number)),
                        mine.least,
                        facts.who(holder, Some(earlier_epoch)),
                        epoch.key,
                        earlier
                    ),
                });
            }
        }
        let top = highest.entry(epoch.key.as_str()).or_insert((mine.most, epoch.number));
        if mine.most > top.0 {
            *top = (mine.most, epoch.number);
        }
    }
    breaches
}

/// writes-after-lease-end, a diagnostic: accepted writes made after the writer's own lease
/// had ended (expired, lost with a restart, deleted by someone else). Fencing may make them
/// harmless, but a run shows them: shown, never failed.
pub fn writes_after_lease_end(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::Write { worker, epoch: Some(number), write, refund, rows, .. } = &event.kind else {
            continue;
        };
        let Some(ended) = facts.record.epochs[*number as usize - 1].expired_at_ms else { continue };
        if *rows > 0 && ended <= event.at_ms {
            // a fenced run can make hundreds, and only the first is ever told: the rest are
            // counted with a short detail, which keeps this diagnostic cheap on every seed
            let detail = if breaches.is_empty() {
                format!(
                    "{}'s {write} of {refund} was accepted {} ms after its lease ended",
                    facts.who(*worker, Some(*number)),
                    event.at_ms - ended
                )
            } else {
                format!("{refund}")
            };
            breaches.push(Breach { at_ms: event.at_ms, event: Some(index), detail });
        }
    }
    breaches
}
