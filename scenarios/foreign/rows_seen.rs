//! What a team's worker did to the refund rows, from two records that need nothing of the
//! worker: its database proxy's (each statement, its parameters, its row count, the server
//! process that ran it) and a trigger's on the refund table (each row changed, by which
//! server process, at what moment, and what the row then held). A write that changed rows
//! is told from the trigger's rows, at the moment each was changed; a write that changed
//! none (a fence turned it away) from the proxy's, at the middle of its round trip, its
//! refund read off the statement's `id = $n`. A statement the database refused is told in
//! the database's words.
//!
//! Which write it is follows from what it sets the row to (`sent`: a confirm; otherwise a
//! claim); the token it carried is the worker's last one, if its statement names the fence.
//! A transaction rolled back leaves no trigger row; its statement's row count then names
//! rows that are not there, and fewer writes are told.

use crate::live::log::LogLine;
use crate::live::pgproxy::PgObserved as PgSeen;
use fencesim_model::{RefundId, RefundState, RowImage, Step, Token, WorkerId, WriteKind};
use fencesim_sim::EventKind;
use std::collections::{BTreeMap, VecDeque};

/// One row the trigger saw changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowChange {
    pub pid: i32,
    pub at_us: u64,
    pub id: i64,
    pub state: String,
    pub fence: i64,
}

/// The trigger and the table it writes to: installed before the workers start.
pub const TRIGGER: &str = "
CREATE TABLE fencesim_row_change (
    seq   BIGSERIAL PRIMARY KEY,
    pid   INTEGER NOT NULL,
    at_us BIGINT  NOT NULL,
    id    BIGINT  NOT NULL,
    state TEXT    NOT NULL,
    fence BIGINT  NOT NULL
);
CREATE FUNCTION fencesim_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fencesim_row_change (pid, at_us, id, state, fence)
    VALUES (pg_backend_pid(), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
            NEW.id, NEW.state, NEW.fence);
    RETURN NEW;
END $$;
CREATE TRIGGER fencesim_row_changed AFTER UPDATE ON refund
    FOR EACH ROW EXECUTE FUNCTION fencesim_row_changed();
";

/// The trigger's rows, in the order they were written.
pub const CHANGES: &str = "SELECT pid, at_us, id, state, fence FROM fencesim_row_change ORDER BY seq";

/// A statement's text in lower case, its spaces made single.
fn plain(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase()
}

/// Whether a statement writes refund rows.
fn writes_refunds(sql: &str) -> bool {
    let sql = plain(sql);
    sql.contains("update refund ") || sql.contains("update public.refund ")
}

/// The write a statement is, by what it sets the state to.
pub fn kind_of(sql: &str) -> Option<WriteKind> {
    let sql = plain(sql);
    let set = sql.split(" set ").nth(1)?.split(" where ").next()?;
    if set.contains("'sent'") {
        Some(WriteKind::Confirm)
    } else if set.contains("'sending'") {
        Some(WriteKind::Claim)
    } else {
        None
    }
}

/// What a statement compares `column` with: a parameter's value (`id = $2`) or a number
/// written in it (`id = 815`).
pub fn bound(sql: &str, params: &[Option<String>], column: &str) -> Option<String> {
    let sql = plain(sql).replace(" = ", "=").replace("= ", "=").replace(" =", "=");
    let pattern = format!("{column}=");
    let mut from = 0;
    while let Some(found) = sql[from..].find(&pattern) {
        let at = from + found;
        let before = sql[..at].chars().last();
        from = at + pattern.len();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &sql[from..];
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '$').collect();
        return match word.strip_prefix('$') {
            Some(n) => params.get(n.parse::<usize>().ok()?.checked_sub(1)?)?.clone(),
            None => word.parse::<i64>().ok().map(|n| n.to_string()),
        };
    }
    None
}

