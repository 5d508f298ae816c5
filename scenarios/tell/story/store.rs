//! The refund store's events, in words: claims and confirms, accepted or turned away.
//! Routine rows fold into one line per stretch.

use crate::tell::story::narrator::{rows_word, Narrator, RunKind};
use fencesim_model::WriteKind;
use fencesim_sim::{Actor, EventKind};

impl Narrator<'_> {
    pub(super) fn store_event(&mut self, at: u64, kind: &EventKind) {
        let EventKind::Write { worker, write, refund, token, rows, after, .. } = kind else { return };
        if *rows == 0 && token.is_none() {
            self.fold(at, *worker, RunKind::Skipped, *refund, true);
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
}
