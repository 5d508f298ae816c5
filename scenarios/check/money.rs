//! Money: the gateway ledger moves each refund at most once, for its row's amount, and at
//! rest agrees with the rows to the cent.

use crate::check::facts::{Breach, Facts, PerRow};
use fencesim_model::{Cents, GatewayRef, RefundState, WorkerId};
use fencesim_sim::{CallOutcome, EventKind};

/// no-double-refund: the gateway ledger moves money at most once per refund id, for that
/// row's amount.
pub fn no_double_refund(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut row_amount: PerRow<Option<Cents>> = PerRow::new(facts.world);
    for row in &facts.world.rows {
        *row_amount.slot(row.id) = Some(row.amount);
    }
    let mut paid: PerRow<Option<(u32, WorkerId, u64)>> = PerRow::new(facts.world);
    for (index, event) in facts.record.events.iter().enumerate() {
        let EventKind::RefundCalled {
            worker,
            epoch,
            refund,
            amount,
            outcome: CallOutcome::Created,
            gateway_ref,
            ..
        } = &event.kind
        else {
            continue;
        };
        if let Some(expected) = row_amount.get(*refund) {
            if expected != *amount {
                breaches.push(Breach {
                    at_ms: event.at_ms,
                    event: Some(index),
                    detail: format!(
                        "{refund} was refunded {amount} by {}, but the row says {expected}",
                        facts.who(*worker, *epoch)
                    ),
                });
            }
        }
        match paid.get(*refund) {
            None => *paid.slot(*refund) = Some((*gateway_ref, *worker, event.at_ms)),
            Some((first_ref, first_worker, first_at)) => breaches.push(Breach {
                at_ms: event.at_ms, event: Some(index),
                detail: format!(
                    "{refund} was refunded twice: {amount} again, as {}, by {}; {first_worker}'s {} had paid it at {}",
                    GatewayRef(*gateway_ref),
                    facts.who(*worker, *epoch),
                    GatewayRef(first_ref),
                    facts.at(first_at)
                ),
            }),
        }
    }
    breaches
}

/// ledger-matches-rows, at rest: every `sent` row has exactly one ledger entry, and the
/// sums agree to the cent.
pub fn ledger_matches_rows(facts: &Facts<'_>) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let record = facts.record;
    let end = record.ended_at_ms;
    if record.settled {
        let mut entries: PerRow<u32> = PerRow::new(facts.world);
        for entry in &record.ledger {
            *entries.slot(entry.refund) += 1;
        }
        for row in record.final_rows.iter().filter(|row| row.state == RefundState::Sent) {
            let count = entries.get(row.id);
            if count != 1 {
                breaches.push(Breach {
                    at_ms: end,
                    event: None,
                    detail: format!("{} is sent but the ledger holds {count} refunds for it", row.id),
                });
            }
        }
        let rows: Cents =
            record.final_rows.iter().filter(|row| row.state == RefundState::Sent).map(|row| row.amount).sum();
        let ledger: Cents = record.ledger.iter().map(|entry| entry.amount).sum();
        if rows != ledger {
            breaches.push(Breach {
                at_ms: end,
                event: None,
                detail: format!("in all, the sent rows add up to {rows} but the gateway moved {ledger} (this check of the totals counts once, beside one breach per row)"),
            });
        }
    }
    breaches
}
