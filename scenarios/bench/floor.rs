//! The SQL floor: the statements a simulated run executed, run again on the same kind of
//! database with no simulation around them. It is the database work a run cannot avoid,
//! so a run's time over it is what the simulation itself costs.
//!
//! Every statement counts: the refund rows loaded, each select of a merchant's open rows,
//! each claim and confirm with its guard, each token the database's sequence issued, the
//! settlement ledger's enrolments, lookups and postings, and the reads of both stores at
//! the end. The databases are set up as a run sets up its own: emptied ones kept from the
//! last use, their statements already prepared.

use crate::scenario::Scenario;
use fencesim_model::{
    MerchantId, Posting, RefundId, SqliteRefunds, SqliteSettlement, Step, Token, WriteGuard, WriteKind,
};
use fencesim_sim::{EventKind, RunRecord};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorOp {
    SelectOpen(MerchantId),
    Write(WriteKind, RefundId, WriteGuard),
    NextSequence(MerchantId),
    Enroll(MerchantId, Token),
    Posted(RefundId),
    Post(Posting, WriteGuard),
}

/// The store statements a run executed, in order.
pub fn statements(record: &RunRecord) -> Vec<FloorOp> {
    let mut job_of: BTreeMap<fencesim_model::WorkerId, MerchantId> = BTreeMap::new();
    let mut ops = Vec::with_capacity(record.events.len() / 2);
    let guard_of = |token: Option<Token>| token.map_or(WriteGuard::Unfenced, WriteGuard::Fence);
    for event in &record.events {
        let op = match &event.kind {
            EventKind::Step { worker, step: Step::JobReceived { job, .. } } => {
                job_of.insert(*worker, job.merchant);
                None
            }
            EventKind::Step { worker, step: Step::RowsSelected { .. } } => {
                job_of.get(worker).map(|merchant| FloorOp::SelectOpen(*merchant))
            }
            EventKind::Write { write, refund, token, .. } => {
                Some(FloorOp::Write(*write, *refund, guard_of(*token)))
            }
            EventKind::TokenIssued { worker, key, .. } if key.starts_with("fence_seq:") => {
                job_of.get(worker).map(|merchant| FloorOp::NextSequence(*merchant))
            }
            EventKind::SettlementEnrolled { merchant, token, .. } => Some(FloorOp::Enroll(*merchant, *token)),
            EventKind::SettlementLookup { refund, .. } => Some(FloorOp::Posted(*refund)),
            EventKind::SettlementPosted { refund, merchant, amount, token, .. } => {
                let posting = Posting { refund: *refund, merchant: *merchant, amount: *amount };
                Some(FloorOp::Post(posting, guard_of(*token)))
            }
            _ => None,
        };
        ops.extend(op);
    }
    ops
}

/// The floor's databases, kept emptied between uses as a run keeps its own.
pub struct Floor {
    store: SqliteRefunds,
    settlement: SqliteSettlement,
}

impl Floor {
    pub fn new() -> Result<Floor, String> {
        Ok(Floor {
            store: SqliteRefunds::open_in_memory().map_err(|error| error.to_string())?,
            settlement: SqliteSettlement::open_in_memory().map_err(|error| error.to_string())?,
        })
    }

    /// Runs the setup and the statements; returns the rows they updated.
    pub fn run(&self, scenario: &Scenario, ops: &[FloorOp]) -> Result<u64, String> {
        self.run_holding(scenario, ops, 0)
    }

    /// The floor, holding `held_bytes` more as it goes, spread evenly over the statements,
    /// as a run's history grows by each statement's events: what the same SQL costs when
    /// the cache must also hold what a run remembers. Against the bare floor (`held_bytes`
    /// 0) it tells how much of a run's cost over the floor is the room its history takes.
    pub fn run_holding(
        &self,
        scenario: &Scenario,
        ops: &[FloorOp],
        held_bytes: usize,
    ) -> Result<u64, String> {
        let text = |error: rusqlite::Error| error.to_string();
        let store = self.store.clone().with_statements(scenario.world.mechanism.spec().statements);
        store.clear().and_then(|()| store.insert(&scenario.world.rows)).map_err(text)?;
        self.settlement.clear().map_err(text)?;
        let per_statement = held_bytes / ops.len().max(1);
        let mut held: Vec<u8> = Vec::new();
        let mut updated = 0;
        for (number, op) in ops.iter().enumerate() {
            updated += self.one(&store, *op).map_err(text)?;
            if per_statement > 0 {
                held.extend(std::iter::repeat_n(number as u8, per_statement));
            }
        }
        std::hint::black_box((store.all_rows().map_err(text)?, &held));
        if scenario.world.settlement.is_some() {
            std::hint::black_box((
                self.settlement.entries().map_err(text)?,
                self.settlement.balances().map_err(text)?,
            ));
        }
        Ok(updated)
    }

    /// One statement; the rows it updated.
    fn one(&self, store: &SqliteRefunds, op: FloorOp) -> rusqlite::Result<u64> {
        Ok(match op {
            FloorOp::SelectOpen(merchant) => {
                std::hint::black_box(store.open_refunds(merchant)?);
                0
            }
            FloorOp::Write(kind, refund, guard) => store.write(kind, refund, guard)?.rows_updated,
            FloorOp::NextSequence(merchant) => {
                std::hint::black_box(store.next_sequence_token(merchant)?);
                0
            }
            FloorOp::Enroll(merchant, token) => self.settlement.enroll(merchant, token)?.rows_updated,
            FloorOp::Posted(refund) => {
                std::hint::black_box(self.settlement.posted(refund)?);
                0
            }
            FloorOp::Post(posting, guard) => self.settlement.post(posting, guard)?.rows_updated,
        })
    }
}
