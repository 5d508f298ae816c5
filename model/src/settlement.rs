//! The second store: the merchant's settlement ledger on SQLite, a database of its own on
//! a connection of its own. Settling a refund posts one entry (the refund, its amount) and
//! adds the amount to the merchant's running balance, in one transaction.
//!
//! Fenced, the ledger keeps its own fence column per merchant, checked by the same rule as
//! the refund rows: a holder takes the ledger's fence when its batch begins (the
//! enrolment, `fence < token`, storing the token), and a posting needs `fence <= token`.
//! Unfenced, the posting is a plain insert: whoever posts, posts.

use crate::ids::{Cents, MerchantId, RefundId, Token};
use crate::refund::WriteGuard;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// The ledger's tables, in SQLite's dialect. An entry is a journal line: the journal takes
/// any line it is given, so "once per refund" is the protocol's to keep.
pub const SCHEMA: &str = "
CREATE TABLE settlement_entry (
    seq          INTEGER PRIMARY KEY,
    refund       INTEGER NOT NULL,
    merchant     INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    fence        INTEGER
);
CREATE INDEX settlement_by_refund ON settlement_entry (refund);
CREATE TABLE merchant_balance (
    merchant      INTEGER PRIMARY KEY,
    balance_cents INTEGER NOT NULL DEFAULT 0,
    fence         INTEGER NOT NULL DEFAULT 0
);
";

/// The ledger's writes, as SQL text (a harness may bring a predicate wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettlementStatements {
    /// `?1` token, `?2` merchant: takes the merchant's ledger fence if it is older.
    pub enroll: &'static str,
    /// `?1` token, `?2` merchant, `?3` amount: the balance moves only under the fence; the
    /// row count tells whether it moved.
    pub balance_fenced: &'static str,
    /// `?1` merchant, `?2` amount.
    pub balance_unfenced: &'static str,
    /// `?1` refund, `?2` merchant, `?3` amount, `?4` token or NULL.
    pub entry: &'static str,
}

impl SettlementStatements {
    pub const SQLITE: SettlementStatements = SettlementStatements {
        enroll: "INSERT INTO merchant_balance (merchant, balance_cents, fence) VALUES (?2, 0, ?1)
     ON CONFLICT (merchant) DO UPDATE SET fence = excluded.fence
     WHERE merchant_balance.fence < excluded.fence",
        balance_fenced: "UPDATE merchant_balance SET balance_cents = balance_cents + ?3, fence = ?1
     WHERE merchant = ?2 AND fence <= ?1",
        balance_unfenced: "INSERT INTO merchant_balance (merchant, balance_cents) VALUES (?1, ?2)
     ON CONFLICT (merchant) DO UPDATE SET balance_cents = balance_cents + excluded.balance_cents",
        entry: "INSERT INTO settlement_entry (refund, merchant, amount_cents, fence) VALUES (?1, ?2, ?3, ?4)",
    };
}

impl Default for SettlementStatements {
    fn default() -> SettlementStatements {
        SettlementStatements::SQLITE
    }
}

/// The two writes a worker makes to the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SettlementWrite {
    /// The holder takes the merchant's ledger fence when its batch begins.
    Enroll,
    /// One entry for a refund, and its amount added to the balance.
    Post,
}

impl fmt::Display for SettlementWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SettlementWrite::Enroll => "ledger enrolment",
            SettlementWrite::Post => "ledger posting",
        })
    }
}

/// What a worker posts for a refund.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Posting {
    pub refund: RefundId,
    pub merchant: MerchantId,
    pub amount: Cents,
}

/// What a ledger write did: rows SQLite changed, and the merchant's balance after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SettlementOutcome {
    pub rows_updated: u64,
    pub balance: Option<Cents>,
}

/// A fenced ledger write changed nothing: the ledger's fence is newer than the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SettlementViolation {
    /// The refund posted, or none for the enrolment.
    pub refund: Option<RefundId>,
    pub token: Token,
    pub write: SettlementWrite,
}

impl fmt::Display for SettlementViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.refund {
            Some(refund) => write!(
                f,
                "fence violation: {} of {refund} with token {} updated 0 rows",
                self.write, self.token
            ),
            None => write!(f, "fence violation: {} with token {} updated 0 rows", self.write, self.token),
        }
    }
}

/// One entry of the journal, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SettlementEntry {
    pub seq: i64,
    pub refund: RefundId,
    pub merchant: MerchantId,
    pub amount: Cents,
    pub fence: Option<i64>,
}

/// The ledger on an in-memory SQLite database of its own.
#[derive(Clone)]
pub struct SqliteSettlement {
    conn: Arc<Mutex<Connection>>,
    statements: SettlementStatements,
}