/// The rows a write's tag says it changed: `UPDATE 3`, or `SELECT 3` for an update inside a
/// `WITH` whose rows the statement returns.
pub fn count_of(tag: Option<&str>) -> u64 {
    tag.and_then(|t| t.strip_prefix("UPDATE ").or_else(|| t.strip_prefix("SELECT ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether a write's conditions name the fence (its `WHERE`, not what it returns).
fn fenced(sql: &str) -> bool {
    let sql = plain(sql);
    let conditions = sql.split(" where ").nth(1).unwrap_or("");
    conditions.split(" returning ").next().is_some_and(|w| w.contains("fence"))
}

fn state_of(text: &str) -> RefundState {
    RefundState::from_sql(text).unwrap_or(RefundState::Pending)
}

/// The tokens a worker took from the database's own counter (`fence_seq`, one row a
/// merchant, as `fenced-db-sequence` keeps it): a statement that writes it and returns one
/// number is a token for the merchant its `merchant = $n` or first parameter names.
pub fn tokens(seen: &[(WorkerId, PgSeen)]) -> Vec<LogLine> {
    let mut lines = Vec::new();
    for (worker, statement) in seen {
        let sql = plain(&statement.sql);
        let writes = sql.starts_with("insert into fence_seq") || sql.starts_with("update fence_seq");
        let returned = match statement.rows.as_slice() {
            [row] if row.len() == 1 => row[0].as_deref().and_then(|v| v.parse::<i64>().ok()),
            _ => None,
        };
        let merchant = bound(&statement.sql, &statement.params, "merchant")
            .or_else(|| statement.params.first().cloned().flatten())
            .and_then(|m| m.parse::<u32>().ok());
        if let (true, Some(token), Some(merchant), None) = (writes, returned, merchant, &statement.error) {
            let key = format!("fence_seq:{}", fencesim_model::MerchantId(merchant));
            let issued = EventKind::TokenIssued { worker: *worker, key, token: Token(token) };
            let at_us = statement.sent_us + (statement.answered_us - statement.sent_us) / 2;
            lines.push(LogLine { at_us, happened: issued, sent_us: None });
        }
    }
    lines
}

/// Every worker's refund writes and refused statements, in wall-clock microseconds.
/// `tokens`: each worker's tokens with when it took them.
pub fn events(
    seen: &[(WorkerId, PgSeen)],
    changes: &[RowChange],
    tokens: &BTreeMap<WorkerId, Vec<(u64, Token)>>,
) -> Vec<LogLine> {
    let mut by_pid: BTreeMap<i32, VecDeque<&RowChange>> = BTreeMap::new();
    for change in changes {
        by_pid.entry(change.pid).or_default().push_back(change);
    }
    let mut order: Vec<&(WorkerId, PgSeen)> = seen.iter().collect();
    order.sort_by_key(|(_, s)| (s.answered_us, s.sent_us));
    let mut lines = Vec::new();
    let line = |at_us, happened| LogLine { at_us, happened, sent_us: None };
    for (worker, statement) in order {
        let written = |at_us, happened| LogLine { at_us, happened, sent_us: Some(statement.sent_us) };
        let worker = *worker;
        if !writes_refunds(&statement.sql) {
            continue;
        }
        if let Some(message) = &statement.error {
            let failed = EventKind::StatementFailed {
                worker,
                statement: plain(&statement.sql),
                message: format!("PostgreSQL says: {message}"),
            };
            lines.push(line(statement.answered_us, failed));
            continue;
        }
        let Some(write) = kind_of(&statement.sql) else { continue };
        let token = tokens
            .get(&worker)
            .and_then(|taken| taken.iter().rev().find(|(at, _)| *at <= statement.sent_us))
            .map(|&(_, token)| token)
            .filter(|_| fenced(&statement.sql));
        // a server process runs one statement at a time: the rows it changed up to this
        // statement's answer are this statement's (or, before it was sent, a statement's
        // that is not a refund write, told here all the same)
        let mut mine: Vec<&RowChange> = Vec::new();
        if let Some(queue) = statement.backend_pid.and_then(|pid| by_pid.get_mut(&pid)) {
            while let Some(change) = queue.front().filter(|c| c.at_us <= statement.answered_us) {
                mine.push(change);
                queue.pop_front();
            }
        }
        for change in &mine {
            let after = RowImage { state: state_of(&change.state), fence: change.fence };
            let refund = RefundId(change.id as u32);
            let written_kind =
                EventKind::Write { worker, epoch: None, write, refund, token, rows: 1, after: Some(after) };
            lines.push(written(change.at_us, written_kind));
        }
        let refund = bound(&statement.sql, &statement.params, "id").and_then(|id| id.parse::<u32>().ok());
        match (mine.is_empty(), refund) {
            (true, Some(refund)) => {
                let unchanged = EventKind::Write {
                    worker,
                    epoch: None,
                    write,
                    refund: RefundId(refund),
                    token,
                    rows: 0,
                    after: None,
                };
                let at_us = statement.sent_us + (statement.answered_us - statement.sent_us) / 2;
                lines.push(written(at_us, unchanged));
            }
            (false, Some(refund)) => {
                let step = match write {
                    WriteKind::Claim => Step::AfterClaim { refund: RefundId(refund) },
                    WriteKind::Confirm => Step::AfterConfirm { refund: RefundId(refund) },
                };
                lines.push(line(statement.answered_us, EventKind::Step { worker, step }));
            }
            _ => {}
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_names_its_refund_by_a_parameter_or_a_number() {
        let params = [Some("33".to_owned()), Some("815".to_owned())];
        let claim = "UPDATE refund\n   SET state = 'sending', fence = $1\n WHERE id = $2 AND fence < $1";
        assert_eq!(bound(claim, &params, "id").as_deref(), Some("815"));
        assert_eq!(
            bound("UPDATE refund SET state='sent' WHERE refund.id=815", &[], "id").as_deref(),
            Some("815")
        );
        assert_eq!(bound("UPDATE refund SET state='sent' WHERE merchant_id = $1", &params, "id"), None);
        assert_eq!(kind_of(claim), Some(WriteKind::Claim));
        assert_eq!(kind_of("update refund set state = 'sent' where id = $1"), Some(WriteKind::Confirm));
        assert_eq!(kind_of("update refund set fence = 3 where id = $1"), None);
        assert!(writes_refunds(claim) && !writes_refunds("SELECT * FROM refund"));
        let stamped = "WITH w AS (UPDATE refund SET state = 'sent' WHERE id = $1 AND state = 'sending' \
                       RETURNING state, fence) SELECT state, fence FROM w";
        assert_eq!(kind_of(stamped), Some(WriteKind::Confirm));
        assert!(writes_refunds(stamped) && !fenced(stamped) && fenced(claim));
        assert_eq!((count_of(Some("SELECT 1")), count_of(Some("UPDATE 2")), count_of(None)), (1, 2, 0));
    }
}
