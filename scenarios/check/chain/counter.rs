//! Chains of the token counter's invariants: a later lease writing with a token no larger
//! than an earlier lease's (the counter went back, or a token was used again), and a stall
//! in which every attempt is turned away or refused.

use super::words::against_the_rule;
use super::{breaking_event, Chain, ChainStep, Cx};
use crate::check::facts::{Breach, Facts};
use fencesim_model::{Step, Token, WorkerId};
use fencesim_sim::EventKind;

/// The last issue of `token` to `worker` before `index`, or to anyone.
fn issue_of(cx: &Cx<'_>, token: Token, worker: WorkerId, index: usize) -> Option<usize> {
    let issued = |mine: bool| {
        cx.events[..index].iter().rposition(|event| {
            matches!(&event.kind, EventKind::TokenIssued { token: t, worker: w, .. } if *t == token && (!mine || *w == worker))
        })
    };
    issued(true).or_else(|| issued(false))
}

/// The restarts (and the faults that fired them) between two events: what can send a
/// counter back.
fn restarts_between(cx: &Cx<'_>, from: usize, to: usize) -> Vec<usize> {
    let mut found = Vec::new();
    for at in from..to {
        match &cx.events[at].kind {
            EventKind::RedisRestarted { .. }
            | EventKind::CounterSeeded { .. }
            | EventKind::RedisFailedOver { .. } => found.push(at),
            EventKind::FaultFired { fault, .. }
                if fault.instance().is_some() && fault.merchant().is_none() =>
            {
                found.push(at)
            }
            _ => {}
        }
    }
    found
}

/// The first accepted write of an earlier epoch with a token at least `token`.
fn earlier_write(cx: &Cx<'_>, token: Token, epoch: u32, index: usize) -> Option<usize> {
    cx.events[..index].iter().position(|event| {
        matches!(&event.kind, EventKind::Write { token: Some(t), epoch: Some(e), rows: 1.., .. } if *t >= token && *e < epoch)
    })
}

/// token-order's chain (and monotonic-fences' when a token was issued lower): the earlier
/// lease's write with the larger token, what sent the counter back between, the issue of
/// the smaller token, and its write.
///
/// How it is found: the write (or the issue) that broke it names the token; the history
/// gives the earlier write with a token at least as large, that token's issue, and the
/// restarts in between. A token issued to no one in this lease was used again.
pub fn token_chain(facts: &Facts<'_>, breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let index = match breaking_event(breach) {
        Ok(index) => index,
        Err(none) => return none,
    };
    let (worker, token, epoch) = match &cx.events[index].kind {
        EventKind::Write { worker, token: Some(token), epoch: Some(epoch), .. } => {
            (*worker, *token, Some(*epoch))
        }
        EventKind::TokenIssued { worker, token, .. } => (*worker, *token, None),
        _ => return Chain::none("the breach is neither a write with a token nor a token's issue".to_owned()),
    };
    let earlier = epoch.and_then(|epoch| earlier_write(&cx, token, epoch, index));
    let issue = issue_of(&cx, token, worker, index);
    let mut steps: Vec<ChainStep> =
        [earlier, issue, Some(index)].into_iter().flatten().map(|at| cx.step(at)).collect();
    let from = earlier.unwrap_or(0).min(issue.unwrap_or(index));
    let restarts = restarts_between(&cx, from, issue.unwrap_or(index));
    steps.extend(restarts.iter().map(|&at| cx.step(at)));
    let reused = issue.is_some_and(|at| {
        let issued_before_grant =
            epoch.and_then(|number| cx.facts.record.epochs.get(number as usize - 1)).map(|e| e.granted_at_ms);
        issued_before_grant.is_some_and(|granted| cx.events[at].at_ms < granted)
    });
    let failover = restarts.iter().any(|&at| matches!(cx.events[at].kind, EventKind::RedisFailedOver { .. }));
    let summary = match (restarts.is_empty(), reused) {
        (false, _) if failover => format!(
            "Redis failed over to a replica that had not received the counter's last increments, and the counter went back; token {token}, issued to {worker} after, is no larger than one an earlier lease wrote with: {}",
            cx.step(index).text
        ),
        (false, _) => format!(
            "Redis restarted and the counter went back; token {token}, issued to {worker} after, is no larger than one an earlier lease wrote with: {}",
            cx.step(index).text
        ),
        (true, true) => format!(
            "{worker} wrote under a new lease with token {token}, issued before that lease began: a token used again; {}",
            cx.step(index).text
        ),
        (true, false) => format!("token {token} is no larger than an earlier lease's: {}", cx.step(index).text),
    };
    Chain::of(summary, steps)
}

