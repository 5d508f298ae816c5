//! Tells a run in words: each notable event a line, and the routine rhythm of a worker
//! settling row after row folded into one line. The same lines drive the sequence diagram.

use crate::runner::Outcome;
use fencesim_model::{RefundId, RefundState, Step, WorkerId, WriteKind};
use fencesim_sim::{Actor, CallOutcome, Event, EventKind, FaultKind, WallMs};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One line of a story.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub at_ms: u64,
    pub actor: String,
    pub text: String,
    /// How the sequence diagram draws it.
    pub diagram: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunKind {
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
}

/// How far a row has got through one plain claim, pay, confirm by a single lease.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rhythm {
    Claimed(Option<u32>),
    Paid(Option<u32>),
    Done,
    Irregular,
}

/// The rows whose whole history is one claim from `pending`, one payment and one confirm
/// by the same lease: routine, told as a folded run. A skip by a worker without a token
/// does not count against a row; any other event on it does.
fn plain_rows(events: &[Event]) -> BTreeSet<RefundId> {
    let mut rhythm: BTreeMap<RefundId, Rhythm> = BTreeMap::new();
    for e in events {
        let (refund, next) = match &e.kind {
            EventKind::Write { rows: 0, token: None, .. } => continue,
            EventKind::Write { write, refund, rows, epoch, after, .. } => {
                let now = rhythm.get(refund).copied();
                let next = match (write, now, after) {
                    (WriteKind::Claim, None, Some(img))
                        if *rows == 1 && img.state == RefundState::Sending =>
                    {
                        Rhythm::Claimed(*epoch)
                    }
                    (WriteKind::Confirm, Some(Rhythm::Paid(by)), Some(_)) if *rows == 1 && by == *epoch => {
                        Rhythm::Done
                    }
                    _ => Rhythm::Irregular,
                };
                (refund, next)
            }
            EventKind::RefundCalled { refund, epoch, outcome, .. } => {
                let next = match rhythm.get(refund) {
                    Some(Rhythm::Claimed(by)) if *by == *epoch && *outcome == CallOutcome::Created => {
                        Rhythm::Paid(*epoch)
                    }
                    _ => Rhythm::Irregular,
                };
                (refund, next)
            }
            EventKind::Lookup { refund, .. } => (refund, Rhythm::Irregular),
            _ => continue,
        };
        rhythm.insert(*refund, next);
    }
    rhythm.into_iter().filter(|(_, r)| *r == Rhythm::Done).map(|(id, _)| id).collect()
}

struct Narrator<'a> {
    outcome: &'a Outcome,
    lines: Vec<Line>,
    fold: Option<Fold>,
    plain: BTreeSet<RefundId>,
    paid: BTreeMap<RefundId, u32>,
}

use fencesim_model::group_thousands as fmt_ms;

fn rows_word(n: u64) -> &'static str {
    if n == 1 {
        "row"
    } else {
        "rows"
    }
}

impl<'a> Narrator<'a> {
    fn wall(&self, ms: u64) -> WallMs {
        self.outcome.scenario.base.plus(ms)
    }

    fn holder(&self, epoch: Option<u32>) -> String {
        match epoch.and_then(|n| self.outcome.epoch_holder(n)) {
            Some(w) => format!("{w}'s lease (epoch {})", epoch.unwrap_or(0)),
            None => "a lease".to_owned(),
        }
    }

    fn instances(&self) -> usize {
        self.outcome.scenario.world.redis_instances()
    }

    /// `redis`, or `redis#3` when the lease lives on several instances.
    fn redis(&self, instance: u8) -> String {
        if self.instances() == 1 {
            "redis".to_owned()
        } else {
            format!("redis#{}", instance + 1)
        }
    }

    fn push(&mut self, at_ms: u64, actor: impl ToString, text: String, diagram: Vec<String>) {
        self.close_fold();
        self.lines.push(Line { at_ms, actor: actor.to_string(), text, diagram });
    }

