//! The second store's events, in words: the holder taking the settlement ledger's fence,
//! its lookups, and each posting, accepted or turned away. A routine row's posting folds
//! into its row's line.

use crate::tell::story::narrator::{rows_word, Narrator, RunKind};
use fencesim_sim::{Actor, EventKind};

impl Narrator<'_> {
    pub(super) fn settlement_event(&mut self, at: u64, kind: &EventKind) {
        let (worker, text, diagram) = match kind {
            EventKind::SettlementEnrolled { worker, merchant, token, rows, .. } => {
                let text = match rows {
                    0 => format!("{worker} cannot take {merchant}'s settlement-ledger fence with token {token}: the ledger's fence is newer"),
                    _ => format!("{worker} takes {merchant}'s settlement-ledger fence with token {token}"),
                };
                (
                    *worker,
                    text,
                    vec![
                        format!("{worker}->>L: enrol fence {token}"),
                        format!("L-->>{worker}: {rows} {}", rows_word(*rows)),
                    ],
                )
            }
            EventKind::SettlementLookup { worker, refund, posted } => {
                let found = if *posted { "posted already: it will not post again" } else { "not posted yet" };
                (
                    *worker,
                    format!("{worker} asks the settlement ledger about {refund}: {found}"),
                    vec![format!("{worker}->>L: posted {refund}?"), format!("L-->>{worker}: {posted}")],
                )
            }
            EventKind::SettlementPosted { worker, refund, amount, token, rows, balance, .. } => {
                if *rows > 0 && self.plain.contains(refund) {
                    return self.fold(at, *worker, RunKind::Settled, *refund, false);
                }
                let with = token.map_or("without a fence".to_owned(), |token| format!("with token {token}"));
                let result = match (rows, balance) {
                    (0, _) => "0 rows, turned away: the ledger's fence is newer".to_owned(),
                    (_, Some(balance)) => format!("1 entry, the balance now {balance}"),
                    (_, None) => "1 entry".to_owned(),
                };
                let fence = token.map_or(String::new(), |token| format!(" fence {token}"));
                (
                    *worker,
                    format!("{worker} posts {refund} ({amount}) to the settlement ledger {with}: {result}"),
                    vec![
                        format!("{worker}->>L: post {refund}{fence}"),
                        format!("L-->>{worker}: {rows} {}", rows_word(*rows)),
                    ],
                )
            }
            // the other components' events are told by their own narrators
            _ => return,
        };
        let _ = worker;
        self.push(at, Actor::Settlement, text, diagram)
    }
}
