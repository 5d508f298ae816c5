//! The refund store's events, in words: claims and confirms, accepted or turned away.
//! Routine rows fold into one line per stretch.

use crate::tell::story::narrator::{rows_word, sent_by_words, Narrator, RunKind};
use fencesim_model::{RefundId, RefundState, WorkerId, WriteKind};
use fencesim_sim::{Actor, EventKind};

impl Narrator<'_> {
    pub(super) fn store_event(&mut self, at: u64, kind: &EventKind) {
        if let EventKind::RefundsArrived { merchant, refunds, .. } = kind {
            let text = format!("{refunds} new {} of {merchant} arrive", refunds_word(*refunds));
            return self.push(
                at,
                Actor::Store,
                text,
                vec![format!("Note over D: {refunds} new for {merchant}")],
            );
        }
        if let EventKind::StatementFailed { worker, statement, message } = kind {
            return self.push(
                at,
                Actor::Store,
                format!("refuses {worker}'s {statement}: {message}"),
                vec![format!("{worker}->>D: {statement}"), format!("D-->>{worker}: error")],
            );
        }
        let EventKind::Write { worker, write, refund, token, rows, after, .. } = kind else { return };
        if after.is_some_and(|image| image.state == RefundState::Sent) {
            self.sent_by.insert(*refund, *worker);
        }
        if *write == WriteKind::Claim && *rows > 0 {
            self.claimed.insert(*worker, *refund);
        }
        if *rows == 0 && token.is_none() {
            match write {
                WriteKind::Claim => self.fold(at, *worker, RunKind::Skipped, *refund, true),
                WriteKind::Confirm => self.confirm_skipped(at, *worker, *refund),
            }
            return;
        }
        if self.plain.contains(refund) {
            self.fold(at, *worker, RunKind::Settled, *refund, *write == WriteKind::Claim);
            return;
        }
        let with = match token {
            Some(token) => format!("with token {token}"),
            None => "without a token".to_owned(),
        };
        let result = match after {
            Some(image) => format!("1 row, now {} with fence {}", image.state, image.fence),
            None => format!("{rows} {}", rows_word(*rows)),
        };
        let fence = token.map_or(String::new(), |token| format!(" fence {token}"));
        self.push(
            at,
            Actor::Store,
            format!("{worker} {write}s {refund} {with}: {result}"),
            vec![
                format!("{worker}->>D: {write} {refund}{fence}"),
                format!("D-->>{worker}: {rows} {}", rows_word(*rows)),
            ],
        )
    }

    /// A confirm without a token that changed nothing: the row was no longer in `sending`,
    /// which after this worker's own accepted claim means someone had confirmed it.
    fn confirm_skipped(&mut self, at: u64, worker: WorkerId, refund: RefundId) {
        let why = match self.sent_by.get(&refund) {
            Some(sender) => format!("the row is already sent{}", sent_by_words(&[*sender].into())),
            None => "the row is no longer in sending".to_owned(),
        };
        self.push(
            at,
            Actor::Store,
            format!("{worker} confirms {refund} without a token: 0 rows, {why}; {worker} moves on"),
            vec![format!("{worker}->>D: confirm {refund}"), format!("D-->>{worker}: 0 rows")],
        )
    }
}

fn refunds_word(count: u32) -> &'static str {
    if count == 1 {
        "refund"
    } else {
        "refunds"
    }
}
