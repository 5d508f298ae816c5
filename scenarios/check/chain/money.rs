//! Chains of the money's invariants: a refund paid twice, a ledger that disagrees with the
//! rows, a row left unsent behind an acked job.

use super::rows::own_claim;
use super::stale::stale;
use super::{breaking_event, Chain, ChainStep, Cx};
use crate::check::facts::{Breach, Facts};
use fencesim_model::{RefundId, RefundState, Step, WorkerId};
use fencesim_sim::{CallOutcome, EventKind, FaultKind, GatewayMode};

fn paid(kind: &EventKind, refund: RefundId) -> bool {
    matches!(kind, EventKind::RefundCalled { refund: r, outcome: CallOutcome::Created, .. } if *r == refund)
}

/// The calls for `refund` that timed out before `index`, each with the fault that held it.
fn timeouts(cx: &Cx<'_>, refund: RefundId, index: usize) -> Vec<usize> {
    let mut found = Vec::new();
    for (at, event) in cx.events[..index].iter().enumerate() {
        let EventKind::RefundTimedOut { worker, refund: r, .. } = &event.kind else { continue };
        if *r != refund {
            continue;
        }
        let fault = cx.events[..at].iter().rposition(|event| {
            matches!(&event.kind, EventKind::FaultFired { fault: FaultKind::GatewayTimeout { worker: w, .. } | FaultKind::LostResponse { worker: w }, .. } if w == worker)
        });
        found.extend(fault);
        found.push(at);
    }
    found
}

/// `worker`'s failed calls for `refund` between `from` and `to`: it sent the call again.
fn retries(cx: &Cx<'_>, worker: WorkerId, refund: RefundId, (from, to): (usize, usize)) -> Vec<usize> {
    (from..to)
        .filter(|&at| matches!(&cx.events[at].kind, EventKind::Step { worker: w, step: Step::GatewayFailed { refund: r, .. } } if *w == worker && *r == refund))
        .collect()
}

/// `worker`'s last write on `refund` before `index`, accepted or not: what it went on from.
fn last_write(cx: &Cx<'_>, refund: RefundId, worker: WorkerId, index: usize) -> Option<usize> {
    cx.events[..index].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund: r, worker: w, .. } if *r == refund && *w == worker)
    })
}

/// The lookup of `refund` by `worker` between `from` and `to` that said no though the
/// ledger had the refund, and the fault that froze the copy it read, if one did.
fn lying_lookup(cx: &Cx<'_>, worker: WorkerId, refund: RefundId, (from, to): (usize, usize)) -> Vec<usize> {
    let Some(lie) = (from..to).rev().find(|&at| matches!(&cx.events[at].kind, EventKind::LookupBehind { worker: w, refund: r, .. } if *w == worker && *r == refund)) else {
        return Vec::new();
    };
    let frozen = cx.events[..lie].iter().rposition(|event| {
        matches!(&event.kind, EventKind::FaultFired { fault: FaultKind::LookupLag { for_ms }, .. } if event.at_ms + for_ms > cx.events[lie].at_ms)
    });
    frozen.into_iter().chain([lie]).collect()
}

fn gateway_clause(facts: &Facts<'_>) -> &'static str {
    match facts.world.gateway_mode {
        GatewayMode::NonIdempotent => {
            "; the gateway is not idempotent, so nothing turned the second call away: the one write no fence can see"
        }
        GatewayMode::Idempotent => "; the gateway took it as a new refund: its idempotency key was another",
    }
}

/// no-double-refund's chain: the first payment, the second, and why the second payer went
/// ahead: its lease had ended (a stale chain), an earlier call timed out or lost its
/// answer and was sent again, or its lookup, answered from a copy that lagged the ledger,
/// said there was no refund (named first, with the fault that froze the copy, if any).
///
/// How it is found: the second payment names its payer and epoch; the ledger gives the
/// stale chain, the history the first payment, the timeouts and failed tries of that
/// refund, and the payer's lookups of it between the two payments that lied.
pub fn double_refund_chain(facts: &Facts<'_>, breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let index = match breaking_event(breach) {
        Ok(index) => index,
        Err(none) => return none,
    };
    let EventKind::RefundCalled { worker, epoch, refund, .. } = &cx.events[index].kind else {
        return Chain::none("the breach is not a payment".to_owned());
    };
    let Some(first) = cx.events[..index].iter().rposition(|event| paid(&event.kind, *refund)) else {
        return Chain::none(format!("{refund} was paid once before this, by no call in the history"));
    };
    let mut steps: Vec<ChainStep> = vec![cx.step(first), cx.step(index)];
    steps.extend(own_claim(&cx, *refund, *worker, index).map(|at| cx.step(at)));
    steps.extend(last_write(&cx, *refund, *worker, index).map(|at| cx.step(at)));
    let late = timeouts(&cx, *refund, index);
    let tries = retries(&cx, *worker, *refund, (first, index));
    steps.extend(late.iter().chain(&tries).map(|&at| cx.step(at)));
    let lied = lying_lookup(&cx, *worker, *refund, (first, index));
    steps.extend(lied.iter().map(|&at| cx.step(at)));
    let told_lie = lied.last().map_or(String::new(), |&at| format!("{}; ", cx.step(at).text));
    let act = cx.step(index).text;
    let EventKind::RefundCalled { worker: first_worker, epoch: first_epoch, .. } = &cx.events[first].kind
    else {
        unreachable!("found as a payment")
    };
    let second = epoch.and_then(|number| stale(&cx, *worker, number, index));
    let second_is_stale = second.is_some();
    let first_stale = || first_epoch.and_then(|number| stale(&cx, *first_worker, number, first));
    let stale = second.or_else(first_stale);
    // the stale call was the first one: it is told at its own time, and the second at its own
    let act = match stale.is_some() && !second_is_stale {
        true => format!("{}; then at {} {act}", cx.step(first).text, cx.at(index)),
        false => act,
    };
    if stale.is_none()
        && late.is_empty()
        && tries.is_empty()
        && facts.world.gateway_mode == GatewayMode::Idempotent
    {
        let summary = format!(
            "{told_lie}an idempotent gateway moved money twice for {refund}: the two calls carried different idempotency keys; {act}"
        );
        return Chain::of(summary, steps);
    }
    let summary = match (stale, late.is_empty(), tries.is_empty()) {
        (Some(stale), _, _) => {
            steps.extend(stale.steps);
            format!("{told_lie}{}{act}{}", stale.summary, gateway_clause(facts))
        }
        (None, false, _) => format!(
            "{told_lie}a call for {refund} timed out or lost its answer and was still on its way; {act}, at {}{}",
            cx.at(index),
            gateway_clause(facts)
        ),
        (None, true, false) => {
            format!(
                "{told_lie}{worker}'s call for {refund} failed and it sent it again; {act}{}",
                gateway_clause(facts)
            )
        }
        (None, true, true) if !lied.is_empty() => {
            format!("{told_lie}so {worker} paid {refund} again; {act}{}", gateway_clause(facts))
        }
        (None, true, true) => {
            return Chain::none(format!(
                "{worker}'s lease was live at {}, and no call for {refund} timed out or failed before it",
                cx.at(index)
            ))
        }
    };
    Chain::of(summary, steps)
}

