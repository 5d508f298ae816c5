//! Chains of the rows' invariants and of the lease's: a write (or a lease command) by a
//! holder whose lease had ended, or a write the store accepted against the rule.

use super::stale::{grant_of, stale};
use super::words::against_the_rule;
use super::{breaking_event, Chain, ChainStep, Cx};
use crate::check::facts::{Breach, Facts};
use fencesim_model::{RefundId, Step, WorkerId};
use fencesim_sim::{Epoch, EventKind};

/// A worker that went on as a lease's holder at `index` without a majority's grant: the
/// requests of its acquisition that Redis refused, then the step it went on with.
fn ungranted(cx: &Cx<'_>, index: usize, worker: WorkerId) -> Chain {
    let asked = cx.events[..index].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Step { worker: w, step: Step::JobReceived { .. } } if *w == worker)
    });
    let refused = (asked.map_or(0, |at| at + 1)..index).filter(
        |&at| matches!(&cx.events[at].kind, EventKind::RedisRefused { worker: w, .. } if *w == worker),
    );
    let mut steps: Vec<ChainStep> = refused.map(|at| cx.step(at)).collect();
    let summary = format!(
        "{worker} went on as the lease's holder at {} although Redis had not granted it a majority ({} of its requests refused)",
        cx.at(index),
        steps.len()
    );
    steps.push(cx.step(index));
    Chain::of(summary, steps)
}

/// The last accepted write on `refund` before `index` by anyone other than `worker`.
fn other_write(cx: &Cx<'_>, refund: RefundId, worker: WorkerId, index: usize) -> Option<usize> {
    cx.events[..index].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund: r, worker: w, rows: 1.., .. } if *r == refund && *w != worker)
    })
}

/// The last accepted claim of `refund` by `worker` before `index`.
pub(crate) fn own_claim(cx: &Cx<'_>, refund: RefundId, worker: WorkerId, index: usize) -> Option<usize> {
    cx.events[..index].iter().rposition(|event| {
        matches!(&event.kind, EventKind::Write { refund: r, worker: w, write: fencesim_model::WriteKind::Claim, rows: 1.., .. } if *r == refund && *w == worker)
    })
}

/// A write's chain: the stale holder's, or the store's acceptance against the rule, with
/// the other lease's last write on the row and the writer's own claim.
///
/// How it is found: the write that broke the invariant names its writer and epoch; the
/// epoch ledger says whether that lease had ended before the write (a stale chain), and the
/// rows before it say whether the store followed the rule. Neither: no chain.
pub fn row_chain(facts: &Facts<'_>, breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let index = match breaking_event(breach) {
        Ok(index) => index,
        Err(none) => return none,
    };
    let EventKind::Write { worker, epoch, refund, .. } = &cx.events[index].kind else {
        return super::counter::token_chain(facts, breach);
    };
    let mut steps: Vec<ChainStep> =
        [other_write(&cx, *refund, *worker, index), own_claim(&cx, *refund, *worker, index)]
            .into_iter()
            .flatten()
            .map(|at| cx.step(at))
            .collect();
    steps.push(cx.step(index));
    let other = other_write(&cx, *refund, *worker, index);
    let stale_other = || {
        let EventKind::Write { worker, epoch: Some(number), .. } = &cx.events[other?].kind else {
            return None;
        };
        stale(&cx, *worker, *number, other?)
    };
    let own = epoch.and_then(|number| stale(&cx, *worker, number, index));
    let stale_is_other = own.is_none();
    let stale = own.or_else(stale_other);
    let broken = against_the_rule(&cx, index);
    let act = cx.step(index).text;
    let summary = match (&stale, broken) {
        // the stale act was the other lease's write: it is told at its own time, and the
        // write that broke the invariant at its own
        (Some(stale), _) if stale_is_other => {
            let other = other.expect("a stale other write was found");
            format!("{}{}; then at {} {act}", stale.summary, cx.step(other).text, cx.at(index))
        }
        (Some(stale), _) => format!("{}{act}", stale.summary),
        (None, true) => format!(
            "the store accepted a write that the protocol's rule turns away, at {}: {act}",
            cx.at(index)
        ),
        (None, false) => {
            return Chain::none(format!(
                "{worker}'s lease was live when it wrote at {}, and the store followed the rule",
                cx.at(index)
            ))
        }
    };
    steps.extend(stale.into_iter().flat_map(|stale| stale.steps));
    Chain::of(summary, steps)
}

