//! Chains of the token counter's invariants: a later lease writing with a token no larger
//! than an earlier lease's (the counter went back, or a token was used again), and a stall
//! in which every attempt is turned away or refused.

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
            EventKind::RedisRestarted { .. } | EventKind::CounterSeeded { .. } => found.push(at),
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
    let summary = match (restarts.is_empty(), reused) {
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
/// (a key that never goes), or a batch given up.
///
/// How it is found: the last fence violation, the write that stored the higher fence and
/// the restarts before the low token's issue; else the last refusal of the lease and the
/// grant of the value the key still held; else no chain.
pub fn progress_chain(facts: &Facts<'_>, _breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let violation = cx
        .events
        .iter()
        .rposition(|event| matches!(&event.kind, EventKind::Step { step: Step::FenceViolation { .. }, .. }));
    if let Some(at) = violation {
        return turned_away(&cx, at);
    }
    let refused = cx.events.iter().rposition(|event| matches!(&event.kind, EventKind::LeaseRefused { .. }));
    if let Some(at) = refused {
        return refused_lease(&cx, at);
    }
    Chain::none("no attempt was turned away by a fence and none was refused the lease".to_owned())
}

fn turned_away(cx: &Cx<'_>, at: usize) -> Chain {
    let EventKind::Step { worker, step: Step::FenceViolation { violation } } = &cx.events[at].kind else {
        unreachable!("found as a violation")
    };
    let setter = cx.events[..at].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund, rows: 1.., token: Some(t), .. } if *refund == violation.refund && *t > violation.token)
    });
    let issue = issue_of(cx, violation.token, *worker, at);
    let restarts = restarts_between(cx, setter.unwrap_or(0), issue.unwrap_or(at));
    let mut steps: Vec<ChainStep> =
        [setter, issue, Some(at)].into_iter().flatten().map(|at| cx.step(at)).collect();
    steps.extend(restarts.iter().map(|&at| cx.step(at)));
    let why = match restarts.is_empty() {
        false => "Redis restarted and the counter went back below the stored fence",
        true => "the token is below the fence already stored on the row",
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