/// ledger-matches-rows' chain, at rest: the row whose ledger entries are not one, and the
/// events that made it so (a second payment's chain; a confirm with no payment).
///
/// How it is found: the first sent row with other than one ledger entry; its second
/// payment's chain, or its confirm after a call that moved nothing.
pub fn ledger_chain(facts: &Facts<'_>, _breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let record = facts.record;
    let entries = |id: RefundId| record.ledger.iter().filter(|entry| entry.refund == id).count();
    let sent = record.final_rows.iter().filter(|row| row.state == RefundState::Sent);
    let Some(row) = sent.clone().find(|row| entries(row.id) != 1) else {
        return Chain::none(
            "every sent row has one ledger entry; the sums differ by refunds of rows not sent".to_owned(),
        );
    };
    let payments: Vec<usize> = (0..cx.events.len()).filter(|&at| paid(&cx.events[at].kind, row.id)).collect();
    if let Some(&second) = payments.get(1) {
        let event = Some(second);
        return double_refund_chain(
            facts,
            &Breach { at_ms: cx.events[second].at_ms, event, detail: String::new() },
        );
    }
    let confirm = cx.events.iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund, write: fencesim_model::WriteKind::Confirm, rows: 1.., .. } if *refund == row.id)
    });
    let Some(confirm) = confirm else { return Chain::none(format!("{} was never confirmed", row.id)) };
    let refused = cx.events[..confirm].iter().rposition(
        |event| matches!(&event.kind, EventKind::GatewayRefused { refund, .. } if *refund == row.id),
    );
    let mut steps = vec![cx.step(confirm)];
    steps.extend(refused.map(|at| cx.step(at)));
    let summary = format!("{} is sent, but no money moved for it: {}", row.id, cx.step(confirm).text);
    Chain::of(summary, steps)
}

/// rows-settled's chain, at rest: the ack of the job whose rows are left, before its batch
/// was done, and what stopped the worker.
///
/// How it is found: the first row left unsent; the last accepted ack of its merchant's
/// job, the acker's delivery, and the fault on the acker between the two and the end.
pub fn settled_chain(facts: &Facts<'_>, _breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let record = facts.record;
    let Some(row) = record.final_rows.iter().find(|row| row.state != RefundState::Sent) else {
        return Chain::none("every row is sent".to_owned());
    };
    let jobs: Vec<_> =
        facts.world.all_jobs().filter(|job| job.merchant == row.merchant).map(|job| job.id).collect();
    let ack = cx.events.iter().rposition(
        |event| matches!(&event.kind, EventKind::JobAcked { job, accepted: true, .. } if jobs.contains(job)),
    );
    let Some(ack) = ack else { return Chain::none(format!("no job of {} was acked", row.merchant)) };
    let EventKind::JobAcked { worker, job, .. } = &cx.events[ack].kind else { unreachable!("found above") };
    let delivered = cx.events[..ack].iter().rposition(|event| {
        matches!(&event.kind, EventKind::JobDelivered { job: j, worker: w, .. } if j == job && w == worker)
    });
    let from = delivered.unwrap_or(ack);
    let fault = (from..cx.events.len()).find(|&at| matches!(&cx.events[at].kind, EventKind::FaultFired { fault, .. } if fault.worker() == Some(*worker)));
    let steps: Vec<ChainStep> =
        [delivered, Some(ack), fault].into_iter().flatten().map(|at| cx.step(at)).collect();
    let completed = cx.events[from..ack].iter().any(|event| {
        matches!(&event.kind, EventKind::Step { worker: w, step: Step::BatchCompleted { .. } } if w == worker)
    });
    let before = if completed { "after its batch" } else { "before its batch was done" };
    let summary = format!(
        "{worker} acked {job} at {}, {before}; {} is still {} at the end, and no job of {} is open",
        cx.at(ack),
        row.id,
        row.state,
        row.merchant
    );
    Chain::of(summary, steps)
}
