//! Which hop each event travelled, and which faults hold a request or its reply up on
//! one: the timeline draws the hold-ups, and the chains cite them.

use fencesim_model::WorkerId;
use fencesim_sim::{Event, EventKind, FaultKind, Hop};

/// The worker and hop of an event that a request on that hop made, if any.
pub fn hop_of(kind: &EventKind) -> Option<(WorkerId, Hop)> {
    use EventKind::*;
    match kind {
        LeaseGranted { worker, .. }
        | LeaseRefused { worker, .. }
        | LeaseReleased { worker, .. }
        | LeaseDeleted { worker, .. }
        | LeaseExtended { worker, .. }
        | LeaseSet { worker, .. }
        | LeaseRead { worker, .. }
        | LeaseRearmed { worker, .. }
        | RedisRefused { worker, .. }
        | ScriptFailed { worker, .. }
        | ReplicaWaited { worker, .. } => Some((*worker, Hop::Redis)),
        TokenIssued { worker, key, .. } if key.starts_with("fence_seq:") => Some((*worker, Hop::Database)),
        TokenIssued { worker, .. } => Some((*worker, Hop::Redis)),
        Write { worker, .. } | StatementFailed { worker, .. } => Some((*worker, Hop::Database)),
        Lookup { worker, .. }
        | RefundCalled { worker, .. }
        | GatewayRefused { worker, .. }
        | RefundTimedOut { worker, .. } => Some((*worker, Hop::Gateway)),
        SettlementEnrolled { worker, .. }
        | SettlementPosted { worker, .. }
        | SettlementLookup { worker, .. } => Some((*worker, Hop::Settlement)),
        JobEnqueued { .. }
        | JobDelivered { .. }
        | VisibilityExpired { .. }
        | JobAcked { .. }
        | LeaseExpired { .. }
        | CounterSeeded { .. }
        | Step { .. }
        | FaultFired { .. }
        | Resumed { .. }
        | Restarted { .. }
        | RedisRestarted { .. }
        | RedisFailedOver { .. }
        | RefundsArrived { .. }
        | LookupBehind { .. } => None,
    }
}

/// A fault that holds up a worker's next request (or its reply) on a hop: the worker, the
/// hop, how long, and whether it is the reply that waits.
pub fn hold_up(fault: &FaultKind) -> Option<(WorkerId, Hop, u64, bool)> {
    match *fault {
        FaultKind::DbDelay { worker, delay_ms } => Some((worker, Hop::Database, delay_ms, false)),
        FaultKind::RedisDelay { worker, delay_ms } => Some((worker, Hop::Redis, delay_ms, false)),
        FaultKind::GatewayLatency { worker, extra_ms } => Some((worker, Hop::Gateway, extra_ms, false)),
        FaultKind::GatewayTimeout { worker, late_ms } => Some((worker, Hop::Gateway, late_ms, false)),
        FaultKind::RedisReplyDelay { worker, delay_ms } => Some((worker, Hop::Redis, delay_ms, true)),
        FaultKind::DbReplyDelay { worker, delay_ms } => Some((worker, Hop::Database, delay_ms, true)),
        FaultKind::SettlementDelay { worker, delay_ms } => Some((worker, Hop::Settlement, delay_ms, false)),
        FaultKind::SettlementReplyDelay { worker, delay_ms } => {
            Some((worker, Hop::Settlement, delay_ms, true))
        }
        FaultKind::Pause { .. }
        | FaultKind::Crash { .. }
        | FaultKind::ExpireLease { .. }
        | FaultKind::RedisClockJump { .. }
        | FaultKind::RedisRestart { .. }
        | FaultKind::RedisFailover { .. }
        | FaultKind::Redeliver { .. }
        | FaultKind::DuplicateDelivery { .. }
        | FaultKind::LostResponse { .. }
        | FaultKind::GatewayConflicts { .. }
        | FaultKind::GatewayOutage { .. }
        | FaultKind::LookupLag { .. } => None,
    }
}

pub fn hop_name(hop: Hop) -> &'static str {
    match hop {
        Hop::Redis => "redis",
        Hop::Database => "database",
        Hop::Gateway => "gateway",
        Hop::Settlement => "settlement",
    }
}

/// The event a held-up request made when it landed (or whose reply waited): the worker's
/// first event on the hop after the fault fired.
pub fn held_event(events: &[Event], fired: usize, worker: WorkerId, hop: Hop) -> Option<usize> {
    let later = events.iter().enumerate().skip(fired + 1);
    later
        .map(|(index, event)| (index, hop_of(&event.kind)))
        .find_map(|(index, on)| (on == Some((worker, hop))).then_some(index))
}

/// When a hold-up held its request or reply: from when it left to when it landed (or
/// from when the command ran to when its answer arrived). `fired` is the fault's event.
pub fn held_span(events: &[Event], fired: usize) -> Option<(u64, u64, Option<usize>)> {
    let EventKind::FaultFired { fault, .. } = &events[fired].kind else { return None };
    let (worker, hop, held_ms, reply) = hold_up(fault)?;
    let at = events[fired].at_ms;
    let landed = held_event(events, fired, worker, hop);
    let (from, to) = match (reply, landed.map(|index| events[index].at_ms)) {
        (false, Some(landed)) => (landed.saturating_sub(held_ms).max(at), landed),
        (true, Some(landed)) => (landed, landed + held_ms),
        (_, None) => (at, at + held_ms),
    };
    Some((from, to, landed))
}