/// progress's chain, once healed: why the job could not finish. Every attempt turned away
/// by a fence above the token (a counter sent back), or every attempt refused the lease
/// (a key that never goes), or every batch given up.
///
/// How it is found: the last fence violation, the write it was, the write that stored the
/// row's fence and the restarts before the token's issue; else the last refusal of the
/// lease and the grant of the value the key still held; else the last batch given up and
/// the lease it had lost; else no chain.
pub fn progress_chain(facts: &Facts<'_>, _breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let violation = cx
        .events
        .iter()
        .rposition(|event| matches!(&event.kind, EventKind::Step { step: Step::FenceViolation { .. }, .. }));
    if let Some(at) = violation {
        return turned_away(&cx, at);
    }
    let last = cx.events.iter().rposition(|event| {
        matches!(
            &event.kind,
            EventKind::LeaseRefused { .. } | EventKind::Step { step: Step::BatchAbandoned { .. }, .. }
        )
    });
    match last.map(|at| (at, &cx.events[at].kind)) {
        Some((at, EventKind::LeaseRefused { .. })) => refused_lease(&cx, at),
        Some((at, _)) => given_up(&cx, at),
        None => {
            Chain::none("no attempt was turned away by a fence, refused the lease or given up".to_owned())
        }
    }
}

fn turned_away(cx: &Cx<'_>, at: usize) -> Chain {
    let EventKind::Step { worker, step: Step::FenceViolation { violation } } = &cx.events[at].kind else {
        unreachable!("found as a violation")
    };
    let refused = cx.events[..at].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund, worker: w, rows: 0, .. } if *refund == violation.refund && w == worker)
    });
    let setter = cx.events[..at].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund, rows: 1.., .. } if *refund == violation.refund)
    });
    let issue = issue_of(cx, violation.token, *worker, at);
    let restarts = restarts_between(cx, setter.unwrap_or(0), issue.unwrap_or(at));
    let mut steps: Vec<ChainStep> =
        [setter, issue, refused, Some(at)].into_iter().flatten().map(|at| cx.step(at)).collect();
    steps.extend(restarts.iter().map(|&at| cx.step(at)));
    let why = match (refused.is_some_and(|write| against_the_rule(cx, write)), restarts.is_empty()) {
        (true, _) => "the store turned away a write that the protocol's rule accepts",
        (false, false) => "Redis restarted and the counter went back below the stored fence",
        (false, true) => "the token is not above the fence already stored on the row",
    };
    let summary = format!(
        "{why}; every attempt is turned away, last at {} when {worker}'s {} of {} with token {} updated 0 rows",
        cx.at(at),
        violation.write,
        violation.refund,
        violation.token
    );
    Chain::of(summary, steps)
}

/// The last batch given up: the worker's lease, granted and ended before it.
fn given_up(cx: &Cx<'_>, at: usize) -> Chain {
    let EventKind::Step { worker, step: Step::BatchAbandoned { reason } } = &cx.events[at].kind else {
        unreachable!("found as an abandon")
    };
    let granted = cx.events[..at]
        .iter()
        .rposition(|event| matches!(&event.kind, EventKind::LeaseGranted { worker: w, .. } if w == worker));
    let Some(granted) = granted else {
        return Chain::none(format!("{worker} gave up ({reason}) holding no lease it was granted"));
    };
    let EventKind::LeaseGranted { key, value, .. } = &cx.events[granted].kind else {
        unreachable!("a grant")
    };
    let ended = (granted..at).find(|&i| match &cx.events[i].kind {
        EventKind::LeaseExpired { value: v, .. } => v == value,
        EventKind::LeaseRearmed { worker: w, key: k, .. } => w == worker && k == key,
        _ => false,
    });
    let steps = [Some(granted), ended, Some(at)].into_iter().flatten().map(|i| cx.step(i)).collect();
    let summary = format!(
        "every attempt gives up: last at {}, {worker} abandoned the batch ({reason}) after its lease of {key}, granted at {}, was gone",
        cx.at(at),
        cx.at(granted)
    );
    Chain::of(summary, steps)
}

fn refused_lease(cx: &Cx<'_>, at: usize) -> Chain {
    let EventKind::LeaseRefused { key, .. } = &cx.events[at].kind else { unreachable!("found as a refusal") };
    let granted = cx.events[..at].iter().rposition(|event| {
        matches!(&event.kind, EventKind::LeaseGranted { key: k, .. } | EventKind::LeaseSet { key: k, .. } if k == key)
    });
    let Some(granted) = granted else { return Chain::none(format!("no grant of {key} before its refusal")) };
    let holder = match &cx.events[granted].kind {
        EventKind::LeaseGranted { worker, .. } | EventKind::LeaseSet { worker, .. } => *worker,
        _ => unreachable!("found as a grant"),
    };
    let faults = (granted..at).filter(|&i| {
        matches!(&cx.events[i].kind, EventKind::FaultFired { fault, .. } if fault.worker() == Some(holder))
    });
    let kept_alive = (granted..at).rev().find(|&i| match &cx.events[i].kind {
        EventKind::LeaseRearmed { worker, key: k, .. } | EventKind::LeaseExtended { worker, key: k, .. } => {
            *worker == holder && k == key
        }
        _ => false,
    });
    let mut steps: Vec<ChainStep> = faults.chain(kept_alive).map(|i| cx.step(i)).collect();
    steps.push(cx.step(granted));
    steps.push(cx.step(at));
    let summary = format!(
        "{key} was granted to {holder} at {} and never freed: every later attempt is refused, last at {}",
        cx.at(granted),
        cx.at(at)
    );
    Chain::of(summary, steps)
}
