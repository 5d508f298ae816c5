//! A fault in words, and its note on the sequence diagram: the one catalogue that both the
//! story (`tell/story/faults.rs`) and a breach's chain (`check/chain/words.rs`) tell a fault
//! with. A room of its own, below both, so that the checking never imports the telling.

use fencesim_model::group_thousands as fmt_ms;
use fencesim_sim::FaultKind;

/// A fault in words, and its note on the sequence diagram.
pub(crate) fn fault_words(fault: &FaultKind) -> (String, String) {
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
            format!("redis#{} restarts, with {}", instance + 1, persistence.words()),
            "Note over R: restart".to_owned(),
        ),
        FaultKind::RedisFailover { instance } => (
            format!(
                "redis#{}'s primary stops; its replica is promoted with what it had received",
                instance + 1
            ),
            "Note over R: failover to the replica".to_owned(),
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
        FaultKind::RedisDelay { worker, delay_ms } => (
            format!("{worker}'s next Redis command is held up {} ms on the way", fmt_ms(delay_ms)),
            format!("Note over {worker},R: slow hop"),
        ),
        FaultKind::RedisReplyDelay { worker, delay_ms } => (
            format!(
                "the answer to {worker}'s next Redis command is held up {} ms on the way back",
                fmt_ms(delay_ms)
            ),
            format!("Note over {worker},R: slow answer"),
        ),
        FaultKind::DbReplyDelay { worker, delay_ms } => (
            format!(
                "the answer to {worker}'s next database request is held up {} ms on the way back",
                fmt_ms(delay_ms)
            ),
            format!("Note over {worker},D: slow answer"),
        ),
        FaultKind::SettlementDelay { worker, delay_ms } => settlement_fault_words(worker, delay_ms, false),
        FaultKind::SettlementReplyDelay { worker, delay_ms } => {
            settlement_fault_words(worker, delay_ms, true)
        }
        FaultKind::GatewayLatency { .. }
        | FaultKind::LostResponse { .. }
        | FaultKind::GatewayConflicts { .. }
        | FaultKind::GatewayTimeout { .. }
        | FaultKind::GatewayOutage { .. }
        | FaultKind::LookupLag { .. } => gateway_fault_words(fault),
    }
}

/// A hold-up on the settlement ledger's hop (of the request, or of its `reply`) in words.
fn settlement_fault_words(worker: fencesim_model::WorkerId, delay_ms: u64, reply: bool) -> (String, String) {
    match reply {
        false => (
            format!(
                "{worker}'s next settlement-ledger request is held up {} ms on the way",
                fmt_ms(delay_ms)
            ),
            format!("Note over {worker},L: slow hop"),
        ),
        true => (
            format!(
                "the answer to {worker}'s next settlement-ledger request is held up {} ms on the way back",
                fmt_ms(delay_ms)
            ),
            format!("Note over {worker},L: slow answer"),
        ),
    }
}

/// A gateway fault in words, and its note on the sequence diagram.
fn gateway_fault_words(fault: &FaultKind) -> (String, String) {
    match *fault {
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
        FaultKind::GatewayTimeout { worker, late_ms } => (
            format!(
                "{worker}'s next refund call will be held up {} ms on the way: {worker} hears a timeout",
                fmt_ms(late_ms)
            ),
            "Note over G: timeout".to_owned(),
        ),
        FaultKind::GatewayOutage { for_ms } => (
            format!("for {} ms the gateway refuses every request", fmt_ms(for_ms)),
            "Note over G: outage".to_owned(),
        ),
        FaultKind::LookupLag { for_ms } => (
            format!(
                "for {} ms the copy the gateway answers lookups from stops catching up with its ledger",
                fmt_ms(for_ms)
            ),
            "Note over G: lookups lag".to_owned(),
        ),
        FaultKind::Pause { .. }
        | FaultKind::Crash { .. }
        | FaultKind::ExpireLease { .. }
        | FaultKind::RedisClockJump { .. }
        | FaultKind::RedisRestart { .. }
        | FaultKind::RedisFailover { .. }
        | FaultKind::Redeliver { .. }
        | FaultKind::DuplicateDelivery { .. }
        | FaultKind::DbDelay { .. }
        | FaultKind::RedisDelay { .. }
        | FaultKind::RedisReplyDelay { .. }
        | FaultKind::DbReplyDelay { .. }
        | FaultKind::SettlementDelay { .. }
        | FaultKind::SettlementReplyDelay { .. } => fault_words(fault),
    }
}
