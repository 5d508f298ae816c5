//! The refund store on SQLite. The claim and the confirm are single UPDATE statements whose
//! WHERE clause carries the mechanism's predicates; the row count SQLite reports decides.

use crate::ids::{Cents, MerchantId, RefundId, Token};
use crate::refund::{RefundRow, RefundState, RowImage, WriteGuard, WriteKind, WriteOutcome};
use rusqlite::{params, Connection, OptionalExtension};
use std::sync::{Arc, Mutex, MutexGuard};

/// The refund table and the token sequences, in SQLite's dialect. The state's check is
/// written with `OR`: written `state IN (...)`, SQLite builds a temporary b-tree of the list
/// for every insert and update it checks, which cost more than the write itself.
pub const SCHEMA: &str = "
CREATE TABLE refund (
    id           INTEGER PRIMARY KEY,
    merchant     INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    state        TEXT    NOT NULL CHECK (state = 'pending' OR state = 'sending' OR state = 'sent'),
    fence        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX refund_by_merchant ON refund (merchant, id);
CREATE TABLE fence_seq (
    merchant INTEGER PRIMARY KEY,
    value    INTEGER NOT NULL
);
";

/// The statements a mechanism's workers run, as SQL text: the open rows and the sequence
/// (`?1`: the merchant), and the two writes, fenced and unfenced. Fenced: `?1` is the token
/// and `?2` the refund id; unfenced: `?1` is the refund id. The row count SQLite reports
/// decides a write, as in the article's code. What the row holds afterwards is told too
/// (`WriteOutcome`): a write may return it itself (`RETURNING state, fence`); otherwise the
/// protocol's own fenced writes know it (the state they set, their token as the fence) and
/// the row of any other text is read back. A backend with another dialect brings its own
/// text (and so can a test harness that wants a predicate wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Statements {
    pub open_rows: &'static str,
    pub next_sequence: &'static str,
    pub claim_fenced: &'static str,
    pub confirm_fenced: &'static str,
    pub claim_unfenced: &'static str,
    pub confirm_unfenced: &'static str,
}

impl Statements {
    /// The protocol's writes: a claim needs `fence < token`, a confirm `fence = token`.
    pub const SQLITE: Statements = Statements {
        open_rows: OPEN_ROWS,
        next_sequence: NEXT_SEQUENCE,
        claim_fenced: "UPDATE refund SET state = 'sending', fence = ?1
     WHERE id = ?2 AND state IN ('pending', 'sending') AND fence < ?1",
        confirm_fenced: "UPDATE refund SET state = 'sent'
     WHERE id = ?2 AND state = 'sending' AND fence = ?1",
        claim_unfenced: "UPDATE refund SET state = 'sending'
     WHERE id = ?1 AND state IN ('pending', 'sending')",
        confirm_unfenced: "UPDATE refund SET state = 'sent'
     WHERE id = ?1 AND state = 'sending'",
    };

    /// The same writes, each returning the row it changed (`RETURNING state, fence`): how
    /// the protocol's writes were written before they were decided by the row count alone.
    /// SQLite runs such a write through a table of its own for the returned rows, which made
    /// it the costliest statement of a run; `fencesim bench` measures against it.
    pub const SQLITE_RETURNING: Statements = Statements {
        open_rows: OPEN_ROWS,
        next_sequence: NEXT_SEQUENCE,
        claim_fenced: "UPDATE refund SET state = 'sending', fence = ?1
     WHERE id = ?2 AND state IN ('pending', 'sending') AND fence < ?1
     RETURNING state, fence",
        confirm_fenced: "UPDATE refund SET state = 'sent'
     WHERE id = ?2 AND state = 'sending' AND fence = ?1
     RETURNING state, fence",
        claim_unfenced: "UPDATE refund SET state = 'sending'
     WHERE id = ?1 AND state IN ('pending', 'sending')
     RETURNING state, fence",
        confirm_unfenced: "UPDATE refund SET state = 'sent'
     WHERE id = ?1 AND state = 'sending'
     RETURNING state, fence",
    };

