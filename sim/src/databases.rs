//! The in-memory databases a run starts with. Opening a connection, reading the schema and
//! preparing every statement again cost more per seed than the run's own writes; so a run
//! hands its databases, emptied, to the next run on the same thread, which finds them as
//! a fresh open would (same tables, no rows, every id counting from the start again) with
//! their statements already prepared. A wiring may ask for fresh ones (`fencesim bench`'s
//! baseline does).

use fencesim_model::{SqliteRefunds, SqliteSettlement};
use std::cell::RefCell;

thread_local! {
    static SPARE: RefCell<Spare> = const { RefCell::new(Spare { store: None, settlement: None }) };
}

struct Spare {
    store: Option<SqliteRefunds>,
    settlement: Option<SqliteSettlement>,
}

/// An empty refund store: the thread's spare one, or (none) a new one, or (`fresh`) a
/// new one with that schema.
pub(crate) fn refund_store(fresh: Option<&str>) -> rusqlite::Result<SqliteRefunds> {
    if let Some(schema) = fresh {
        return SqliteRefunds::open_in_memory_with(schema);
    }
    match SPARE.with(|spare| spare.borrow_mut().store.take()) {
        Some(store) => Ok(store),
        None => SqliteRefunds::open_in_memory(),
    }
}

/// An empty settlement ledger: the thread's spare one, or (none, or `fresh`, which leaves
/// the spare where it is) a new one.
pub(crate) fn settlement_ledger(fresh: bool) -> rusqlite::Result<SqliteSettlement> {
    let spare = match fresh {
        true => None,
        false => SPARE.with(|spare| spare.borrow_mut().settlement.take()),
    };
    spare.map_or_else(SqliteSettlement::open_in_memory, Ok)
}

/// Keeps a finished run's databases for the next run on this thread, emptied; one that
/// cannot be emptied is dropped. Called once nothing else holds them (the run's runtime,
/// and every task in it, dropped), and only for databases of the store's own schema (a
/// fresh one of another schema is never kept).
pub(crate) fn hand_back(store: SqliteRefunds, settlement: Option<SqliteSettlement>) {
    let store = store.clear().is_ok().then_some(store);
    let settlement = settlement.filter(|ledger| ledger.clear().is_ok());
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        if store.is_some() {
            spare.store = store;
        }
        if settlement.is_some() {
            spare.settlement = settlement;
        }
    });
}