/// The epoch `worker` was last granted before event `index`, by the events' order: a grant
/// in the same millisecond as the act but after it (the next job's lease, taken at once)
/// is not the lease the act was sent under.
fn epoch_before(cx: &Cx<'_>, worker: WorkerId, index: usize) -> Option<u32> {
    let at = cx.events[index].at_ms;
    let mut epochs = cx.facts.record.epochs.iter().filter(|epoch| {
        epoch.worker == worker
            && epoch.granted_at_ms <= at
            && (epoch.granted_at_ms < at || grant_of(cx, epoch.number).is_some_and(|grant| grant < index))
    });
    epochs.next_back().map(|epoch| epoch.number)
}

/// lease-integrity's chain: the command that freed, kept alive or overwrote another's
/// lease, after the sender's own lease had ended (with its GET, when the release was split).
///
/// How it is found: the command names its sender; the sender's last epoch before it and the
/// ledger give the stale chain. A command sent while its sender's lease was live (a value
/// shared by two workers) has no stale chain, and the summary says so.
pub fn lease_chain(facts: &Facts<'_>, breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let index = match breaking_event(breach) {
        Ok(index) => index,
        Err(none) => return none,
    };
    let worker = match &cx.events[index].kind {
        EventKind::Step { worker, step: Step::LeaseAcquired { .. } } => {
            return ungranted(&cx, index, *worker)
        }
        EventKind::LeaseDeleted { worker, .. }
        | EventKind::LeaseReleased { worker, .. }
        | EventKind::LeaseRearmed { worker, .. }
        | EventKind::LeaseSet { worker, .. } => *worker,
        _ => return Chain::none("the breach is not a lease command".to_owned()),
    };
    if acquiring(&cx, index, worker) {
        if let Some(taken) = taken_from_holder(&cx, index, worker) {
            return taken;
        }
    }
    let act = cx.step(index);
    let mut steps = vec![act.clone()];
    let read = cx.events[..index]
        .iter()
        .rposition(|event| matches!(&event.kind, EventKind::LeaseRead { worker: w, .. } if *w == worker));
    let stale = epoch_before(&cx, worker, index).and_then(|number| stale(&cx, worker, number, index));
    let Some(stale) = stale else {
        if let Some(taken) = taken_from_holder(&cx, index, worker) {
            return taken;
        }
        return Chain::of(
            format!("{worker}'s lease had not ended when, at {}, {}", cx.at(index), act.text),
            steps,
        );
    };
    if let Some(read) = read.filter(|read| *read > stale.steps[0].event) {
        steps.push(cx.step(read));
    }
    // the lease the command removed or kept, if a later one than the first successor
    let removed = match &cx.events[index].kind {
        EventKind::LeaseDeleted { holder: Some(value), .. }
        | EventKind::LeaseRearmed { holder: Some(value), .. } => Some(value.as_str()),
        _ => None,
    };
    let epochs = &cx.facts.record.epochs;
    let owner = removed.and_then(|value| epochs.iter().rev().find(|epoch| epoch.value == value));
    steps.extend(
        owner.and_then(|epoch| grant_of(&cx, epoch.number)).filter(|at| *at < index).map(|at| cx.step(at)),
    );
    let held = owner.map_or(String::new(), |epoch| {
        format!(
            ", the lease of epoch {} that {} was granted at {}",
            epoch.number,
            epoch.worker,
            cx.facts.at(epoch.granted_at_ms)
        )
    });
    let summary = format!("{}{}{held}", stale.summary, act.text);
    steps.extend(stale.steps);
    Chain::of(summary, steps)
}