    /// The text of a claim or a confirm, fenced or not.
    pub fn of(&self, kind: WriteKind, fenced: bool) -> &'static str {
        match (kind, fenced) {
            (WriteKind::Claim, true) => self.claim_fenced,
            (WriteKind::Confirm, true) => self.confirm_fenced,
            (WriteKind::Claim, false) => self.claim_unfenced,
            (WriteKind::Confirm, false) => self.confirm_unfenced,
        }
    }
}

impl Default for Statements {
    fn default() -> Statements {
        Statements::SQLITE
    }
}

/// The merchant's open rows in id order (`?1`: the merchant).
pub const OPEN_ROWS: &str = "SELECT id, merchant, amount_cents, state, fence FROM refund
     WHERE merchant = ?1 AND state <> 'sent' ORDER BY id";
/// The next value of the merchant's sequence (`?1`: the merchant).
pub const NEXT_SEQUENCE: &str = "INSERT INTO fence_seq (merchant, value) VALUES (?1, 1)
     ON CONFLICT (merchant) DO UPDATE SET value = fence_seq.value + 1
     RETURNING value";
const MAX_FENCE: &str = "SELECT COALESCE(MAX(fence), 0) FROM refund WHERE merchant = ?1";
/// One row's state and fence (`?1`: the refund id): read back after a write that updated
/// nothing, to say why.
pub const ROW_IMAGE: &str = "SELECT state, fence FROM refund WHERE id = ?1";
/// Every refund and every sequence removed.
pub const CLEAR: [&str; 2] = ["DELETE FROM refund", "DELETE FROM fence_seq"];
/// Every row, in id order.
pub const ALL_ROWS: &str = "SELECT id, merchant, amount_cents, state, fence FROM refund ORDER BY id";

/// One in-memory SQLite database shared by every worker. The connection is never held
/// across an `.await`: each call locks it, runs one statement and lets go.
#[derive(Clone)]
pub struct SqliteRefunds {
    conn: Arc<Mutex<Connection>>,
    statements: Statements,
}

impl SqliteRefunds {
    /// A fresh, empty database with the refund table.
    pub fn open_in_memory() -> rusqlite::Result<SqliteRefunds> {
        SqliteRefunds::open_in_memory_with(SCHEMA)
    }

