//! Why a breach happened: from the history, the chain of events that makes it, from the
//! fault (or the planted bug's act) to the event the invariant turned down. Each invariant
//! names its own way of finding a chain in the table (`Invariant::chain`); one whose
//! breach has no chain says so in its summary, and shows no guess.
//!
//! Most breaches are a stale holder's: a lease ended (it expired, was lost in a restart,
//! or was deleted by someone else) while its holder was held up, a successor was granted
//! the lease, and the old holder, still believing, acted. `stale` finds that chain; the
//! invariants add what is theirs (the successor's write on the same row, the first
//! payment of a refund paid twice, the counter that went back).

mod counter;
mod money;
mod rows;
mod settlement;
mod stale;
mod words;

pub use counter::{progress_chain, token_chain};
pub use money::{double_refund_chain, ledger_chain, settled_chain};
pub use rows::{lease_chain, row_chain, single_holder_chain};
pub use settlement::{balance_chain, posting_chain};
pub(crate) use words::against_the_rule;

use crate::check::before::rows_before;
use crate::check::facts::{Breach, Facts};
use fencesim_model::RowImage;
use fencesim_sim::Event;
use serde::Serialize;

/// One event of a chain, in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainStep {
    /// The event's index in the history.
    pub event: usize,
    pub at_ms: u64,
    pub text: String,
}

/// The chain of one breach: its events in history order, ending at the breach (or, for a
/// check of the state at rest, at the last event that made it), and one sentence for all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Chain {
    pub found: bool,
    pub summary: String,
    pub steps: Vec<ChainStep>,
}

impl Chain {
    /// A chain of `steps` (sorted, each event once), told by `summary`.
    pub fn of(summary: String, mut steps: Vec<ChainStep>) -> Chain {
        steps.sort_by_key(|step| step.event);
        steps.dedup_by_key(|step| step.event);
        Chain { found: !steps.is_empty(), summary, steps }
    }

    /// No chain: `why` says what the finder looked for and did not find.
    pub fn none(why: String) -> Chain {
        Chain { found: false, summary: format!("no chain found: {why}"), steps: Vec::new() }
    }

    /// Whether the chain passes through any of `events`.
    pub fn passes_through(&self, events: &[usize]) -> bool {
        self.steps.iter().any(|step| events.contains(&step.event))
    }
}

/// What the finders read: the facts, the history's events, and what each write found in
/// its row (taken once, in one pass over the history).
pub(crate) struct Cx<'a> {
    pub facts: &'a Facts<'a>,
    pub events: &'a [Event],
    pub before: Vec<Option<RowImage>>,
}

impl<'a> Cx<'a> {
    pub fn new(facts: &'a Facts<'a>) -> Cx<'a> {
        let before = rows_before(facts.world, facts.record);
        Cx { facts, events: &facts.record.events, before }
    }

    /// The step of event `index`, told by `words`.
    pub fn step(&self, index: usize) -> ChainStep {
        ChainStep { event: index, at_ms: self.events[index].at_ms, text: words::told(self, index) }
    }

    pub fn at(&self, index: usize) -> String {
        self.facts.at(self.events[index].at_ms).to_string()
    }
}

/// The breach's own event, or a reason why there is none to start from.
pub(crate) fn breaking_event(breach: &Breach) -> Result<usize, Chain> {
    breach.event.ok_or_else(|| Chain::none("the breach names no event".to_owned()))
}