    fn close_fold(&mut self) {
        let Some(f) = self.fold.take() else { return };
        let what = match f.kind {
            RunKind::Settled => "claims, pays and confirms",
            RunKind::Skipped => "finds already settled and skips",
        };
        let range = if f.rows == 1 { f.first.to_string() } else { format!("{} .. {}", f.first, f.last) };
        let count = if f.rows == 1 {
            String::new()
        } else {
            format!(" ({} refunds, until {})", f.rows, self.wall(f.to_ms))
        };
        let diagram = vec![format!("Note over {}: {what} {}", f.worker, range.replace(" .. ", ".."))];
        self.lines.push(Line {
            at_ms: f.from_ms,
            actor: f.worker.to_string(),
            text: format!("{what} {range}{count}"),
            diagram,
        });
    }

    /// Folds a routine row event into the worker's current run, or starts a new run.
    fn fold(&mut self, at_ms: u64, worker: WorkerId, kind: RunKind, refund: RefundId, new_row: bool) {
        if let Some(f) = &mut self.fold {
            if f.worker == worker && f.kind == kind {
                f.to_ms = at_ms;
                if refund != f.last {
                    f.last = refund;
                    f.rows += 1;
                }
                return;
            }
        }
        if !new_row {
            // the rest of a row whose start was told on its own line
            return;
        }
        self.close_fold();
        self.fold =
            Some(Fold { worker, kind, first: refund, last: refund, rows: 1, from_ms: at_ms, to_ms: at_ms });
    }

