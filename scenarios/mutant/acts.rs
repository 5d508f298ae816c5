//! Where a planted bug acted in a run: the events at which the buggy code did what the
//! correct code would not (a write the rule turns away that the store accepted, a DEL of
//! another's lease, a token used again, an ack before the batch was done). A catch counts
//! only when the breach's chain passes through one of them: with a gateway that pays every
//! call, the correct code already fails some worlds, and a bug that only shifts the timing
//! would otherwise look caught there.

use super::Mutant;
use crate::check::chain::{against_the_rule, Cx};
use crate::check::Facts;
use fencesim_model::{Step, Token, WriteKind};
use fencesim_sim::{CallOutcome, EventKind};

/// The events of `facts`' history at which `mutant` acted.
pub fn acts(mutant: Mutant, facts: &Facts<'_>) -> Vec<usize> {
    let cx = Cx::new(facts);
    let all = 0..cx.events.len();
    let kept: Vec<usize> = match mutant {
        Mutant::ClaimFenceAtMost
        | Mutant::ConfirmFenceAtLeast
        | Mutant::ConfirmWithoutFence
        | Mutant::ClaimAcceptsSent
        | Mutant::FenceComparedAsText => all.filter(|&at| against_the_rule(&cx, at)).collect(),
        Mutant::ClaimRowCountIgnored => all.filter(|&at| paid_after_refusal(&cx, at)).collect(),
        Mutant::TokenPerJob | Mutant::TokenPerWorker | Mutant::TokenWrapsAt32Bits => {
            all.filter(|&at| token_not_issued(&cx, at)).collect()
        }
        Mutant::ReleaseWithDel | Mutant::ReleaseByGetThenDel | Mutant::OutageReleaseByDel => {
            all.filter(|&at| deleted_another(&cx, at)).collect()
        }
        // a shared value also fools its holder's own check: the key still reads "its" value
        Mutant::SharedLockValue => {
            all.filter(|&at| freed_or_kept_another(&cx, at) || told_held_after_end(&cx, at)).collect()
        }
        Mutant::ExtendRecreates => {
            all.filter(|&at| matches!(cx.events[at].kind, EventKind::LeaseSet { .. })).collect()
        }
        Mutant::ExtendTtlAsSeconds => all
            .filter(|&at| matches!(cx.events[at].kind, EventKind::LeaseExtended { extended: true, .. }))
            .collect(),
        Mutant::RenewalIgnoresResult => all
            .filter(|&at| matches!(cx.events[at].kind, EventKind::LeaseExtended { extended: false, .. }))
            .collect(),
        Mutant::NoReseedAfterRestart => all.filter(|&at| unseeded_restart(&cx, at)).collect(),
        Mutant::KeyPerAttempt | Mutant::RetryMintsNewKey => all.filter(|&at| paid_anew(&cx, at)).collect(),
        Mutant::AckOnReceive => all.filter(|&at| acked_early(&cx, at)).collect(),
        Mutant::AcquireSetnxThenPexpire | Mutant::SubsecondTtlTruncated => all
            .filter(|&at| {
                matches!(
                    cx.events[at].kind,
                    EventKind::LeaseGranted { ttl_ms: 0, .. } | EventKind::LeaseRearmed { ttl_ms: 0, .. }
                )
            })
            .collect(),
        Mutant::ExpiryJudgedOnClientClock => all.filter(|&at| told_held_after_end(&cx, at)).collect(),
        Mutant::TimeoutTakenAsFailure => all.filter(|&at| failed_after_timeout(&cx, at)).collect(),
        Mutant::FailureTakenAsRefunded => all.filter(|&at| confirmed_unpaid(&cx, at)).collect(),
        Mutant::PostingWithoutFence => all.filter(|&at| posted_under_newer_fence(&cx, at)).collect(),
        Mutant::WaitAnswerIgnored => unreplicated_writes(&cx),
        Mutant::LookupMissMintsNewKey => all.filter(|&at| paid_again_after_a_miss(&cx, at)).collect(),
        Mutant::KeyPerStartGeneration
        | Mutant::ConflictMintsNewKey
        | Mutant::RefusalMintsNewKey
        | Mutant::RestartRecoveryMintsNewKey => all.filter(|&at| paid_anew(&cx, at)).collect(),
        Mutant::UnknownOutcomeAcked => all.filter(|&at| acked_early(&cx, at)).collect(),
        Mutant::RefusedInstanceCounted => all.filter(|&at| refusal_counted(&cx, at)).collect(),
        Mutant::LookupMissSkipsLedgerCheck => all.filter(|&at| posted_again(&cx, at)).collect(),
    };
    kept
}

