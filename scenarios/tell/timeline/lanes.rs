//! What the timeline draws, derived from a run's history: what each worker believed, what
//! Redis really granted, pauses and crashes, each write and gateway call as a mark, the
//! routine stretches folded, and the rows whose history was not routine.

use super::{spans, Bar, Fold, Mark, RowView, Span};
use crate::check::before::{found_finished, rows_before, rule_words};
use crate::runner::Outcome;
use crate::tell::story::plain_rows;
use fencesim_model::{group_thousands, GatewayRef, RefundId, RowImage, Step, WorkerId, WriteKind};
use fencesim_sim::{CallOutcome, Event, EventKind, FaultKind, FaultName};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What the page draws on the lanes of a run, derived from its history.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Lanes {
    /// What each worker believed: from the lease it acquired until its batch ended.
    pub believed: Vec<Bar>,
    /// What Redis really granted: each epoch from its grant until it expired or was released.
    pub leases: Vec<LeaseBar>,
    /// Pauses and crashes.
    pub bands: Vec<Bar>,
    /// Each worker's unbroken stretches of routine rows, one band each.
    pub folds: Vec<Fold>,
    /// Requests and replies held up on a hop.
    pub delays: Vec<Span>,
    /// Redis instances refusing connections while they restart.
    pub downtime: Vec<Span>,
    pub marks: Vec<Mark>,
    pub rows: Vec<RowView>,
}

/// A lease Redis granted, as drawn: its bar, its epoch and key, and the index of the event
/// at which Redis no longer held it (the history's length if it never ended): an event
/// whose index is below that came while the lease was live, even in its last millisecond.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeaseBar {
    #[serde(flatten)]
    pub bar: Bar,
    pub epoch: u32,
    pub key: String,
    pub until: usize,
    /// When its holder's renewals extended it (each starts its TTL again): why a lease can
    /// last many times its TTL.
    pub renewals: Vec<u64>,
}

/// The renewals among `events` (the lease's own span) that extended `epoch`'s key for its holder.
fn renewals(events: &[Event], epoch: &fencesim_sim::Epoch) -> Vec<u64> {
    let renewed = |kind: &EventKind| match kind {
        EventKind::LeaseExtended { worker, key, extended: true, .. } => {
            *worker == epoch.worker && *key == epoch.key
        }
        EventKind::LeaseRearmed { key, holder: Some(holder), .. } => {
            *key == epoch.key && *holder == epoch.value
        }
        _ => false,
    };
    events.iter().filter(|event| renewed(&event.kind)).map(|event| event.at_ms).collect()
}

fn lane(worker: WorkerId) -> usize {
    worker.0 as usize
}

/// What each worker believed: from each lease it acquired (its token, once taken) until
/// its batch completed or was abandoned, it released, or it crashed.
fn believed(events: &[Event], end: u64) -> Vec<Bar> {
    let mut open: BTreeMap<WorkerId, Bar> = BTreeMap::new();
    let mut bars = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let (worker, closes) = match &event.kind {
            EventKind::Step { worker, step: Step::LeaseAcquired { merchant, .. } } => {
                let label = format!("believes it holds the lease of {merchant}");
                let bar = Bar { worker: lane(*worker), from: event.at_ms, to: end, label, event: index };
                if let Some(mut earlier) = open.insert(*worker, bar) {
                    earlier.to = event.at_ms;
                    bars.push(earlier);
                }
                continue;
            }
            EventKind::Step { worker, step: Step::TokenTaken { token } } => {
                if let Some(bar) = open.get_mut(worker) {
                    bar.label = format!("believes it holds the lease, token {token}");
                }
                continue;
            }
            EventKind::Step {
                worker,
                step: Step::BatchCompleted { .. } | Step::BatchAbandoned { .. } | Step::Released { .. },
            } => (*worker, true),
            EventKind::FaultFired { fault: FaultKind::Crash { worker, .. }, .. } => (*worker, true),
            _ => continue,
        };
        if let Some(mut bar) = open.remove(&worker).filter(|_| closes) {
            bar.to = event.at_ms;
            bars.push(bar);
        }
    }
    bars.extend(open.into_values());
    bars.sort_by_key(|bar| (bar.from, bar.worker));
    bars
}

