//! A chain's events in words: what happened, and for a write what the row held and what
//! the rule says of it.

use super::Cx;
use crate::check::before::{rule_accepts, rule_words};
use crate::fault_words::fault_words;
use fencesim_model::{group_thousands, Step};
use fencesim_sim::{CallOutcome, EventKind};

/// Whether the store's answer to the write at `index` is not what the protocol's rule
/// predicts: the store does not enforce the rule (a planted statement).
pub(crate) fn against_the_rule(cx: &Cx<'_>, index: usize) -> bool {
    let EventKind::Write { write, token, rows, .. } = &cx.events[index].kind else { return false };
    cx.before[index].is_some_and(|before| rule_accepts(*write, *token, before) != (*rows > 0))
}

fn write_words(cx: &Cx<'_>, index: usize) -> String {
    let EventKind::Write { worker, epoch, write, refund, token, rows, .. } = &cx.events[index].kind else {
        return String::new();
    };
    let with = token.map_or("without a token".to_owned(), |token| format!("with token {token}"));
    let under = epoch.map_or(String::new(), |number| format!(" (epoch {number})"));
    let verdict = if *rows > 0 { "accepted" } else { "turned away, 0 rows" };
    let rule = cx.before[index]
        .map_or(String::new(), |before| format!(" [{}]", rule_words(*write, *token, before, *rows)));
    format!("{worker}{under} {write}s {refund} {with}: {verdict}{rule}")
}

fn step_words(worker: fencesim_model::WorkerId, step: &Step) -> String {
    match step {
        Step::JobReceived { .. } => format!("{worker} takes the job from the queue"),
        Step::LeaseAcquired { merchant, .. } => format!("{worker} believes it holds the lease of {merchant}"),
        Step::TokenTaken { token } => format!("{worker} takes token {token} for the batch"),
        Step::FenceViolation { violation } => format!(
            "{worker}: FenceViolation, its {} of {} with token {} was turned away",
            violation.write, violation.refund, violation.token
        ),
        Step::RowAlreadySent { refund, write, token, fence } => format!(
            "{worker}'s {write} of {refund} with token {token} finds the row already sent (fence {fence}): \
             another holder finished it, no fence turned this write away"
        ),
        Step::SettlementFenceViolation { violation } => format!("{worker}: FenceViolation, {violation}"),
        Step::BatchAbandoned { reason } => format!("{worker} abandons the batch ({reason})"),
        Step::BatchCompleted { merchant } => format!("{worker} completes the batch for {merchant}"),
        Step::GatewayFailed { refund, call, error, attempt } => {
            format!("{worker}'s {call} for {refund} failed ({error}), try {attempt}")
        }
        Step::LeaseBusy { .. }
        | Step::RowsSelected { .. }
        | Step::LeaseChecked { .. }
        | Step::LeaseRenewed { .. }
        | Step::AfterLookup { .. }
        | Step::AfterClaim { .. }
        | Step::AfterGatewayCall { .. }
        | Step::AfterConfirm { .. }
        | Step::WriteSkipped { .. }
        | Step::AfterSettlementLookup { .. }
        | Step::AfterPost { .. }
        | Step::Released { .. } => format!("{worker} reaches step {}", step.kind().name()),
    }
}

fn redis_words(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::LeaseGranted { worker, key, value, ttl_ms, epoch: Some(number), .. } => format!(
            "{worker} is granted {key} (value {value}, TTL {} ms): epoch {number} begins",
            group_thousands(*ttl_ms)
        ),
        EventKind::LeaseExpired { key, value, .. } => {
            format!("{key} ({value}) expires in Redis, and nothing tells its holder")
        }
        EventKind::LeaseDeleted { worker, key, holder, .. } => match holder {
            Some(value) => format!("{worker}'s DEL of {key} lands and removes {value}"),
            None => format!("{worker}'s DEL of {key} finds nothing"),
        },
        EventKind::LeaseRead { worker, key, holder, .. } => {
            format!("{worker}'s GET of {key} reads {}", holder.as_deref().unwrap_or("nothing"))
        }
        EventKind::LeaseReleased { worker, key, deleted, .. } => match deleted {
            true => format!("{worker}'s release removes {key}"),
            false => format!("{worker}'s release of {key} removes nothing"),
        },
        EventKind::LeaseRearmed { worker, key, holder, ttl_ms, .. } => format!(
            "{worker}'s PEXPIRE re-arms {key} ({}) for {} ms",
            holder.as_deref().unwrap_or("no key"),
            group_thousands(*ttl_ms)
        ),
        EventKind::LeaseRefused { worker, key, .. } => {
            format!("{key} is refused to {worker}: another lease is live")
        }
        EventKind::LeaseExtended { worker, key, extended, .. } => match extended {
            true => format!("{worker}'s renewal extends {key}"),
            false => format!("{worker}'s renewal of {key} finds the lease gone"),
        },
        EventKind::LeaseSet { worker, key, value, .. } => {
            format!("{worker} sets {key} to {value} without NX")
        }
        EventKind::TokenIssued { worker, key, token } => format!("{key} gives {worker} token {token}"),
        EventKind::RedisRestarted { instance, lost } => {
            format!("Redis instance {} restarts: {lost} key(s) lost or rolled back", instance + 1)
        }
        EventKind::CounterSeeded { key, value, .. } => format!("{key} is seeded from MAX(fence): {value}"),
        EventKind::RedisFailedOver { instance, lost, .. } => format!(
            "Redis instance {}'s replica is promoted: {lost} write(s) it had not received are lost",
            instance + 1
        ),
        EventKind::ReplicaWaited { worker, acked, .. } => match acked {
            true => format!("{worker}'s WAIT answers that the replica has its writes"),
            false => format!("{worker}'s WAIT times out: the replica has not acknowledged its writes"),
        },
        _ => return None,
    })
}