/// The issues of tokens taken for a batch although the `WAIT` after them failed or timed
/// out, and the writes made with them: the replica may never have had such a token, and a
/// failover can issue it again. One pass: each worker's last token, and whether the wait
/// after it answered short.
fn unreplicated_writes(cx: &Cx<'_>) -> Vec<usize> {
    let mut last: std::collections::BTreeMap<fencesim_model::WorkerId, (usize, Token, Option<bool>)> =
        std::collections::BTreeMap::new();
    let mut acts = Vec::new();
    for (at, event) in cx.events.iter().enumerate() {
        match &event.kind {
            EventKind::TokenIssued { worker, token, .. } => {
                last.insert(*worker, (at, *token, None));
            }
            EventKind::ReplicaWaited { worker, acked, .. } => {
                if let Some((_, _, short @ None)) = last.get_mut(worker) {
                    *short = Some(!acked);
                }
            }
            EventKind::RedisRefused { worker, .. } => {
                if let Some((_, _, short @ None)) = last.get_mut(worker) {
                    *short = Some(true);
                }
            }
            EventKind::Step { worker, step: Step::TokenTaken { token } }
            | EventKind::Write { worker, token: Some(token), .. } => {
                if let Some(&(issued, t, Some(true))) = last.get(worker) {
                    if t == *token {
                        acts.extend([issued, at]);
                    }
                }
            }
            _ => {}
        }
    }
    acts.sort_unstable();
    acts.dedup();
    acts
}

/// A payment by a worker whose last write on the row was a claim the fence turned away.
fn paid_after_refusal(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::RefundCalled { worker, refund, .. } = &cx.events[at].kind else { return false };
    let last = cx.events[..at].iter().rev().find_map(|event| match &event.kind {
        EventKind::Write { worker: w, refund: r, write, token, rows, .. } if w == worker && r == refund => {
            Some((*write, token.is_some(), *rows))
        }
        _ => None,
    });
    last == Some((WriteKind::Claim, true, 0))
}

/// A write whose token is not the one issued to its writer since its lease began.
fn token_not_issued(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::Write { worker, epoch: Some(number), token: Some(token), .. } = &cx.events[at].kind else {
        return false;
    };
    let Some(epoch) = cx.facts.record.epochs.get(*number as usize - 1) else { return false };
    let issued =
        cx.events[..at].iter().rev().take_while(|event| event.at_ms >= epoch.granted_at_ms).find_map(
            |event| match &event.kind {
                EventKind::TokenIssued { worker: w, token, .. } if w == worker => Some(*token),
                _ => None,
            },
        );
    issued != Some(*token)
}

/// A plain DEL that removed another worker's lease.
fn deleted_another(cx: &Cx<'_>, at: usize) -> bool {
    matches!(&cx.events[at].kind, EventKind::LeaseDeleted { worker, holder: Some(value), .. } if !value.starts_with(&worker.to_string()))
}

/// The live epoch of `key` at event `at`: the latest granted before it that had not ended.
fn live_holder(cx: &Cx<'_>, key: &str, at: usize) -> Option<fencesim_model::WorkerId> {
    let now = cx.events[at].at_ms;
    let epochs = cx.facts.record.epochs.iter().filter(|epoch| epoch.key == key && epoch.granted_at_ms <= now);
    let mut live = epochs.filter(|epoch| epoch.expired_at_ms.is_none_or(|end| end > now));
    live.next_back().map(|epoch| epoch.worker)
}

/// A release or renewal that freed or kept alive a lease Redis had granted another worker.
fn freed_or_kept_another(cx: &Cx<'_>, at: usize) -> bool {
    let (worker, key) = match &cx.events[at].kind {
        EventKind::LeaseReleased { worker, key, deleted: true, .. }
        | EventKind::LeaseExtended { worker, key, extended: true, .. } => (worker, key),
        _ => return false,
    };
    live_holder(cx, key, at).is_some_and(|holder| holder != *worker)
}

/// A restart after which the counter was not seeded before the next token was issued.
fn unseeded_restart(cx: &Cx<'_>, at: usize) -> bool {
    if !matches!(cx.events[at].kind, EventKind::RedisRestarted { .. }) {
        return false;
    }
    let next = cx.events[at + 1..]
        .iter()
        .find(|event| matches!(event.kind, EventKind::CounterSeeded { .. } | EventKind::TokenIssued { .. }));
    matches!(next.map(|event| &event.kind), Some(EventKind::TokenIssued { .. }))
}

/// A payment that moved money for a refund that had been called for before: a key that
/// is not the refund's own.
fn paid_anew(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::RefundCalled { refund, outcome: CallOutcome::Created, .. } = &cx.events[at].kind else {
        return false;
    };
    cx.events[..at].iter().any(|event| {
        matches!(&event.kind, EventKind::RefundCalled { refund: r, .. } | EventKind::RefundTimedOut { refund: r, .. } if r == refund)
    })
}

/// An ack of a delivery before its worker completed the batch.
fn acked_early(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::JobAcked { worker, job, accepted: true, .. } = &cx.events[at].kind else { return false };
    let delivered = cx.events[..at].iter().rposition(
        |event| matches!(&event.kind, EventKind::JobDelivered { worker: w, job: j, .. } if w == worker && j == job),
    );
    let Some(delivered) = delivered else { return false };
    !cx.events[delivered..at].iter().any(|event| {
        matches!(&event.kind, EventKind::Step { worker: w, step: Step::BatchCompleted { .. } } if w == worker)
    })
}