/// What Redis really granted: each epoch from its grant until Redis no longer held it
/// (it expired, was released, deleted, overwritten or lost), or the run's end; with the
/// events that opened and ended it, so that the page tells which events of one
/// millisecond came before its end.
fn leases(outcome: &Outcome) -> Vec<LeaseBar> {
    let record = &outcome.record;
    let ended = |epoch: &fencesim_sim::Epoch| {
        epoch.ended.map_or((record.ended_at_ms, record.events.len()), |end| (end.at_ms, end.event))
    };
    record
        .epochs
        .iter()
        .map(|epoch| {
            let (to, until) = ended(epoch);
            let renewals =
                renewals(&record.events[epoch.granted_at_event..until.min(record.events.len())], epoch);
            let kept = match renewals.len() {
                0 => String::new(),
                1 => ", renewed once".to_owned(),
                n => format!(", renewed {n} times"),
            };
            let bar = Bar {
                worker: lane(epoch.worker),
                from: epoch.granted_at_ms,
                to,
                label: format!("Redis: epoch {} ({}){kept}", epoch.number, epoch.value),
                event: epoch.granted_at_event,
            };
            LeaseBar { bar, epoch: epoch.number, key: epoch.key.clone(), until, renewals }
        })
        .collect()
}

/// Pauses and crashes, as bands over the worker's lane.
fn bands(events: &[Event]) -> Vec<Bar> {
    let mut bars = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let EventKind::FaultFired { fault, .. } = &event.kind else { continue };
        let (worker, longest, what) = match *fault {
            FaultKind::Pause { worker, duration_ms } => (worker, duration_ms, "frozen"),
            FaultKind::Crash { worker, restart_after_ms } => (worker, restart_after_ms, "crashed"),
            _ => continue,
        };
        let back = events[index..].iter().find_map(|later| match later.kind {
            EventKind::Resumed { worker: resumed } if resumed == worker => Some(later.at_ms),
            EventKind::Restarted { worker: restarted, .. } if restarted == worker => Some(later.at_ms),
            _ => None,
        });
        let to = back.unwrap_or(event.at_ms + longest);
        let label = format!("{worker} {what} for {} ms", group_thousands(to - event.at_ms));
        bars.push(Bar { worker: lane(worker), from: event.at_ms, to, label, event: index });
    }
    bars
}

