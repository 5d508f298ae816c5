//! The narrator's core: the lines told so far, and the routine run of rows it is folding.

use crate::runner::Outcome;
use fencesim_model::{RefundId, WorkerId};
use fencesim_sim::{EventKind, WallMs};
use std::collections::{BTreeMap, BTreeSet};

pub(super) use fencesim_model::group_thousands as fmt_ms;

/// One line of a story.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub at_ms: u64,
    /// The event it tells (its index in the history); a folded run's first event.
    pub event: usize,
    pub actor: String,
    pub text: String,
    /// How the sequence diagram draws it.
    pub diagram: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RunKind {
    Settled,
    Skipped,
}

struct Fold {
    worker: WorkerId,
    kind: RunKind,
    first: RefundId,
    last: RefundId,
    rows: usize,
    from_ms: u64,
    to_ms: u64,
    first_event: usize,
    /// Who had confirmed the rows of a skipped run.
    sent_by: BTreeSet<WorkerId>,
}

pub(super) struct Narrator<'a> {
    pub(super) outcome: &'a Outcome,
    pub(super) lines: Vec<Line>,
    fold: Option<Fold>,
    /// Rows whose whole history is routine: told as part of a folded run.
    pub(super) plain: BTreeSet<RefundId>,
    /// How many times each refund was paid so far.
    pub(super) paid: BTreeMap<RefundId, u32>,
    /// Who confirmed each row sent, so far.
    pub(super) sent_by: BTreeMap<RefundId, WorkerId>,
    /// When each worker last selected its open rows.
    pub(super) selected_at: BTreeMap<WorkerId, u64>,
    /// The row each worker last claimed in its current batch.
    pub(super) claimed: BTreeMap<WorkerId, RefundId>,
    /// The event being told now.
    pub(super) current: usize,
}

pub(super) fn rows_word(count: u64) -> &'static str {
    if count == 1 {
        "row"
    } else {
        "rows"
    }
}

impl<'a> Narrator<'a> {
    pub(super) fn new(outcome: &'a Outcome, plain: BTreeSet<RefundId>) -> Narrator<'a> {
        Narrator {
            outcome,
            lines: Vec::new(),
            fold: None,
            plain,
            paid: BTreeMap::new(),
            sent_by: BTreeMap::new(),
            selected_at: BTreeMap::new(),
            claimed: BTreeMap::new(),
            current: 0,
        }
    }

    pub(super) fn wall(&self, ms: u64) -> WallMs {
        self.outcome.scenario.base.plus(ms)
    }

    pub(super) fn holder(&self, epoch: Option<u32>) -> String {
        match epoch.and_then(|number| self.outcome.epoch_holder(number)) {
            Some(worker) => format!("{worker}'s lease (epoch {})", epoch.unwrap_or(0)),
            None => "a lease".to_owned(),
        }
    }

    pub(super) fn instances(&self) -> usize {
        self.outcome.scenario.world.redis_instances()
    }

    /// `redis`, or `redis#3` when the lease lives on several instances.
    pub(super) fn redis(&self, instance: u8) -> String {
        if self.instances() == 1 {
            "redis".to_owned()
        } else {
            format!("redis#{}", instance + 1)
        }
    }

    pub(super) fn push(&mut self, at_ms: u64, actor: impl ToString, text: String, diagram: Vec<String>) {
        self.close_fold();
        let event = self.current;
        self.lines.push(Line { at_ms, event, actor: actor.to_string(), text, diagram });
    }

    pub(super) fn close_fold(&mut self) {
        let Some(fold) = self.fold.take() else { return };
        let range =
            if fold.rows == 1 { fold.first.to_string() } else { format!("{} .. {}", fold.first, fold.last) };
        let count = if fold.rows == 1 {
            String::new()
        } else {
            format!(" ({} refunds, until {})", fold.rows, self.wall(fold.to_ms))
        };
        let (text, note) = match fold.kind {
            RunKind::Settled => (
                format!("claims, pays and confirms {range}{count}"),
                format!("claims, pays and confirms {range}"),
            ),
            RunKind::Skipped => (self.skipped(&fold, &range, &count), format!("skips {range}, already sent")),
        };
        let diagram = vec![format!("Note over {}: {}", fold.worker, note.replace(" .. ", ".."))];
        let (at_ms, event) = (fold.from_ms, fold.first_event);
        self.lines.push(Line { at_ms, event, actor: fold.worker.to_string(), text, diagram });
    }

    /// A run of claims without a token that changed nothing: the rows were already sent.
    fn skipped(&self, fold: &Fold, range: &str, count: &str) -> String {
        let by = sent_by_words(&fold.sent_by);
        let selected = match self.selected_at.get(&fold.worker) {
            Some(at) => format!("the rows it selected at {}", self.wall(*at)),
            None => "its rows".to_owned(),
        };
        if fold.rows == 1 {
            format!(
                "its claim of {range} finds the row already sent{by} and changes nothing: it skips the row"
            )
        } else {
            format!(
                "goes on down {selected}: its claims of {range}{count} find each row already sent{by} and change nothing, so it skips them"
            )
        }
    }

    /// Folds a routine row event into the worker's current run, or starts a new run.
    pub(super) fn fold(
        &mut self,
        at_ms: u64,
        worker: WorkerId,
        kind: RunKind,
        refund: RefundId,
        new_row: bool,
    ) {
        let sender = if kind == RunKind::Skipped { self.sent_by.get(&refund).copied() } else { None };
        if let Some(fold) = &mut self.fold {
            if fold.worker == worker && fold.kind == kind {
                fold.to_ms = at_ms;
                if refund != fold.last {
                    fold.last = refund;
                    fold.rows += 1;
                }
                fold.sent_by.extend(sender);
                return;
            }
        }
        if !new_row {
            // the rest of a row whose start was told on its own line, or in a stretch that
            // something else closed before the row was done: told, so that no act is hidden
            self.rest_of_row(at_ms, worker, refund);
            return;
        }
        self.close_fold();
        self.fold = Some(Fold {
            worker,
            kind,
            first: refund,
            last: refund,
            rows: 1,
            from_ms: at_ms,
            to_ms: at_ms,
            first_event: self.current,
            sent_by: sender.into_iter().collect(),
        });
    }
}

impl Narrator<'_> {
    /// A payment or a confirm of a routine row whose stretch was closed before it came (a
    /// fault, another worker's act): its own line, at its own time.
    fn rest_of_row(&mut self, at_ms: u64, worker: WorkerId, refund: RefundId) {
        let (actor, text) = match &self.outcome.record.events[self.current].kind {
            EventKind::Write { after: Some(image), .. } => ("store", format!(
                "{worker} confirms {refund}, claimed in its stretch above: 1 row, now {} with fence {}",
                image.state.as_sql(),
                image.fence
            )),
            EventKind::RefundCalled { amount, gateway_ref, .. } => (
                "gateway",
                format!("{worker} pays {refund}, claimed in its stretch above: {amount} leaves (gw#{gateway_ref})"),
            ),
            _ => return,
        };
        self.push(at_ms, actor, text, vec![]);
    }
}

/// ` by B`, ` by B and C`, or nothing when the story does not know who sent the rows.
pub(super) fn sent_by_words(workers: &BTreeSet<WorkerId>) -> String {
    let names: Vec<String> = workers.iter().map(ToString::to_string).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => format!(" by {last}"),
        Some((last, rest)) => format!(" by {} and {last}", rest.join(", ")),
    }
}