    /// A fresh, empty database with the tables of `schema` (another writing of `SCHEMA`).
    pub fn open_in_memory_with(schema: &str) -> rusqlite::Result<SqliteRefunds> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(schema)?;
        Ok(SqliteRefunds { conn: Arc::new(Mutex::new(conn)), statements: Statements::SQLITE })
    }

    /// The store in the database file at `path`, shared with other processes: write-ahead
    /// logging, so that readers do not wait for writers, and a wait of up to five seconds
    /// for another process's write to finish. With `create`, the file must hold no refund
    /// table yet and gets one; without it, the file must already be a refund store.
    pub fn open_file(path: &std::path::Path, create: bool) -> rusqlite::Result<SqliteRefunds> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        if create {
            conn.execute_batch(SCHEMA)?;
        } else {
            conn.query_row("SELECT COUNT(*) FROM refund", [], |r| r.get::<_, i64>(0))?;
        }
        Ok(SqliteRefunds { conn: Arc::new(Mutex::new(conn)), statements: Statements::SQLITE })
    }

    /// The same store writing with `statements`.
    pub fn with_statements(mut self, statements: Statements) -> SqliteRefunds {
        self.statements = statements;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock means a statement panicked mid-run; the data is still consistent
        // (SQLite rolled the statement back), so carry on with it.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes every refund and every sequence: an empty store, ready for a new batch.
    pub fn clear(&self) -> rusqlite::Result<()> {
        let conn = self.lock();
        for statement in CLEAR {
            conn.prepare_cached(statement)?.execute([])?;
        }
        Ok(())
    }

    /// Inserts the rows in one transaction.
    pub fn insert(&self, rows: &[RefundRow]) -> rusqlite::Result<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO refund (id, merchant, amount_cents, state, fence) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for r in rows {
                stmt.execute(params![r.id.0, r.merchant.0, r.amount.0, r.state.as_sql(), r.fence])?;
            }
        }
        tx.commit()
    }

    /// The merchant's rows that are not `sent`, in id order.
    pub fn open_refunds(&self, merchant: MerchantId) -> rusqlite::Result<Vec<RefundRow>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(self.statements.open_rows)?;
        let rows = stmt.query_map([merchant.0], row_from_sql)?;
        rows.collect()
    }

    /// The next token of the merchant's sequence: the database issues the tokens it checks.
    pub fn next_sequence_token(&self, merchant: MerchantId) -> rusqlite::Result<Token> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(self.statements.next_sequence)?;
        stmt.query_row([merchant.0], |r| r.get(0)).map(Token)
    }

    /// Sets where the merchant's sequence stands (the next token is `value + 1`).
    pub fn set_sequence(&self, merchant: MerchantId, value: i64) -> rusqlite::Result<()> {
        let conn = self.lock();
        conn.execute(
            "INSERT INTO fence_seq (merchant, value) VALUES (?1, ?2)
             ON CONFLICT (merchant) DO UPDATE SET value = excluded.value",
            params![merchant.0, value],
        )?;
        Ok(())
    }

    /// `SELECT MAX(fence)` of the merchant's rows (0 when none was ever fenced).
    pub fn max_fence(&self, merchant: MerchantId) -> rusqlite::Result<i64> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(MAX_FENCE)?;
        stmt.query_row([merchant.0], |r| r.get(0))
    }

    /// Every row, in id order.
    pub fn all_rows(&self) -> rusqlite::Result<Vec<RefundRow>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(ALL_ROWS)?;
        let rows = stmt.query_map([], row_from_sql)?;
        rows.collect()
    }

    /// Runs a claim or a confirm under `guard` and reports what SQLite did.
    pub fn write(
        &self,
        kind: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> rusqlite::Result<WriteOutcome> {
        let conn = self.lock();
        Self::write_on(&conn, self.statements, kind, refund, guard)
    }

    /// The same write in a transaction of its own, with `then` called after the statement
    /// and before the commit, while the database's write lock is held: what `then` reads
    /// (a clock, say) is in the order the writes of every process took effect in.
    pub fn write_then<T>(
        &self,
        kind: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
        then: impl FnOnce() -> T,
    ) -> rusqlite::Result<(WriteOutcome, T)> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let outcome = Self::write_on(&tx, self.statements, kind, refund, guard)?;
        let then = then();
        tx.commit()?;
        Ok((outcome, then))
    }

    fn write_on(
        conn: &Connection,
        statements: Statements,
        kind: WriteKind,
        refund: RefundId,
        guard: WriteGuard,
    ) -> rusqlite::Result<WriteOutcome> {
        let text = statements.of(kind, guard.token().is_some());
        let mut stmt = conn.prepare_cached(text)?;
        let returned = match (stmt.column_count() > 0, guard) {
            (true, WriteGuard::Fence(token)) => {
                Some(stmt.query_row(params![token.0, refund.0], image_from_sql))
            }
            (true, WriteGuard::Unfenced) => Some(stmt.query_row(params![refund.0], image_from_sql)),
            (false, WriteGuard::Fence(token)) => stmt.execute(params![token.0, refund.0]).map(|_| None)?,
            (false, WriteGuard::Unfenced) => stmt.execute(params![refund.0]).map(|_| None)?,
        };
        drop(stmt);
        let rows_updated = conn.changes();
        let after = match returned {
            Some(image) => image.optional()?,
            None if rows_updated == 0 => None,
            None => match written_image(text, kind, guard) {
                Some(image) => Some(image),
                None => read_row(conn, refund)?,
            },
        };
        let found = if rows_updated == 0 { read_row(conn, refund)? } else { None };
        Ok(WriteOutcome { rows_updated, after, found })
    }
}