/// A mark for an event the page draws one of, with the row it concerns; `paid` counts the
/// payments of each row so far.
fn mark_of(
    (index, event): (usize, &Event),
    before: Option<RowImage>,
    paid: &mut BTreeMap<RefundId, u32>,
) -> Option<(Mark, Option<RefundId>)> {
    let mark = |lane, worker: WorkerId, kind, label| Mark {
        at: event.at_ms,
        lane,
        worker: worker.0 as usize,
        kind,
        label,
        event: index,
        fold: None,
        write: None,
        token: None,
        fence_before: None,
        rule: None,
    };
    let (made, refund) = match &event.kind {
        EventKind::Write { worker, write, refund, token, rows, .. } => {
            let finished = before.is_some_and(|row| found_finished(*write, *token, row));
            let kind = match (rows, token) {
                (0, Some(_)) if finished => "none",
                (0, Some(_)) => "rejected",
                (0, None) => "none",
                _ => "ok",
            };
            let with = token.map_or("without a token".to_owned(), |token| format!("with token {token}"));
            let mut made =
                mark("write", *worker, kind, format!("{worker}: {write} {refund} {with}: {rows} row(s)"));
            made.write = Some(match write {
                WriteKind::Claim => "claim",
                WriteKind::Confirm => "confirm",
            });
            made.token = token.map(|token| token.0);
            made.fence_before = before.map(|row| row.fence);
            made.rule = before.map(|row| rule_words(*write, *token, row, *rows));
            (made, *refund)
        }
        EventKind::RefundCalled { worker, refund, amount, outcome, gateway_ref, .. } => {
            let kind = match outcome {
                CallOutcome::Created => match paid.entry(*refund).and_modify(|n| *n += 1).or_insert(1) {
                    1 => "paid",
                    _ => "paid-again",
                },
                CallOutcome::Replayed => "replayed",
                CallOutcome::Conflict => "none",
            };
            let what = match outcome {
                CallOutcome::Created => format!("{amount} leaves as {}", GatewayRef(*gateway_ref)),
                CallOutcome::Replayed => {
                    format!("answered from the idempotency record (gateway refund #{gateway_ref}), no money moves")
                }
                CallOutcome::Conflict => "refused: the key is in flight".to_owned(),
            };
            (mark("money", *worker, kind, format!("{worker} pays {refund}: {what}")), *refund)
        }
        EventKind::Lookup { worker, refund, .. } | EventKind::LookupBehind { worker, refund, .. } => {
            let (kind, what) = lookup_words(&event.kind);
            (mark("money", *worker, kind, what), *refund)
        }
        EventKind::FaultFired { fault, .. } => {
            let name: &'static str = FaultName::from(fault).name();
            return Some((mark("fault", WorkerId(0), "fault", format!("fault: {name}")), None));
        }
        EventKind::SettlementPosted { worker, refund, .. } => {
            (mark("write", *worker, posting_kind(&event.kind, paid), posting_label(&event.kind)), *refund)
        }
        _ => return None,
    };
    Some((made, Some(refund)))
}

/// A posting's mark: accepted the first time, again after that, or turned away.
fn posting_kind(kind: &EventKind, paid: &mut BTreeMap<RefundId, u32>) -> &'static str {
    let EventKind::SettlementPosted { refund, rows, .. } = kind else { return "none" };
    if *rows == 0 {
        return "rejected";
    }
    // the paid map counts postings under the refund's number with a bit set, apart
    match paid.entry(RefundId(refund.0 | POSTED)).and_modify(|n| *n += 1).or_insert(1) {
        1 => "ok",
        _ => "posted-again",
    }
}

fn posting_label(kind: &EventKind) -> String {
    let EventKind::SettlementPosted { worker, refund, amount, token, rows, .. } = kind else {
        return String::new();
    };
    let with = token.map_or("without a fence".to_owned(), |token| format!("with token {token}"));
    format!("{worker}: posts {refund} ({amount}) to the settlement ledger {with}: {rows} row(s)")
}

/// Set in a refund's number to count its postings to the settlement ledger apart from its
/// payments.
const POSTED: u32 = 1 << 31;

/// A lookup's mark, and its words: what it found, or that it lied.
fn lookup_words(kind: &EventKind) -> (&'static str, String) {
    match kind {
        EventKind::Lookup { worker, refund, found: Some(number) } => {
            ("found", format!("{worker} looks up {refund}: finds {}", GatewayRef(*number)))
        }
        EventKind::LookupBehind { refund, gateway_ref, behind_ms, .. } => (
            "lied",
            format!(
                "the lookup of {refund} lied: its copy was {} ms behind the ledger, which has {}",
                group_thousands(*behind_ms),
                GatewayRef(*gateway_ref)
            ),
        ),
        EventKind::Lookup { worker, refund, .. } => {
            ("none", format!("{worker} looks up {refund}: finds none"))
        }
        _ => ("none", String::new()),
    }
}

/// What a stretch of routine marks did: every write in it changed nothing (the rows were
/// found sent, and skipped), or the rows were claimed, paid and confirmed.
fn stretch_kind(marks: &[Mark], stretch: &[usize]) -> &'static str {
    let mut writes = stretch.iter().filter(|&&i| marks[i].lane == "write");
    match writes.all(|&i| marks[i].kind == "none") {
        true => "skipped",
        false => "settled",
    }
}

