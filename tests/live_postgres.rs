//! The refund store on PostgreSQL answers as the SQLite one does: the token sequence, and
//! every statement a planted bug rewrites. Each test starts a cluster of its own on
//! loopback in a temporary directory and stops it; without PostgreSQL they say loudly that
//! they skipped, and with `CI` set they fail instead.

use fencesim::live::postgres::{postgres_program, PgRefunds, PostgresServer};
use fencesim::live::store::Refunds;
use fencesim::model::{
    Cents, MerchantId, RefundId, RefundRow, RefundState, SqliteRefunds, Statements, Token, WriteGuard,
    WriteKind,
};
use fencesim::mutant::{Mutant, Planted};
use fencesim::sim::Wiring;

/// A cluster of the test's own, or none (said loudly) on a machine without PostgreSQL.
fn cluster(test: &str) -> Option<PostgresServer> {
    if postgres_program("initdb").is_some() && postgres_program("postgres").is_some() {
        return Some(PostgresServer::start(test).unwrap());
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no PostgreSQL was found");
    eprintln!("SKIPPED {test}: no PostgreSQL on this machine (install Debian's postgresql)");
    None
}

/// The database's token sequence counts on PostgreSQL as on SQLite, from where the
/// deployment placed it. (Its upsert named the column ambiguously for PostgreSQL, and
/// every batch of `fenced-db-sequence` live on PostgreSQL failed with a backend error:
/// found by `fencesim fidelity`.)
#[test]
fn the_database_sequence_counts_on_postgres_as_on_sqlite() {
    let Some(server) = cluster("postgres-sequence") else { return };
    let stores: [Box<dyn Refunds>; 2] = [
        Box::new(PgRefunds::connect(&server.url()).unwrap()),
        Box::new(SqliteRefunds::open_in_memory().unwrap()),
    ];
    for store in stores {
        store.set_sequence(MerchantId(101), 97).unwrap();
        let tokens: Vec<i64> =
            (0..3).map(|_| store.next_sequence_token(MerchantId(101)).unwrap().0).collect();
        assert_eq!(tokens, [98, 99, 100]);
        assert_eq!(
            store.next_sequence_token(MerchantId(102)).unwrap().0,
            1,
            "a merchant with no counter yet"
        );
    }
}

/// Claims and confirms, fresh and stale, through `store`: what each write returned.
fn writes(store: &dyn Refunds) -> Vec<String> {
    let row = |id, state, fence| RefundRow {
        id: RefundId(id),
        merchant: MerchantId(7),
        amount: Cents(100),
        state,
        fence,
    };
    store
        .load(&[
            row(1, RefundState::Pending, 0),
            row(2, RefundState::Sending, 9),
            row(3, RefundState::Sent, 4),
        ])
        .unwrap();
    let mut seen = Vec::new();
    for (kind, refund, token) in [
        (WriteKind::Claim, 1, 5),
        (WriteKind::Confirm, 1, 5),
        (WriteKind::Claim, 2, 8),
        (WriteKind::Confirm, 2, 8),
        (WriteKind::Claim, 2, 10),
        (WriteKind::Claim, 3, 6),
        (WriteKind::Confirm, 3, 4),
    ] {
        let written = store.write(kind, RefundId(refund), WriteGuard::Fence(Token(token)));
        seen.push(format!("{kind} r{refund} with {token}: {:?}", written.map(|(outcome, _)| outcome)));
    }
    seen.push(format!("{:?}", store.all_rows()));
    seen
}

/// Every statement a planted bug rewrites runs on PostgreSQL and answers what it answers on
/// SQLite. (`confirm-without-fence` compares its parameter with itself, which PostgreSQL
/// typed as text: every confirm failed there, and its live runs broke `progress` instead of
/// `no-stale-confirm`: found by `fencesim fidelity`.)
#[test]
fn every_planted_statement_answers_on_postgres_as_on_sqlite() {
    let Some(server) = cluster("postgres-planted") else { return };
    let mut planted = 0;
    for mutant in Mutant::ALL {
        let statements = Planted(mutant).statements();
        if statements == Statements::SQLITE {
            continue;
        }
        planted += 1;
        let postgres = PgRefunds::connect(&server.url()).unwrap().with_statements(statements);
        let sqlite = SqliteRefunds::open_in_memory().unwrap().with_statements(statements);
        assert_eq!(writes(&postgres), writes(&sqlite), "{mutant:?}");
    }
    assert!(planted >= 5, "the catalogue's rewritten statements were tried: {planted}");
}
