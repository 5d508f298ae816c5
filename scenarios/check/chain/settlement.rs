//! Chains of the second store's invariants: a refund posted twice to the settlement
//! ledger, and a balance at rest that is not what the sent refunds add up to.

use super::stale::stale;
use super::{breaking_event, Chain, ChainStep, Cx};
use crate::check::facts::{Breach, Facts};
use fencesim_model::{RefundId, RefundState, WriteKind};
use fencesim_sim::EventKind;

fn posted(kind: &EventKind, refund: RefundId) -> bool {
    matches!(kind, EventKind::SettlementPosted { refund: r, rows: 1.., .. } if *r == refund)
}

/// posted-once's chain: the first posting, the second, and why the second poster went
/// ahead: its lease had ended (a stale chain) and the ledger had no fence to turn it away,
/// or its fence was not checked.
///
/// How it is found: the second posting names its poster and epoch; the ledger of epochs
/// gives the stale chain (of the second poster, else of the first), the history the first
/// posting and the enrolment of the newer holder.
pub fn posting_chain(facts: &Facts<'_>, breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let index = match breaking_event(breach) {
        Ok(index) => index,
        Err(none) => return none,
    };
    let EventKind::SettlementPosted { worker, epoch, refund, token, .. } = &cx.events[index].kind else {
        return Chain::none("the breach is not a posting".to_owned());
    };
    let Some(first) = cx.events[..index].iter().rposition(|event| posted(&event.kind, *refund)) else {
        return Chain::none(format!("{refund} was posted once before this, by no posting in the history"));
    };
    let mut steps: Vec<ChainStep> = vec![cx.step(first), cx.step(index)];
    let EventKind::SettlementPosted { worker: first_worker, epoch: first_epoch, .. } = &cx.events[first].kind
    else {
        unreachable!("found as a posting")
    };
    let act = cx.step(index).text;
    let second = epoch.and_then(|number| stale(&cx, *worker, number, index));
    let stale = second.or_else(|| first_epoch.and_then(|number| stale(&cx, *first_worker, number, first)));
    let guard = match token {
        None => {
            "; the settlement ledger has no fence column to turn it away, however the refund rows are fenced"
        }
        Some(_) => "; the ledger's fence was newer than its token, and the posting went through all the same",
    };
    match stale {
        Some(stale) => {
            steps.extend(stale.steps);
            Chain::of(format!("{}{act}{guard}", stale.summary), steps)
        }
        None => Chain::of(
            format!(
                "{refund} was posted by {first_worker} and again by {worker}, whose lease was live: {act}"
            ),
            steps,
        ),
    }
}

/// balance-matches-sent's chain, at rest: the refund whose postings are not one, and the
/// events that made it so (a second posting's chain; a confirm that was never posted).
///
/// How it is found: the first refund posted twice, and its second posting's chain; else
/// the first sent row with no posting, and its confirm.
pub fn balance_chain(facts: &Facts<'_>, _breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let record = facts.record;
    let mut seen = std::collections::BTreeSet::new();
    let twice = (0..cx.events.len()).find(|&at| match &cx.events[at].kind {
        EventKind::SettlementPosted { refund, rows: 1.., .. } => !seen.insert(*refund),
        _ => false,
    });
    if let Some(second) = twice {
        let breach = Breach { at_ms: cx.events[second].at_ms, event: Some(second), detail: String::new() };
        return posting_chain(facts, &breach);
    }
    let sent = record.final_rows.iter().filter(|row| row.state == RefundState::Sent);
    let Some(row) = sent.clone().find(|row| !seen.contains(&row.id)) else {
        return Chain::none(
            "every sent refund is posted once; the balance differs by postings of rows not sent".to_owned(),
        );
    };
    let confirm = cx.events.iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund, write: WriteKind::Confirm, rows: 1.., .. } if *refund == row.id)
    });
    let Some(confirm) = confirm else { return Chain::none(format!("{} was never confirmed", row.id)) };
    let summary = format!(
        "{} is sent, but it was never posted to the settlement ledger: {}",
        row.id,
        cx.step(confirm).text
    );
    Chain::of(summary, vec![cx.step(confirm)])
}
