//! What each row held just before each write, and what the protocol's rule says of that
//! write: a claim is accepted only when the row is `pending` or `sending` and its fence is
//! below the token, a confirm only when the row is `sending` and its fence equals the
//! token (a write without a token compares no fence). The page shows the rule at each
//! write, the chains cite it, and a write whose outcome the rule does not predict is a
//! store that does not enforce the protocol (a planted statement, say).

use fencesim_model::{RefundState, RowImage, Token, WriteKind, WriteOutcome};
use fencesim_sim::{EventKind, RunRecord, WorldConfig};
use std::collections::BTreeMap;

/// The row each write found, by the write's index in the history (none for other events).
pub fn rows_before(world: &WorldConfig, record: &RunRecord) -> Vec<Option<RowImage>> {
    let mut now: BTreeMap<_, RowImage> =
        world.rows.iter().map(|row| (row.id, RowImage { state: row.state, fence: row.fence })).collect();
    let mut before = vec![None; record.events.len()];
    for (index, event) in record.events.iter().enumerate() {
        let EventKind::Write { refund, rows, after, .. } = &event.kind else { continue };
        let image = now.get(refund).copied().unwrap_or(RowImage { state: RefundState::Pending, fence: 0 });
        before[index] = Some(image);
        if let (1.., Some(after)) = (*rows, after) {
            now.insert(*refund, *after);
        }
    }
    before
}

/// Whether the protocol's rule accepts `write` with `token` on a row that holds `before`.
pub fn rule_accepts(write: WriteKind, token: Option<Token>, before: RowImage) -> bool {
    let fence_ok = |holds: fn(i64, i64) -> bool| token.is_none_or(|token| holds(before.fence, token.0));
    match write {
        WriteKind::Claim => {
            matches!(before.state, RefundState::Pending | RefundState::Sending) && fence_ok(|f, t| f < t)
        }
        WriteKind::Confirm => before.state == RefundState::Sending && fence_ok(|f, t| f == t),
    }
}

/// Whether a fenced write that changed nothing found its row finished by another holder
/// (`sent`, under a fence the token passes) rather than turned away by a newer fence: the
/// worker's own reading of the row it read back.
pub fn found_finished(write: WriteKind, token: Option<Token>, before: RowImage) -> bool {
    let found = WriteOutcome { rows_updated: 0, after: None, found: Some(before) };
    token.is_some_and(|token| found.found_finished(write, token))
}

/// The rule, and how this write fared by it: "confirm: accepted only if the row is sending
/// and its fence equals the token; the row was sending with fence 34, the token 33:
/// turned away".
pub fn rule_words(write: WriteKind, token: Option<Token>, before: RowImage, rows: u64) -> String {
    let rule = match (write, token) {
        (WriteKind::Claim, Some(_)) => {
            "claim: accepted only if the row is pending or sending and its fence is below the token"
        }
        (WriteKind::Confirm, Some(_)) => {
            "confirm: accepted only if the row is sending and its fence equals the token"
        }
        (WriteKind::Claim, None) => {
            "claim without a token: accepted if the row is pending or sending; no fence is compared"
        }
        (WriteKind::Confirm, None) => {
            "confirm without a token: accepted if the row is sending; no fence is compared"
        }
    };
    let with = token.map_or(String::new(), |token| format!(", the token {token}"));
    let found = format!("the row was {} with fence {}{with}", before.state, before.fence);
    let verdict = match (rule_accepts(write, token, before), rows > 0) {
        (true, true) => "accepted".to_owned(),
        (false, false) if found_finished(write, token, before) => {
            "it changed nothing: another holder had already sent the row, no newer fence turned it away"
                .to_owned()
        }
        (false, false) => match token {
            Some(_) => "turned away".to_owned(),
            None => "it changed nothing".to_owned(),
        },
        (false, true) => "the rule turns it away, but the store accepted it".to_owned(),
        (true, false) => "the rule accepts it, but the store changed nothing".to_owned(),
    };
    format!("{rule}; {found}: {verdict}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: RefundState, fence: i64) -> RowImage {
        RowImage { state, fence }
    }

    #[test]
    fn the_rule_is_the_articles_two_predicates() {
        let sending = |fence| row(RefundState::Sending, fence);
        assert!(rule_accepts(WriteKind::Claim, Some(Token(34)), sending(33)));
        assert!(!rule_accepts(WriteKind::Claim, Some(Token(33)), sending(33)), "the fence must be below");
        assert!(!rule_accepts(WriteKind::Claim, Some(Token(40)), row(RefundState::Sent, 1)));
        assert!(rule_accepts(WriteKind::Confirm, Some(Token(34)), sending(34)));
        assert!(!rule_accepts(WriteKind::Confirm, Some(Token(33)), sending(34)));
        assert!(rule_accepts(WriteKind::Confirm, None, sending(0)));
        assert!(!rule_accepts(WriteKind::Confirm, None, row(RefundState::Sent, 0)));
        let words = rule_words(WriteKind::Confirm, Some(Token(33)), sending(34), 0);
        assert!(words.ends_with("the row was sending with fence 34, the token 33: turned away"), "{words}");
        let broken = rule_words(WriteKind::Claim, Some(Token(34)), sending(34), 1);
        assert!(broken.ends_with("the rule turns it away, but the store accepted it"), "{broken}");
    }
}