    fn event(&mut self, e: &Event) {
        let at = e.at_ms;
        match &e.kind {
            EventKind::JobEnqueued { job, merchant } => self.push(
                at,
                Actor::Queue,
                format!("{job} is queued: settle every open refund of {merchant}"),
                vec![],
            ),
            EventKind::JobDelivered { job, worker, delivery, .. } => {
                let text = if *delivery == 1 {
                    format!("hands {job} to {worker}")
                } else {
                    format!("hands {job} to {worker} (delivery {delivery})")
                };
                self.push(at, Actor::Queue, text, vec![format!("Q->>{worker}: {job}")])
            }
            EventKind::VisibilityExpired { job, worker, .. } => self.push(
                at,
                Actor::Queue,
                format!(
                    "{worker} has not acked {job} within the visibility timeout: the job is visible again"
                ),
                vec![format!("Note over Q: {worker}'s delivery timed out")],
            ),
            EventKind::JobAcked { job, worker, accepted, .. } => {
                let text = if *accepted {
                    format!("{worker} acks {job}: done")
                } else {
                    format!("refuses {worker}'s ack of {job}: that delivery was handed on")
                };
                self.push(at, Actor::Queue, text, vec![format!("{worker}->>Q: ack {job}")])
            }
            EventKind::LeaseGranted { worker, instance, key, value, ttl_ms, epoch } => {
                let redis = self.redis(*instance);
                let text = match epoch {
                    Some(n) if self.instances() == 1 => {
                        format!(
                            "grants {key} to {worker} (value {value}, TTL {} ms): epoch {n} begins",
                            fmt_ms(*ttl_ms)
                        )
                    }
                    Some(n) => format!("{redis} grants {key} to {worker}: a majority, epoch {n} begins"),
                    None => format!(
                        "{redis} grants {key} to {worker} (value {value}, TTL {} ms)",
                        fmt_ms(*ttl_ms)
                    ),
                };
                let reply = epoch.map_or("OK".to_owned(), |n| format!("OK, epoch {n}"));
                self.push(
                    at,
                    redis,
                    text,
                    vec![
                        format!("{worker}->>R: SET {key} NX PX {ttl_ms}"),
                        format!("R-->>{worker}: {reply}"),
                    ],
                )
            }
            EventKind::LeaseRefused { worker, instance, key } => self.push(
                at,
                self.redis(*instance),
                format!("refuses {key} to {worker}: another lease is live"),
                vec![format!("{worker}->>R: SET {key} NX"), format!("R-->>{worker}: nil")],
            ),
            EventKind::LeaseExpired { instance, key, epoch, .. } => {
                let whose = self.holder(*epoch);
                self.push(
                    at,
                    self.redis(*instance),
                    format!("{key} expires: {whose} is over, and nothing tells its holder"),
                    vec![format!("Note over R: {key} expires")],
                )
            }
            EventKind::LeaseReleased { worker, instance, key, deleted, .. } => {
                let text = if *deleted {
                    format!("{worker} releases {key}")
                } else {
                    format!("{worker}'s compare-and-delete of {key} deletes nothing: the key is no longer {worker}'s")
                };
                self.push(at, self.redis(*instance), text, vec![format!("{worker}->>R: release {key}")])
            }
            EventKind::LeaseDeleted { worker, instance, key, holder } => {
                let text = match holder {
                    Some(v) if !v.starts_with(&format!("{worker}")) => {
                        format!("{worker} DELs {key} and removes {v}, another worker's live lease")
                    }
                    Some(_) => format!("{worker} DELs {key}"),
                    None => format!("{worker} DELs {key}: nothing there"),
                };
                self.push(at, self.redis(*instance), text, vec![format!("{worker}->>R: DEL {key}")])
            }
            EventKind::LeaseExtended { worker, instance, key, extended } => {
                if !extended {
                    self.push(
                        at,
                        self.redis(*instance),
                        format!("{worker}'s renewal of {key} finds the lease gone"),
                        vec![format!("{worker}->>R: extend {key}"), format!("R-->>{worker}: 0")],
                    )
                }
            }
            EventKind::LeaseRead { worker, instance, key, holder } => {
                let ours = holder.as_deref().is_some_and(|h| h.starts_with(&format!("{worker}")));
                if !ours {
                    let who = holder.as_deref().unwrap_or("nobody");
                    self.push(
                        at,
                        self.redis(*instance),
                        format!("{worker} checks {key} before writing: held by {who}"),
                        vec![format!("{worker}->>R: GET {key}"), format!("R-->>{worker}: {who}")],
                    )
                }
            }
            EventKind::LeaseSet { worker, instance, key, value, .. } => self.push(
                at,
                self.redis(*instance),
                format!("{worker} sets {key} to {value} without NX, whoever held it"),
                vec![format!("{worker}->>R: SET {key} PX (no NX)")],
            ),
            EventKind::CounterSeeded { instance, key, value } => self.push(
                at,
                self.redis(*instance),
                format!("starts with {key} seeded from MAX(fence): {value}"),
                vec![format!("Note over R: {key} = {value}")],
            ),
            EventKind::RedisRestarted { instance, lost } => self.push(
                at,
                self.redis(*instance),
                format!("restarts; {lost} key(s) lost or rolled back"),
                vec![format!("Note over R: restart, {lost} key(s) lost")],
            ),
            EventKind::Restarted { worker, incarnation } => self.push(
                at,
                Actor::Faults,
                format!("{worker} starts again (process {incarnation})"),
                vec![format!("Note over {worker}: process {incarnation} starts")],
            ),
            EventKind::TokenIssued { worker, key, token } => self.push(
                at,
                Actor::Redis,
                format!("INCR {key} gives {worker} token {token}"),
                vec![format!("{worker}->>R: INCR {key}"), format!("R-->>{worker}: {token}")],
            ),
            EventKind::Write { worker, write, refund, token, rows, after, .. } => {
                if *rows == 0 && token.is_none() {
                    self.fold(at, *worker, RunKind::Skipped, *refund, true);
                    return;
                }
                if self.plain.contains(refund) {
                    self.fold(at, *worker, RunKind::Settled, *refund, *write == WriteKind::Claim);
                    return;
                }
                let with = match token {
                    Some(t) => format!("with token {t}"),
                    None => "without a token".to_owned(),
                };
                let result = match after {
                    Some(img) => format!("1 row, now {} with fence {}", img.state, img.fence),
                    None => format!("{rows} {}", rows_word(*rows)),
                };
                let fence = token.map_or(String::new(), |t| format!(" fence {t}"));
                self.push(
                    at,
                    Actor::Store,
                    format!("{worker} {write}s {refund} {with}: {result}"),
                    vec![
                        format!("{worker}->>D: {write} {refund}{fence}"),
                        format!("D-->>{worker}: {rows} {}", rows_word(*rows)),
                    ],
                )
            }
            EventKind::Lookup { worker, refund, found } => {
                let answer = match found {
                    Some(n) => format!("refund #{n} exists"),
                    None => "none".to_owned(),
                };
                self.push(
                    at,
                    Actor::Gateway,
                    format!("{worker} asks for a refund with reference {refund}: {answer}"),
                    vec![format!("{worker}->>G: find {refund}"), format!("G-->>{worker}: {answer}")],
                )
            }
            EventKind::RefundCalled {
                worker, refund, amount, outcome, gateway_ref, response_lost, ..
            } => {
                if self.plain.contains(refund) {
                    self.fold(at, *worker, RunKind::Settled, *refund, false);
                    return;
                }
                let times_paid = self.paid.entry(*refund).or_default();
                if *outcome == CallOutcome::Created {
                    *times_paid += 1;
                }
                let text = match (outcome, *times_paid) {
                    (CallOutcome::Created, 1) => format!("{worker} pays {refund}: {amount} leaves (refund #{gateway_ref})"),
                    (CallOutcome::Created, _) => {
                        format!("{worker} pays {refund} again: a second {amount} leaves (refund #{gateway_ref})")
                    }
                    (CallOutcome::Replayed, _) => format!(
                        "{worker} pays {refund} with idempotency key {refund}: the gateway returns refund #{gateway_ref} and moves no money"
                    ),
                    (CallOutcome::Conflict, _) => {
                        format!("{worker} pays {refund}: conflict, a call with that key is still in flight")
                    }
                };
                let text =
                    if *response_lost { format!("{text}; the answer is lost on the way back") } else { text };
                let reply = match (outcome, response_lost) {
                    (_, true) => "(lost)".to_owned(),
                    (CallOutcome::Created, _) => format!("refund #{gateway_ref}, {amount}"),
                    (CallOutcome::Replayed, _) => format!("existing refund #{gateway_ref}"),
                    (CallOutcome::Conflict, _) => "conflict".to_owned(),
                };
                self.push(
                    at,
                    Actor::Gateway,
                    text,
                    vec![
                        format!("{worker}->>G: refund {refund}, key {refund}"),
                        format!("G-->>{worker}: {reply}"),
                    ],
                )
            }
            EventKind::Step { worker, step } => self.step(at, *worker, step),
            EventKind::FaultFired { fault, .. } => {
                let (text, note) = fault_words(fault);
                self.push(at, Actor::Faults, text, vec![note])
            }
            EventKind::Resumed { worker } => self.push(
                at,
                Actor::Faults,
                format!("{worker}'s process resumes; {worker} still believes it holds the lease"),
                vec![format!("Note over {worker}: resumes")],
            ),
        }
    }