/// Folds each worker's unbroken stretch of marks on routine rows (three rows or more) into
/// one band.
fn fold_routine(marks: &mut [Mark], routine: &[Option<RefundId>]) -> Vec<Fold> {
    let mut folds = Vec::new();
    let workers = marks.iter().map(|mark| mark.worker + 1).max().unwrap_or(0);
    for worker in 0..workers {
        let mine: Vec<usize> =
            (0..marks.len()).filter(|&i| marks[i].worker == worker && marks[i].lane != "fault").collect();
        let mut start = 0;
        while start < mine.len() {
            let mut end = start;
            while end < mine.len() && routine[mine[end]].is_some() {
                end += 1;
            }
            let stretch = &mine[start..end];
            let rows: BTreeSet<RefundId> = stretch.iter().filter_map(|&i| routine[i]).collect();
            if let (true, Some(first), Some(last)) = (rows.len() >= 3, rows.first(), rows.last()) {
                let (from, to) = (marks[stretch[0]].at, marks[stretch[stretch.len() - 1]].at);
                let kind = stretch_kind(marks, stretch);
                let did = match kind {
                    "skipped" => "found already sent, and skipped",
                    _ => "claimed, paid and confirmed",
                };
                let label = format!("{first} .. {last}: {} routine rows, {did}", rows.len());
                let event = marks[stretch[0]].event;
                for &i in stretch {
                    marks[i].fold = Some(folds.len());
                    // a routine mark is told by its event (kept in the page) and its fold's
                    // label: its own words would double the page's size
                    marks[i].rule = None;
                    marks[i].label = String::new();
                }
                folds.push(Fold { bar: Bar { worker, from, to, label, event }, kind });
            }
            start = end.max(start + 1);
        }
    }
    // in time order, each mark pointing at its fold's new place
    let mut order: Vec<usize> = (0..folds.len()).collect();
    order.sort_by_key(|&i| (folds[i].bar.from, folds[i].bar.worker));
    let mut place = vec![0; folds.len()];
    for (new, &old) in order.iter().enumerate() {
        place[old] = new;
    }
    for mark in marks.iter_mut() {
        mark.fold = mark.fold.map(|old| place[old]);
    }
    order.into_iter().map(|i| folds[i].clone()).collect()
}

/// The rows whose history was not routine: their state and fence after each accepted write.
fn rows(events: &[Event], plain: &BTreeSet<RefundId>) -> Vec<RowView> {
    let mut rows: BTreeMap<RefundId, RowView> = BTreeMap::new();
    for (index, event) in events.iter().enumerate() {
        let EventKind::Write { refund, after: Some(image), rows: 1.., .. } = &event.kind else { continue };
        if plain.contains(refund) {
            continue;
        }
        let row =
            rows.entry(*refund).or_insert_with(|| RowView { refund: refund.to_string(), changes: vec![] });
        row.changes.push((event.at_ms, image.state.as_sql(), image.fence, index));
    }
    let mut rows: Vec<RowView> = rows.into_values().collect();
    rows.sort_by_key(|row| row.changes[0].0);
    rows
}

pub(super) fn lanes(outcome: &Outcome) -> Lanes {
    let events = &outcome.record.events;
    let plain = plain_rows(events);
    let before = rows_before(&outcome.scenario.world, &outcome.record);
    let (mut marks, mut routine, mut paid) = (Vec::new(), Vec::new(), BTreeMap::new());
    for (index, event) in events.iter().enumerate() {
        if let Some((mark, refund)) = mark_of((index, event), before[index], &mut paid) {
            routine.push(refund.filter(|refund| plain.contains(refund)));
            marks.push(mark);
        }
    }
    let folds = fold_routine(&mut marks, &routine);
    Lanes {
        believed: believed(events, outcome.record.ended_at_ms),
        leases: leases(outcome),
        bands: bands(events),
        folds,
        delays: spans::delays(events),
        downtime: spans::downtime(outcome),
        marks,
        rows: rows(events, &plain),
    }
}