impl SqliteSettlement {
    pub fn open_in_memory() -> rusqlite::Result<SqliteSettlement> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteSettlement { conn: Arc::new(Mutex::new(conn)), statements: SettlementStatements::SQLITE })
    }

    /// Removes every entry and every balance: an empty ledger, as one freshly opened.
    pub fn clear(&self) -> rusqlite::Result<()> {
        self.lock().execute_batch("DELETE FROM settlement_entry; DELETE FROM merchant_balance;")
    }

    /// The same ledger writing with `statements`.
    pub fn with_statements(mut self, statements: SettlementStatements) -> SqliteSettlement {
        self.statements = statements;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the merchant's ledger fence with `token` if the stored one is older.
    pub fn enroll(&self, merchant: MerchantId, token: Token) -> rusqlite::Result<SettlementOutcome> {
        let conn = self.lock();
        let rows = conn.prepare_cached(self.statements.enroll)?.execute(params![token.0, merchant.0])? as u64;
        Ok(SettlementOutcome { rows_updated: rows, balance: balance_of(&conn, merchant)? })
    }

    /// Whether an entry for `refund` is in the journal.
    pub fn posted(&self, refund: RefundId) -> rusqlite::Result<bool> {
        let conn = self.lock();
        let mut stmt =
            conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM settlement_entry WHERE refund = ?1)")?;
        stmt.query_row([refund.0], |r| r.get(0))
    }

    /// Posts one entry and moves the balance, in one transaction; fenced, only if the
    /// ledger's fence is not newer than the token.
    pub fn post(&self, posting: Posting, guard: WriteGuard) -> rusqlite::Result<SettlementOutcome> {
        let conn = self.lock();
        in_transaction(&conn, |conn| {
            let Posting { refund, merchant, amount } = posting;
            let rows = match guard {
                WriteGuard::Fence(token) => conn
                    .prepare_cached(self.statements.balance_fenced)?
                    .execute(params![token.0, merchant.0, amount.0])?,
                WriteGuard::Unfenced => conn
                    .prepare_cached(self.statements.balance_unfenced)?
                    .execute(params![merchant.0, amount.0])?,
            } as u64;
            if rows > 0 {
                let fence = guard.token().map(|t| t.0);
                conn.prepare_cached(self.statements.entry)?
                    .execute(params![refund.0, merchant.0, amount.0, fence])?;
            }
            Ok(SettlementOutcome { rows_updated: rows, balance: balance_of(conn, merchant)? })
        })
    }

    /// Every entry, in journal order.
    pub fn entries(&self) -> rusqlite::Result<Vec<SettlementEntry>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, refund, merchant, amount_cents, fence FROM settlement_entry ORDER BY seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(SettlementEntry {
                seq: r.get(0)?,
                refund: RefundId(r.get(1)?),
                merchant: MerchantId(r.get(2)?),
                amount: Cents(r.get(3)?),
                fence: r.get(4)?,
            })
        })?;
        rows.collect()
    }

    /// Every merchant's balance, in merchant order.
    pub fn balances(&self) -> rusqlite::Result<Vec<(MerchantId, Cents)>> {
        let conn = self.lock();
        let mut stmt =
            conn.prepare_cached("SELECT merchant, balance_cents FROM merchant_balance ORDER BY merchant")?;
        let rows = stmt.query_map([], |r| Ok((MerchantId(r.get(0)?), Cents(r.get(1)?))))?;
        rows.collect()
    }
}

/// Runs `body` in a transaction of its own: committed when it succeeds, rolled back when it
/// fails. The statements that open and end it are prepared once per connection, not parsed
/// again for every posting.
fn in_transaction<T>(
    conn: &Connection,
    body: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached("BEGIN")?.execute([])?;
    match body(conn) {
        Ok(value) => {
            conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(value)
        }
        Err(error) => {
            // the error the body met is the one to report; a failed rollback leaves the
            // connection as SQLite left it
            let _ = conn.prepare_cached("ROLLBACK").and_then(|mut rollback| rollback.execute([]));
            Err(error)
        }
    }
}

fn balance_of(conn: &Connection, merchant: MerchantId) -> rusqlite::Result<Option<Cents>> {
    let mut stmt = conn.prepare_cached("SELECT balance_cents FROM merchant_balance WHERE merchant = ?1")?;
    stmt.query_row([merchant.0], |r| r.get(0)).optional().map(|b| b.map(Cents))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: MerchantId = MerchantId(4471);

    fn posting(refund: u32) -> Posting {
        Posting { refund: RefundId(refund), merchant: M, amount: Cents(7025) }
    }

    #[test]
    fn a_fenced_posting_is_turned_away_once_a_newer_holder_enrolled() {
        let ledger = SqliteSettlement::open_in_memory().unwrap();
        assert_eq!(ledger.enroll(M, Token(33)).unwrap().rows_updated, 1);
        assert_eq!(ledger.enroll(M, Token(34)).unwrap().rows_updated, 1);
        assert_eq!(ledger.enroll(M, Token(33)).unwrap().rows_updated, 0, "an older token enrols no more");
        let stale = ledger.post(posting(815), WriteGuard::Fence(Token(33))).unwrap();
        assert_eq!(stale, SettlementOutcome { rows_updated: 0, balance: Some(Cents(0)) });
        let live = ledger.post(posting(815), WriteGuard::Fence(Token(34))).unwrap();
        assert_eq!(live, SettlementOutcome { rows_updated: 1, balance: Some(Cents(7025)) });
        assert_eq!(ledger.entries().unwrap().len(), 1);
        assert!(ledger.posted(RefundId(815)).unwrap() && !ledger.posted(RefundId(816)).unwrap());
    }

    #[test]
    fn an_unfenced_posting_posts_whoever_posts() {
        let ledger = SqliteSettlement::open_in_memory().unwrap();
        ledger.enroll(M, Token(34)).unwrap();
        for _ in 0..2 {
            assert_eq!(ledger.post(posting(815), WriteGuard::Unfenced).unwrap().rows_updated, 1);
        }
        assert_eq!(ledger.entries().unwrap().len(), 2);
        assert_eq!(ledger.balances().unwrap(), vec![(M, Cents(14_050))]);
    }
}