/// The row a write of the protocol's own fenced text left, known without reading it: a
/// claim sets `sending` and the token as the fence, a confirm sets `sent` where the fence
/// equals the token. Any other text (a mutant's, a team's) is read back, as is an unfenced
/// write, which leaves the fence it found.
fn written_image(text: &str, kind: WriteKind, guard: WriteGuard) -> Option<RowImage> {
    let token = guard.token()?;
    if text != Statements::SQLITE.of(kind, true) {
        return None;
    }
    let state = match kind {
        WriteKind::Claim => RefundState::Sending,
        WriteKind::Confirm => RefundState::Sent,
    };
    Some(RowImage { state, fence: token.0 })
}

/// The row's state and fence as it stands now (`None`: no such row).
fn read_row(conn: &Connection, refund: RefundId) -> rusqlite::Result<Option<RowImage>> {
    conn.prepare_cached(ROW_IMAGE)?.query_row([refund.0], image_from_sql).optional()
}

fn state_from_sql(text: &str, column: usize) -> rusqlite::Result<RefundState> {
    RefundState::from_sql(text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            column,
            rusqlite::types::Type::Text,
            format!("unknown refund state '{text}'").into(),
        )
    })
}

fn row_from_sql(row: &rusqlite::Row<'_>) -> rusqlite::Result<RefundRow> {
    Ok(RefundRow {
        id: RefundId(row.get(0)?),
        merchant: MerchantId(row.get(1)?),
        amount: Cents(row.get(2)?),
        state: state_from_sql(row.get_ref(3)?.as_str()?, 3)?,
        fence: row.get(4)?,
    })
}

