//! The second store: the settlement ledger posts each refund at most once, and at rest
//! each merchant's balance is what its sent refunds add up to.

use crate::check::facts::{Breach, Facts, PerRow};
use fencesim_model::{Cents, MerchantId, RefundState, WorkerId};
use fencesim_sim::EventKind;
use std::collections::BTreeMap;

/// posted-once: each refund is posted to the settlement ledger at most once, for its
/// row's amount.
///
/// What it misses: a refund never posted at all (balance-matches-sent sees that at rest),
/// and a journal line written without its posting event (it reads what the ledger
/// answered each worker, not the journal behind it).
pub fn posted_once(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut amounts: PerRow<Option<Cents>> = PerRow::new(facts.world);
    for row in &facts.world.rows {
        *amounts.slot(row.id) = Some(row.amount);
    }
    let mut first: PerRow<Option<(WorkerId, u64)>> = PerRow::new(facts.world);
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::SettlementPosted { worker, epoch, refund, amount, rows: 1.., .. } = &event.kind else {
            continue;
        };
        let who = facts.who(*worker, *epoch);
        if let Some(expected) = amounts.get(*refund).filter(|expected| expected != amount) {
            let detail = format!("{refund} was posted for {amount} by {who}, but the row says {expected}");
            breaches.push(Breach { at_ms: event.at_ms, event: Some(index), detail });
        }
        match first.get(*refund) {
            None => *first.slot(*refund) = Some((*worker, event.at_ms)),
            Some((first_worker, first_at)) => breaches.push(Breach {
                at_ms: event.at_ms,
                event: Some(index),
                detail: format!(
                    "{refund} was posted to the settlement ledger twice: {amount} again, by {who}; {first_worker} had posted it at {}",
                    facts.at(first_at)
                ),
            }),
        }
    }
    breaches
}

/// balance-matches-sent, at rest: in a world with the settlement ledger, each merchant's
/// balance is the sum of its `sent` rows, to the cent.
///
/// What it misses: errors that cancel out within one merchant (a refund posted twice and
/// another never, for the same amount: posted-once sees the first), and a journal whose
/// lines disagree with the balance column while the balance itself is right.
pub fn balance_matches_sent(facts: &Facts<'_>) -> Vec<Breach> {
    let record = facts.record;
    if facts.world.settlement.is_none() || !record.settled {
        return Vec::new();
    }
    let mut sent: BTreeMap<MerchantId, Cents> = BTreeMap::new();
    for row in &record.final_rows {
        let total = sent.entry(row.merchant).or_default();
        if row.state == RefundState::Sent {
            total.0 += row.amount.0;
        }
    }
    let balances: BTreeMap<MerchantId, Cents> = record.settlement_balances.iter().copied().collect();
    let merchants: std::collections::BTreeSet<MerchantId> =
        sent.keys().chain(balances.keys()).copied().collect();
    let mut breaches = Vec::new();
    for merchant in merchants {
        let rows = sent.get(&merchant).copied().unwrap_or_default();
        let balance = balances.get(&merchant).copied().unwrap_or_default();
        if rows != balance {
            let entries = record.settlement_entries.iter().filter(|entry| entry.merchant == merchant).count();
            breaches.push(Breach {
                at_ms: record.ended_at_ms,
                event: None,
                detail: format!(
                    "{merchant}'s settlement balance is {balance}, but its sent refunds add up to {rows} ({entries} ledger entries)"
                ),
            });
        }
    }
    breaches
}
