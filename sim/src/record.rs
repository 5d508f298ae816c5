//! What a run leaves behind for the checkers and the reports.

use crate::gateway::LedgerEntry;
use crate::history::Event;
use crate::ledger::Epoch;
use fencesim_model::{Cents, Job, MerchantId, RefundRow, SettlementEntry};

#[derive(Clone, Debug)]
pub struct RunRecord {
    pub seed: u64,
    pub events: Vec<Event>,
    pub final_rows: Vec<RefundRow>,
    pub ledger: Vec<LedgerEntry>,
    /// The second store's journal and balances at the end (empty in a world without it).
    pub settlement_entries: Vec<SettlementEntry>,
    pub settlement_balances: Vec<(MerchantId, Cents)>,
    pub epochs: Vec<Epoch>,
    /// Every job was acked and every worker was idle when the run ended.
    pub settled: bool,
    pub ended_at_ms: u64,
    /// When the last fault fired, if any did.
    pub last_fault_ms: Option<u64>,
    /// Jobs still open at the end, with their delivery counts.
    pub open_jobs: Vec<(Job, u32)>,
    /// Tasks still alive in the runtime once the run was wound down (should be none).
    pub leaked_tasks: usize,
    /// How many times a task waited on the runtime's timer (a latency, a delay, a pause):
    /// not part of the history, a measure of what the run cost the runtime.
    pub sleeps: u64,
    /// The order the world served its requests and fired its timed faults in, with their
    /// story milliseconds: kept only by `run_ordered`, empty otherwise.
    pub served: Vec<(u64, crate::order::Served)>,
}