    fn step(&mut self, at: u64, worker: WorkerId, step: &Step) {
        match step {
            Step::RowsSelected { open, sending } => self.push(
                at,
                worker,
                format!("selects {} open refunds, {sending} of them in sending", fmt_ms(u64::from(*open))),
                vec![format!("{worker}->>D: select open rows"), format!("D-->>{worker}: {open} rows")],
            ),
            Step::LeaseBusy { merchant } => self.push(
                at,
                worker,
                format!("cannot take the lease of {merchant}: stops and leaves the job to the queue"),
                vec![],
            ),
            Step::FenceViolation { violation } => self.push(
                at,
                worker,
                format!(
                    "FenceViolation: its {} of {} with token {} was turned away by the row",
                    violation.write, violation.refund, violation.token
                ),
                vec![format!("Note over {worker}: FenceViolation")],
            ),
            Step::BatchAbandoned { reason } => self.push(
                at,
                worker,
                format!("abandons the batch ({reason}), without acking the job"),
                vec![format!("Note over {worker}: abandons the batch")],
            ),
            Step::BatchCompleted { merchant } => self.push(
                at,
                worker,
                format!("completes the batch for {merchant}"),
                vec![format!("Note over {worker}: batch complete")],
            ),
            _ => {}
        }
    }
}

