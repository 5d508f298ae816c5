//! A stale holder's chain: the lease it was granted, the fault that held it up (or cut
//! the lease short), the moment Redis ended the lease, and the successor Redis granted it
//! to, all before the holder acted. Found from the epoch ledger, never from a worker's
//! belief: a holder whose lease was still live when it acted has no stale chain.

use super::{ChainStep, Cx};
use crate::check::hops::held_span;
use fencesim_model::{group_thousands, WorkerId};
use fencesim_sim::{Epoch, EventKind, FaultKind};

/// What `stale` found: its steps, and a sentence up to the act.
pub(crate) struct Stale {
    pub steps: Vec<ChainStep>,
    pub summary: String,
}

/// The event where epoch `number` began.
pub(crate) fn grant_of(cx: &Cx<'_>, number: u32) -> Option<usize> {
    let epoch = cx.facts.record.epochs.get(number as usize - 1)?;
    let from = cx.events.partition_point(|event| event.at_ms < epoch.granted_at_ms);
    let found = cx.events[from..].iter().position(
        |event| matches!(&event.kind, EventKind::LeaseGranted { epoch: Some(n), .. } if *n == number),
    );
    found.map(|at| from + at)
}

/// The event at which Redis ended `epoch` (at its `expired_at_ms`), and how, in words.
fn ending(cx: &Cx<'_>, epoch: &Epoch, end_ms: u64) -> Option<(usize, String)> {
    let from = cx.events.partition_point(|event| event.at_ms < end_ms);
    let same = |value: &str| value == epoch.value;
    cx.events[from..].iter().take_while(|event| event.at_ms == end_ms).enumerate().find_map(
        |(offset, event)| {
            let how = match &event.kind {
                EventKind::LeaseExpired { value, .. } if same(value) => "expired".to_owned(),
                EventKind::RedisRestarted { .. } => "was lost when Redis restarted".to_owned(),
                EventKind::RedisFailedOver { .. } => {
                    "was lost when Redis failed over to a replica that did not have it".to_owned()
                }
                EventKind::LeaseDeleted { worker, holder: Some(value), .. } if same(value) => {
                    format!("was deleted by {worker}")
                }
                EventKind::LeaseReleased { worker, value, deleted: true, .. } if same(value) => {
                    format!("was released by {worker}, whose lock value is the same")
                }
                EventKind::LeaseSet { worker, key, .. } if *key == epoch.key => {
                    format!("was overwritten by {worker}")
                }
                _ => return None,
            };
            Some((from + offset, how))
        },
    )
}

/// How long a fault on `worker` held it (or its request) up: the span it covered.
fn stall_span(cx: &Cx<'_>, fired: usize, worker: WorkerId) -> Option<(u64, u64)> {
    let EventKind::FaultFired { fault, .. } = &cx.events[fired].kind else { return None };
    let at = cx.events[fired].at_ms;
    match *fault {
        FaultKind::Pause { worker: paused, duration_ms } if paused == worker => {
            let back = cx.events[fired..].iter().find_map(|event| match event.kind {
                EventKind::Resumed { worker: resumed } if resumed == worker => Some(event.at_ms),
                _ => None,
            });
            Some((at, back.unwrap_or(at + duration_ms)))
        }
        _ if fault.worker() == Some(worker) => held_span(cx.events, fired).map(|(from, to, _)| (from, to)),
        _ => None,
    }
}

/// The fault behind the lease's end: a stall of the holder that covers the moment, else a
/// fault on the lease at that moment (an early expiry, a clock jump, a restart), else the
/// holder's last stall before it acted. A fault that fired before the grant counts when
/// the stall it set up was still on after it (a delay armed for the holder's next request).
fn cause(cx: &Cx<'_>, worker: WorkerId, (grant, act): (usize, usize), end_ms: u64) -> Option<usize> {
    let granted_ms = cx.events[grant].at_ms;
    let fired = |index: &usize| matches!(cx.events[*index].kind, EventKind::FaultFired { .. });
    let relevant = |index: &usize| {
        *index > grant || stall_span(cx, *index, worker).is_some_and(|(_, to)| to > granted_ms)
    };
    let faults: Vec<usize> = (0..act).filter(fired).filter(relevant).collect();
    let covering = faults.iter().rev().find(|&&index| {
        stall_span(cx, index, worker).is_some_and(|(from, to)| from <= end_ms && end_ms <= to)
    });
    let on_lease = || {
        faults.iter().rev().find(|&&index| {
            let EventKind::FaultFired { fault, .. } = &cx.events[index].kind else { return false };
            fault.instance().is_some() && cx.events[index].at_ms == end_ms
        })
    };
    let last = || faults.iter().rev().find(|&&index| stall_span(cx, index, worker).is_some());
    covering.or_else(on_lease).or_else(last).copied()
}

