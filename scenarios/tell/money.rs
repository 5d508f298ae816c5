//! The money a run moved through the gateway, in figures and in words: what left the
//! merchant, for how many refunds, and what was paid more than once. The demo, the failure
//! story and the timeline page all say it from here; a test holds it to the gateway's own
//! ledger (`tests/told_truth.rs`).

use fencesim_model::{group_thousands, Cents, RefundId};
use fencesim_sim::{CallOutcome, Event, EventKind};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MoneyView {
    /// Cents that left the merchant, in all.
    pub moved: i64,
    /// Payments the gateway made (refunds it created).
    pub payments: usize,
    /// Refunds paid at least once.
    pub refunds: usize,
    /// Refunds paid more than once, and the cents their later payments moved.
    pub paid_twice: usize,
    pub extra: i64,
}

/// What the run's payments moved: every call the gateway answered by creating a refund.
pub fn money_view(events: &[Event]) -> MoneyView {
    let mut per_refund: BTreeMap<RefundId, u32> = BTreeMap::new();
    let mut money = MoneyView::default();
    for event in events {
        let EventKind::RefundCalled { refund, amount, outcome: CallOutcome::Created, .. } = &event.kind
        else {
            continue;
        };
        let paid = per_refund.entry(*refund).or_default();
        *paid += 1;
        money.moved += amount.0;
        money.payments += 1;
        if *paid == 2 {
            money.paid_twice += 1;
        }
        if *paid > 1 {
            money.extra += amount.0;
        }
    }
    money.refunds = per_refund.len();
    money
}

fn refunds(count: usize) -> String {
    match count {
        1 => "1 refund".to_owned(),
        _ => format!("{} refunds", group_thousands(count as u64)),
    }
}

/// "84,300.00 EUR left the merchant in 1,200 payments for 1,200 refunds; no refund was
/// paid twice".
pub fn money_words(money: &MoneyView) -> String {
    let twice = match money.paid_twice {
        0 => "no refund was paid twice".to_owned(),
        n => format!("{} paid more than once, {} more than was owed", refunds(n), Cents(money.extra)),
    };
    format!(
        "{} left the merchant in {} payment{} for {}; {twice}",
        Cents(money.moved),
        group_thousands(money.payments as u64),
        if money.payments == 1 { "" } else { "s" },
        refunds(money.refunds)
    )
}