/// A fault in words, and its note on the sequence diagram.
fn fault_words(fault: &FaultKind) -> (String, String) {
    match *fault {
        FaultKind::Pause { worker, duration_ms } => (
            format!("{worker}'s whole process freezes for {} ms", fmt_ms(duration_ms)),
            format!("Note over {worker}: frozen for {} ms", fmt_ms(duration_ms)),
        ),
        FaultKind::Crash { worker, restart_after_ms } => (
            format!("{worker}'s process crashes; a new one starts in {} ms", fmt_ms(restart_after_ms)),
            format!("Note over {worker}: crash"),
        ),
        FaultKind::ExpireLease { instance, merchant } => (
            format!("the lease of {merchant} on redis#{} is made to expire now", instance + 1),
            "Note over R: lease expires early".to_owned(),
        ),
        FaultKind::RedisClockJump { instance, by_ms } => (
            format!("redis#{}'s clock jumps {} ms ahead", instance + 1, fmt_ms(by_ms)),
            format!("Note over R: clock jumps {} ms", fmt_ms(by_ms)),
        ),
        FaultKind::RedisRestart { instance, persistence } => (
            format!("redis#{} restarts with persistence {persistence:?}", instance + 1),
            "Note over R: restart".to_owned(),
        ),
        FaultKind::Redeliver { worker } => (
            format!("the queue gives up on {worker}'s delivery and hands the job on"),
            "Note over Q: redelivery".to_owned(),
        ),
        FaultKind::DuplicateDelivery { worker } => (
            format!("the queue delivers {worker}'s job a second time"),
            "Note over Q: duplicate delivery".to_owned(),
        ),
        FaultKind::DbDelay { worker, delay_ms } => (
            format!("{worker}'s next database request is held up {} ms on the way", fmt_ms(delay_ms)),
            format!("Note over {worker},D: slow hop"),
        ),
        FaultKind::GatewayLatency { worker, extra_ms } => (
            format!("{worker}'s next gateway call takes {} ms longer", fmt_ms(extra_ms)),
            "Note over G: slow".to_owned(),
        ),
        FaultKind::LostResponse { worker } => (
            format!("{worker}'s next refund call will move money and lose its answer"),
            "Note over G: response lost".to_owned(),
        ),
        FaultKind::GatewayConflicts { for_ms } => (
            format!("for {} ms the gateway refuses concurrent calls with one key", fmt_ms(for_ms)),
            "Note over G: conflicts".to_owned(),
        ),
    }
}

/// The run as lines, routine stretches folded.
pub fn story(outcome: &Outcome) -> Vec<Line> {
    let plain = plain_rows(&outcome.record.events);
    let mut n = Narrator { outcome, lines: Vec::new(), fold: None, plain, paid: BTreeMap::new() };
    for e in &outcome.record.events {
        n.event(e);
    }
    n.close_fold();
    n.lines
}

/// The story as text, one line per event: `10:00:26.000  store    A claims r_815 ...`.
pub fn render_story(outcome: &Outcome, lines: &[Line], limit: usize) -> String {
    let mut out = String::new();
    for line in lines.iter().take(limit) {
        let _ = writeln!(out, "{}  {:<8} {}", outcome.scenario.base.plus(line.at_ms), line.actor, line.text);
    }
    if lines.len() > limit {
        let _ = writeln!(out, "... and {} more lines", lines.len() - limit);
    }
    out
}

/// A mermaid sequence diagram of the story, generated from the recorded history.
pub fn sequence_diagram(outcome: &Outcome, lines: &[Line]) -> String {
    let mut out = String::from("sequenceDiagram\n");
    let workers = outcome.scenario.world.workers;
    let _ = writeln!(out, "  participant Q as Queue");
    for w in 0..workers {
        let w = WorkerId(w);
        let _ = writeln!(out, "  participant {w} as Worker {w}");
        if w.0 == 0 {
            let _ = writeln!(out, "  participant R as Redis");
        }
    }
    let _ = writeln!(out, "  participant D as Database");
    let _ = writeln!(out, "  participant G as Gateway");
    for line in lines {
        for d in &line.diagram {
            let _ = writeln!(out, "  {d}");
        }
    }
    out
}