/// Whether the lease command at `index` was the worker's acquisition: its next step is the
/// lease acquired, or found busy. A worker whose earlier lease had ended and that took the
/// key from its live holder did not act on a stale lease: it took a live one.
fn acquiring(cx: &Cx<'_>, index: usize, worker: WorkerId) -> bool {
    let next = cx.events[index + 1..].iter().find_map(|event| match &event.kind {
        EventKind::Step { worker: w, step } if *w == worker => Some(step),
        _ => None,
    });
    matches!(next, Some(Step::LeaseAcquired { .. } | Step::LeaseBusy { .. }))
}

/// A SET without NX (an acquisition's, or by a worker that held no lease before) that took
/// the lease from the value whose epoch of the key was live then (another worker's, or the
/// same worker's before a crash). The chain is that epoch's grant, then the SET.
fn taken_from_holder(cx: &Cx<'_>, index: usize, worker: WorkerId) -> Option<Chain> {
    let EventKind::LeaseSet { key, value, .. } = &cx.events[index].kind else { return None };
    let at_ms = cx.events[index].at_ms;
    let live = |epoch: &&Epoch| {
        epoch.key == *key && epoch.value != *value && epoch.expired_at_ms.is_none_or(|end| end >= at_ms)
    };
    let (holder, began) = cx
        .facts
        .record
        .epochs
        .iter()
        .filter(live)
        .rev()
        .find_map(|epoch| beginning(cx, epoch).filter(|at| *at < index).map(|at| (epoch, at)))?;
    let how = match cx.events[began].kind {
        EventKind::LeaseSet { .. } => "taken",
        _ => "granted",
    };
    let act = cx.step(index);
    let who = match holder.worker == worker {
        true => format!("{worker}'s process before its restart"),
        false => holder.worker.to_string(),
    };
    let summary = format!(
        "{who} held {key} (epoch {}, {how} at {}) when {}: the acquisition took the lease from its holder",
        holder.number,
        cx.at(began),
        act.text
    );
    Some(Chain::of(summary, vec![cx.step(began), act]))
}

/// The event that began `epoch`: its grant, or the SET without NX that took the key.
fn beginning(cx: &Cx<'_>, epoch: &Epoch) -> Option<usize> {
    grant_of(cx, epoch.number).or_else(|| {
        let from = cx.events.partition_point(|event| event.at_ms < epoch.granted_at_ms);
        let set = |event: &fencesim_sim::Event| {
            matches!(&event.kind, EventKind::LeaseSet { value, .. } if *value == epoch.value)
        };
        let mut same_ms = cx.events[from..].iter().take_while(|event| event.at_ms == epoch.granted_at_ms);
        same_ms.position(set).map(|at| from + at)
    })
}

/// single-holder's chain (a diagnostic): the earlier believer's lease ended while it was
/// held up, and the newcomer was granted the lease.
///
/// How it is found: the newcomer's acquisition; the latest earlier epoch of the same key by
/// another worker, and its stale chain up to the acquisition.
pub fn single_holder_chain(facts: &Facts<'_>, breach: &Breach) -> Chain {
    let cx = Cx::new(facts);
    let index = match breaking_event(breach) {
        Ok(index) => index,
        Err(none) => return none,
    };
    let EventKind::Step { worker, step: Step::LeaseAcquired { .. } } = &cx.events[index].kind else {
        return Chain::none("the breach is not an acquisition".to_owned());
    };
    let Some(mine) = epoch_before(&cx, *worker, index) else {
        return Chain::none(format!("{worker} was granted no epoch"));
    };
    let epochs = &cx.facts.record.epochs;
    let key = &epochs[mine as usize - 1].key;
    let earlier =
        epochs[..mine as usize - 1].iter().rev().find(|epoch| epoch.key == *key && epoch.worker != *worker);
    let stale = earlier.and_then(|epoch| stale(&cx, epoch.worker, epoch.number, index));
    match stale {
        Some(stale) => {
            let mut steps = stale.steps;
            steps.extend(grant_of(&cx, mine).map(|at| cx.step(at)));
            steps.push(cx.step(index));
            Chain::of(format!("{}{worker} also believes it holds the lease", stale.summary), steps)
        }
        None => Chain::none(format!("no earlier lease of {key} had ended before {worker}'s")),
    }
}