fn settlement_words(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::SettlementEnrolled { worker, merchant, token, rows, .. } => match rows {
            0 => format!("{worker}'s enrolment with token {token} in {merchant}'s settlement ledger is turned away: its fence is newer"),
            _ => format!("{worker} takes {merchant}'s settlement-ledger fence with token {token}"),
        },
        EventKind::SettlementPosted { worker, epoch, refund, amount, token, rows, .. } => {
            let under = epoch.map_or(String::new(), |number| format!(" (epoch {number})"));
            let with = token.map_or("without a fence".to_owned(), |token| format!("with token {token}"));
            match rows {
                0 => format!("{worker}{under} posts {refund} to the settlement ledger {with}: turned away, 0 rows"),
                _ => format!("{worker}{under} posts {refund} ({amount}) to the settlement ledger {with}: accepted"),
            }
        }
        EventKind::SettlementLookup { worker, refund, posted } => match posted {
            true => format!("{worker} asks the settlement ledger about {refund}: posted already"),
            false => format!("{worker} asks the settlement ledger about {refund}: not posted"),
        },
        _ => return None,
    })
}

fn gateway_words(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::RefundCalled { worker, refund, amount, outcome, gateway_ref, response_lost, .. } => {
            let lost = if *response_lost { "; its answer is lost" } else { "" };
            match outcome {
                CallOutcome::Created => {
                    format!("{worker} pays {refund}: {amount} leaves as gateway refund #{gateway_ref}{lost}")
                }
                CallOutcome::Replayed => format!(
                    "{worker}'s call for {refund} is answered from the idempotency record (gateway refund #{gateway_ref}): no money moves"
                ),
                CallOutcome::Conflict => format!("{worker}'s call for {refund} is refused: the key is in flight"),
            }
        }
        EventKind::Lookup { worker, refund, found } => match found {
            Some(number) => format!("{worker} looks up {refund}: gateway refund #{number} exists"),
            None => format!("{worker} looks up {refund}: the gateway has none"),
        },
        EventKind::RefundTimedOut { worker, refund, lands_at_ms } => format!(
            "{worker}'s call for {refund} times out: {worker} hears nothing, and the call is still on its way (it lands {} ms in)",
            group_thousands(*lands_at_ms)
        ),
        EventKind::GatewayRefused { worker, refund, call } => {
            format!("the gateway refuses {worker}'s {call} for {refund}: nothing moves")
        }
        _ => return None,
    })
}

/// The event at `index` in words.
pub(crate) fn told(cx: &Cx<'_>, index: usize) -> String {
    let kind = &cx.events[index].kind;
    let queue = || match kind {
        EventKind::JobDelivered { job, worker, delivery, .. } => {
            Some(format!("the queue delivers {job} to {worker} (delivery {delivery})"))
        }
        EventKind::JobAcked { job, worker, accepted, .. } => {
            Some(format!("{worker} acks {job}{}", if *accepted { "" } else { ": refused" }))
        }
        EventKind::VisibilityExpired { job, worker, .. } => {
            Some(format!("{worker}'s delivery of {job} times out: the job is visible again"))
        }
        _ => None,
    };
    let other = || {
        match kind {
        EventKind::Write { .. } => Some(write_words(cx, index)),
        EventKind::LookupBehind { worker, refund, gateway_ref, paid_at_ms, behind_ms } => Some(format!(
            "the gateway's lookup for {worker}, answered from a copy {} ms behind, said {refund} had no refund, though it had one since {} (gateway refund #{gateway_ref})",
            group_thousands(*behind_ms),
            cx.facts.at(*paid_at_ms)
        )),
        EventKind::Step { worker, step } => Some(step_words(*worker, step)),
        EventKind::FaultFired { fault, .. } => Some(format!("the fault: {}", fault_words(fault).0)),
        EventKind::Resumed { worker } => {
            Some(format!("{worker} resumes, still believing it holds the lease"))
        }
        EventKind::Restarted { worker, incarnation } => {
            Some(format!("{worker} starts again (process {incarnation})"))
        }
        _ => None,
    }
    };
    redis_words(kind)
        .or_else(|| gateway_words(kind))
        .or_else(|| settlement_words(kind))
        .or_else(queue)
        .or_else(other)
        .unwrap_or_else(|| format!("{} event", kind.actor()))
}
