//! Which rows are routine: one claim from `pending`, one payment and one confirm by the
//! same lease. The story folds them into one line per stretch.

use fencesim_model::{RefundId, RefundState, WriteKind};
use fencesim_sim::{CallOutcome, Event, EventKind};
use std::collections::{BTreeMap, BTreeSet};

/// How far a row has got through one plain claim, pay, confirm by a single lease.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rhythm {
    Claimed(Option<u32>),
    Paid(Option<u32>),
    Done,
    Irregular,
}

/// The rows whose whole history is one claim from `pending`, one payment and one confirm
/// by the same lease: routine, told as a folded run. A skip by a worker without a token
/// does not count against a row; any other event on it does.
pub(crate) fn plain_rows(events: &[Event]) -> BTreeSet<RefundId> {
    let mut rhythm: BTreeMap<RefundId, Rhythm> = BTreeMap::new();
    for event in events {
        let (refund, next) = match &event.kind {
            EventKind::Write { rows: 0, token: None, .. } => continue,
            EventKind::Write { write, refund, rows, epoch, after, .. } => {
                let now = rhythm.get(refund).copied();
                let next = match (write, now, after) {
                    (WriteKind::Claim, None, Some(image))
                        if *rows == 1 && image.state == RefundState::Sending =>
                    {
                        Rhythm::Claimed(*epoch)
                    }
                    (WriteKind::Confirm, Some(Rhythm::Paid(by)), Some(_)) if *rows == 1 && by == *epoch => {
                        Rhythm::Done
                    }
                    _ => Rhythm::Irregular,
                };
                (refund, next)
            }
            EventKind::RefundCalled { refund, epoch, outcome, .. } => {
                let next = match rhythm.get(refund) {
                    Some(Rhythm::Claimed(by)) if *by == *epoch && *outcome == CallOutcome::Created => {
                        Rhythm::Paid(*epoch)
                    }
                    _ => Rhythm::Irregular,
                };
                (refund, next)
            }
            EventKind::Lookup { refund, .. } | EventKind::SettlementLookup { refund, .. } => {
                (refund, Rhythm::Irregular)
            }
            // a posting between the payment and the confirm, by the lease that paid
            EventKind::SettlementPosted { refund, epoch, rows, .. } => match rhythm.get(refund) {
                Some(Rhythm::Paid(by)) if *by == *epoch && *rows == 1 => continue,
                _ => (refund, Rhythm::Irregular),
            },
            _ => continue,
        };
        rhythm.insert(*refund, next);
    }
    rhythm.into_iter().filter(|(_, rhythm)| *rhythm == Rhythm::Done).map(|(id, _)| id).collect()
}