/// The first epoch of the same key that another worker was granted at or after `end_ms`,
/// before the act at `act`.
fn successor<'a>(cx: &Cx<'a>, epoch: &Epoch, end_ms: u64, act: usize) -> Option<(&'a Epoch, usize)> {
    let later = cx.facts.record.epochs.iter().skip(epoch.number as usize);
    let candidates = later.take_while(|next| next.granted_at_ms <= cx.events[act].at_ms);
    let others = candidates
        .filter(|next| next.key == epoch.key && next.granted_at_ms >= end_ms && next.worker != epoch.worker);
    others.filter_map(|next| Some((next, grant_of(cx, next.number)?))).find(|(_, grant)| *grant < act)
}

/// Why the lease ended, in words, from how Redis ended it and the fault behind it.
fn why(cx: &Cx<'_>, worker: WorkerId, how: &str, fault: Option<usize>) -> String {
    let Some(index) = fault else {
        return match how {
            "expired" => format!("its TTL ran out while {worker} was still at work, with no fault on it"),
            _ => format!("it {how}"),
        };
    };
    let EventKind::FaultFired { fault, .. } = &cx.events[index].kind else { return format!("it {how}") };
    let at = cx.at(index);
    let by = match *fault {
        FaultKind::Pause { duration_ms, .. } => {
            format!("while {worker} was frozen (a pause of {} ms from {at})", group_thousands(duration_ms))
        }
        FaultKind::ExpireLease { .. } => format!("early: a fault made the key expire at {at}"),
        FaultKind::RedisClockJump { instance, by_ms } => {
            format!("when redis#{}'s clock jumped {} ms ahead at {at}", instance + 1, group_thousands(by_ms))
        }
        FaultKind::RedisRestart { instance, persistence } => {
            format!("in a restart of redis#{} at {at}, with {}", instance + 1, persistence.words())
        }
        _ => match held_span(cx.events, index) {
            Some((from, to, _)) => format!(
                "while a request of {worker}'s was held up by a fault ({} ms, {} to {})",
                group_thousands(to - from),
                cx.facts.at(from),
                cx.facts.at(to)
            ),
            None => format!("after a fault on {worker} at {at}"),
        },
    };
    format!("it {how} {by}")
}

/// What `worker` heard of its lease between its end and the act: its last renewal that
/// found the lease gone (and went on), and its last check that said it still held it.
fn unaware(cx: &Cx<'_>, worker: WorkerId, end: usize, act: usize) -> Vec<usize> {
    let last = |wanted: fn(&EventKind, WorkerId) -> bool| {
        (end..act).rev().find(|&i| wanted(&cx.events[i].kind, worker))
    };
    let renewal = last(
        |kind, worker| matches!(kind, EventKind::LeaseExtended { worker: w, extended: false, .. } if *w == worker),
    );
    let check = last(
        |kind, worker| matches!(kind, EventKind::Step { worker: w, step: fencesim_model::Step::LeaseChecked { held: true, .. } } if *w == worker),
    );
    renewal.into_iter().chain(check).collect()
}

/// The chain that makes `worker`, acting at event `act` under epoch `number`, a stale
/// holder: none when its lease was still live at the act.
pub(crate) fn stale(cx: &Cx<'_>, worker: WorkerId, number: u32, act: usize) -> Option<Stale> {
    let epoch = cx.facts.record.epochs.get(number as usize - 1)?;
    let act_ms = cx.events[act].at_ms;
    let end_ms = epoch.expired_at_ms.filter(|end| *end <= act_ms)?;
    let grant = grant_of(cx, number)?;
    let mut steps = vec![cx.step(grant)];
    let (end, how) = ending(cx, epoch, end_ms).unwrap_or((act, "ended".to_owned()));
    let fault = cause(cx, worker, (grant, act), end_ms);
    steps.extend(fault.map(|index| cx.step(index)));
    if end != act {
        steps.push(cx.step(end));
    }
    steps.extend(unaware(cx, worker, end, act).into_iter().map(|index| cx.step(index)));
    let mut summary = format!(
        "{worker}'s lease (epoch {number}) ended at {}: {}",
        cx.facts.at(end_ms),
        why(cx, worker, &how, fault)
    );
    if let Some((next, grant)) = successor(cx, epoch, end_ms, act) {
        steps.push(cx.step(grant));
        summary.push_str(&format!(
            "; {} was granted the lease (epoch {}) at {}",
            next.worker,
            next.number,
            cx.facts.at(next.granted_at_ms)
        ));
    }
    summary.push_str(&format!("; {worker} was not told, and at {} ", cx.at(act)));
    Some(Stale { steps, summary })
}