fn image_from_sql(row: &rusqlite::Row<'_>) -> rusqlite::Result<RowImage> {
    Ok(RowImage { state: state_from_sql(row.get_ref(0)?.as_str()?, 0)?, fence: row.get(1)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(state: RefundState, fence: i64) -> SqliteRefunds {
        let store = SqliteRefunds::open_in_memory().unwrap();
        store
            .insert(&[RefundRow {
                id: RefundId(815),
                merchant: MerchantId(4471),
                amount: Cents(7025),
                state,
                fence,
            }])
            .unwrap();
        store
    }

    #[test]
    fn a_claim_takes_over_a_sending_row_only_with_a_newer_token() {
        let store = store_with(RefundState::Sending, 33);
        let stale = store.write(WriteKind::Claim, RefundId(815), WriteGuard::Fence(Token(33))).unwrap();
        let found = Some(RowImage { state: RefundState::Sending, fence: 33 });
        assert_eq!(stale, WriteOutcome { rows_updated: 0, after: None, found });
        assert!(!stale.found_finished(WriteKind::Claim, Token(33)), "a fence as new as the token");
        let newer = store.write(WriteKind::Claim, RefundId(815), WriteGuard::Fence(Token(34))).unwrap();
        assert_eq!(newer.rows_updated, 1);
        assert_eq!(newer.after, Some(RowImage { state: RefundState::Sending, fence: 34 }));
    }

    /// `then` runs while the write holds the database: another connection does not see
    /// the write yet, nor can it write, and sees it once `write_then` has returned.
    #[test]
    fn write_then_reads_its_time_before_the_write_is_committed() {
        let path = std::env::temp_dir().join(format!("fencesim-write-then-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = SqliteRefunds::open_file(&path, true).unwrap();
        let row = RefundRow {
            id: RefundId(815),
            merchant: MerchantId(4471),
            amount: Cents(7025),
            state: RefundState::Pending,
            fence: 0,
        };
        store.insert(&[row]).unwrap();
        let other = Connection::open(&path).unwrap();
        other.busy_timeout(std::time::Duration::ZERO).unwrap();
        let state_seen = |conn: &Connection| -> String {
            conn.query_row("SELECT state FROM refund WHERE id = 815", [], |r| r.get(0)).unwrap()
        };
        let (outcome, (seen, could_write)) = store
            .write_then(WriteKind::Claim, RefundId(815), WriteGuard::Fence(Token(33)), || {
                let could_write = other.execute("UPDATE refund SET fence = 0 WHERE id = 815", []).is_ok();
                (state_seen(&other), could_write)
            })
            .unwrap();
        assert_eq!(outcome.rows_updated, 1);
        assert_eq!((seen.as_str(), could_write), ("pending", false), "not committed, and the lock is held");
        assert_eq!(state_seen(&other), "sending", "committed once it returned");
        drop((store, other));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn a_confirm_needs_the_exact_token_that_claimed() {
        let store = store_with(RefundState::Sending, 34);
        let old = store.write(WriteKind::Confirm, RefundId(815), WriteGuard::Fence(Token(33))).unwrap();
        assert_eq!(old.rows_updated, 0);
        let ours = store.write(WriteKind::Confirm, RefundId(815), WriteGuard::Fence(Token(34))).unwrap();
        assert_eq!(ours.after, Some(RowImage { state: RefundState::Sent, fence: 34 }));
        // sent is final, for every guard
        for guard in [WriteGuard::Fence(Token(99)), WriteGuard::Unfenced] {
            assert_eq!(store.write(WriteKind::Claim, RefundId(815), guard).unwrap().rows_updated, 0);
        }
    }

    /// A write turned away reads the row back: a newer fence, or a row another holder with
    /// an older token already finished, which no fence turned this write away from.
    #[test]
    fn a_write_that_updates_nothing_says_whether_a_newer_fence_or_a_finished_row_turned_it_away() {
        let finished = store_with(RefundState::Sent, 33);
        let claim = finished.write(WriteKind::Claim, RefundId(815), WriteGuard::Fence(Token(34))).unwrap();
        assert_eq!(claim.found, Some(RowImage { state: RefundState::Sent, fence: 33 }));
        assert!(claim.found_finished(WriteKind::Claim, Token(34)), "sent under an older fence");
        let newer = store_with(RefundState::Sent, 34);
        let stale = newer.write(WriteKind::Confirm, RefundId(815), WriteGuard::Fence(Token(33))).unwrap();
        assert!(!stale.found_finished(WriteKind::Confirm, Token(33)), "a newer fence turned it away");
        let again = newer.write(WriteKind::Confirm, RefundId(815), WriteGuard::Fence(Token(34))).unwrap();
        assert!(again.found_finished(WriteKind::Confirm, Token(34)), "already confirmed with this token");
        let sending = store_with(RefundState::Sending, 34);
        let claimed = sending.write(WriteKind::Claim, RefundId(815), WriteGuard::Fence(Token(35))).unwrap();
        assert_eq!((claimed.rows_updated, claimed.found), (1, None), "nothing read back when a row changed");
    }

    #[test]
    fn unfenced_writes_ignore_the_fence_and_leave_it_alone() {
        let store = store_with(RefundState::Sending, 34);
        let claim = store.write(WriteKind::Claim, RefundId(815), WriteGuard::Unfenced).unwrap();
        assert_eq!(claim.after, Some(RowImage { state: RefundState::Sending, fence: 34 }));
        let confirm = store.write(WriteKind::Confirm, RefundId(815), WriteGuard::Unfenced).unwrap();
        assert_eq!(confirm.after, Some(RowImage { state: RefundState::Sent, fence: 34 }));
    }

    /// Every write, on every state and fence a row can hold, tells the same outcome
    /// whether the row comes back from the statement itself, is known from the protocol's
    /// text, or is read back (an unfenced write, a text of the harness's own).
    #[test]
    fn a_write_tells_the_same_row_whether_returned_known_or_read_back() {
        let other = Statements {
            claim_fenced: "UPDATE refund SET fence = ?1, state = 'sending'
     WHERE id = ?2 AND state IN ('pending', 'sending') AND fence < ?1",
            confirm_fenced:
                "UPDATE refund SET state = 'sent' WHERE id = ?2 AND state = 'sending' AND fence = ?1",
            ..Statements::SQLITE
        };
        let states = [RefundState::Pending, RefundState::Sending, RefundState::Sent];
        let guards = [WriteGuard::Fence(Token(33)), WriteGuard::Fence(Token(34)), WriteGuard::Unfenced];
        let mut changed = 0;
        for (state, fence, kind, guard) in grid(&states, &[0, 33, 34], &guards) {
            let outcome = |statements| {
                store_with(state, fence)
                    .with_statements(statements)
                    .write(kind, RefundId(815), guard)
                    .unwrap()
            };
            let returned = outcome(Statements::SQLITE_RETURNING);
            assert_eq!(outcome(Statements::SQLITE), returned, "{kind} {guard:?} on {state:?} {fence}");
            assert_eq!(outcome(other), returned, "{kind} {guard:?} on {state:?} {fence}, read back");
            changed += returned.rows_updated;
        }
        assert!(changed >= 6, "the grid holds writes that change a row ({changed})");
    }

    fn grid(
        states: &[RefundState],
        fences: &[i64],
        guards: &[WriteGuard],
    ) -> Vec<(RefundState, i64, WriteKind, WriteGuard)> {
        let mut grid = Vec::new();
        for &state in states {
            for &fence in fences {
                for kind in [WriteKind::Claim, WriteKind::Confirm] {
                    grid.extend(guards.iter().map(|&guard| (state, fence, kind, guard)));
                }
            }
        }
        grid
    }

    #[test]
    fn a_store_writes_with_the_statements_it_is_given() {
        let lax = Statements {
            confirm_fenced: "UPDATE refund SET state = 'sent' WHERE id = ?2 AND ?1 = ?1",
            ..Statements::SQLITE
        };
        let stale = WriteGuard::Fence(Token(33));
        let right = store_with(RefundState::Sending, 34);
        assert_eq!(right.write(WriteKind::Confirm, RefundId(815), stale).unwrap().rows_updated, 0);
        let other = store_with(RefundState::Sending, 34).with_statements(lax);
        assert_eq!(other.write(WriteKind::Confirm, RefundId(815), stale).unwrap().rows_updated, 1);
    }

    #[test]
    fn the_sequence_counts_per_merchant_from_where_it_was_set() {
        let store = SqliteRefunds::open_in_memory().unwrap();
        assert_eq!(store.next_sequence_token(MerchantId(1)).unwrap(), Token(1));
        store.set_sequence(MerchantId(4471), 32).unwrap();
        assert_eq!(store.next_sequence_token(MerchantId(4471)).unwrap(), Token(33));
        assert_eq!(store.next_sequence_token(MerchantId(4471)).unwrap(), Token(34));
        assert_eq!(store.next_sequence_token(MerchantId(1)).unwrap(), Token(2));
    }

    #[test]
    fn max_fence_reads_the_highest_stored_fence_of_the_merchant() {
        let store = store_with(RefundState::Sending, 33);
        assert_eq!(store.max_fence(MerchantId(4471)).unwrap(), 33);
        assert_eq!(store.max_fence(MerchantId(1)).unwrap(), 0);
    }

    #[test]
    fn open_refunds_leaves_out_sent_rows_and_keeps_id_order() {
        let store = SqliteRefunds::open_in_memory().unwrap();
        let row = |id, state| RefundRow {
            id: RefundId(id),
            merchant: MerchantId(1),
            amount: Cents(100),
            state,
            fence: 0,
        };
        store
            .insert(&[row(3, RefundState::Pending), row(1, RefundState::Sent), row(2, RefundState::Sending)])
            .unwrap();
        let open: Vec<u32> = store.open_refunds(MerchantId(1)).unwrap().iter().map(|r| r.id.0).collect();
        assert_eq!(open, vec![2, 3]);
        assert_eq!(store.all_rows().unwrap().len(), 3);
    }
}