/// A check that told its worker it still held the lease after Redis had ended it.
fn told_held_after_end(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::Step { worker, step: Step::LeaseChecked { held: true, .. } } = &cx.events[at].kind else {
        return false;
    };
    let now = cx.events[at].at_ms;
    let mut mine =
        cx.facts.record.epochs.iter().filter(|epoch| epoch.worker == *worker && epoch.granted_at_ms <= now);
    mine.next_back().is_some_and(|epoch| epoch.expired_at_ms.is_some_and(|end| end <= now))
}

/// A call reported failed right after it timed out: the worker sends it again unlooked.
fn failed_after_timeout(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::Step { worker, step: Step::GatewayFailed { refund, .. } } = &cx.events[at].kind else {
        return false;
    };
    let previous = cx.events[..at].iter().rev().find(|event| {
        matches!(&event.kind, EventKind::RefundTimedOut { worker: w, .. } | EventKind::RefundCalled { worker: w, .. } if w == worker)
    });
    // a call held up on its way, or one whose answer was lost: the worker heard a timeout
    matches!(
        previous.map(|event| &event.kind),
        Some(EventKind::RefundTimedOut { refund: r, .. } | EventKind::RefundCalled { refund: r, response_lost: true, .. }) if r == refund
    )
}

/// A confirm of a row whose confirmer's last call for it moved no money.
fn confirmed_unpaid(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::Write { worker, refund, write: WriteKind::Confirm, rows: 1.., .. } = &cx.events[at].kind
    else {
        return false;
    };
    let last = cx.events[..at].iter().rev().find(|event| match &event.kind {
        EventKind::RefundCalled { worker: w, refund: r, .. }
        | EventKind::GatewayRefused { worker: w, refund: r, .. }
        | EventKind::RefundTimedOut { worker: w, refund: r, .. }
        | EventKind::Lookup { worker: w, refund: r, found: Some(_) } => w == worker && r == refund,
        _ => false,
    });
    // a call that answered, or a lookup that found the refund, is what a confirm rests on
    !matches!(last.map(|event| &event.kind), Some(EventKind::RefundCalled { .. } | EventKind::Lookup { .. }))
}

/// A fenced posting the ledger took although a newer token had already taken the
/// merchant's ledger fence (by its enrolment or a posting of its own).
fn posted_under_newer_fence(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::SettlementPosted { merchant, token: Some(token), rows: 1.., .. } = &cx.events[at].kind
    else {
        return false;
    };
    cx.events[..at].iter().any(|event| match &event.kind {
        EventKind::SettlementEnrolled { merchant: m, token: t, rows: 1.., .. }
        | EventKind::SettlementPosted { merchant: m, token: Some(t), rows: 1.., .. } => {
            m == merchant && t > token
        }
        _ => false,
    })
}

/// A payment that moved money again for a refund already paid, sent right after its
/// payer's lookup of it found none: with the refund's own key the gateway would have
/// answered from its record.
fn paid_again_after_a_miss(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::RefundCalled { worker, refund, outcome: CallOutcome::Created, .. } = &cx.events[at].kind
    else {
        return false;
    };
    let last = cx.events[..at].iter().rev().find(|event| match &event.kind {
        EventKind::Lookup { worker: w, refund: r, .. }
        | EventKind::RefundCalled { worker: w, refund: r, .. }
        | EventKind::RefundTimedOut { worker: w, refund: r, .. } => w == worker && r == refund,
        _ => false,
    });
    let after_a_miss = matches!(last.map(|event| &event.kind), Some(EventKind::Lookup { found: None, .. }));
    after_a_miss
        && cx.events[..at].iter().any(|event| {
            matches!(&event.kind, EventKind::RefundCalled { refund: r, outcome: CallOutcome::Created, .. } if r == refund)
        })
}

/// A posting of a refund the ledger had posted already.
fn posted_again(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::SettlementPosted { refund, rows: 1.., .. } = &cx.events[at].kind else { return false };
    cx.events[..at].iter().any(|event| {
        matches!(&event.kind, EventKind::SettlementPosted { refund: r, rows: 1.., .. } if r == refund)
    })
}

/// A refused Redis command of a worker whose next step was taking the lease: the refusal
/// counted as a grant (the chain of a holder that went on ungranted starts at it).
fn refusal_counted(cx: &Cx<'_>, at: usize) -> bool {
    let EventKind::RedisRefused { worker, .. } = &cx.events[at].kind else { return false };
    let next = cx.events[at + 1..].iter().find_map(|event| match &event.kind {
        EventKind::Step { worker: w, step } if w == worker => Some(step),
        _ => None,
    });
    matches!(next, Some(Step::LeaseAcquired { .. }))
}
