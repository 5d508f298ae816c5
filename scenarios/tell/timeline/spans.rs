//! Spans of time the faults hold something up: a worker's request or reply on one hop
//! (from when it left to when it landed), and a Redis instance that refuses connections
//! while it restarts.

use super::Span;
use crate::check::hops::{held_span, hold_up, hop_name};
use crate::runner::Outcome;
use fencesim_model::group_thousands;
use fencesim_sim::{Event, EventKind, FaultKind};

/// Each request or reply a fault held up, from when it left (or was answered) to when it
/// landed (or its answer arrived).
pub fn delays(events: &[Event]) -> Vec<Span> {
    let mut spans = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let EventKind::FaultFired { fault, .. } = &event.kind else { continue };
        let Some((worker, hop, held_ms, reply)) = hold_up(fault) else { continue };
        let Some((from, to, _)) = held_span(events, index) else { continue };
        let what = if reply { "reply" } else { "request" };
        let label = format!("{worker}'s {} {what} held up {} ms", hop_name(hop), group_thousands(held_ms));
        spans.push(Span {
            worker: Some(worker.0 as usize),
            hop: hop_name(hop).to_owned(),
            from,
            to,
            label,
            event: index,
        });
    }
    spans
}

/// Each Redis restart that refuses connections for a while, as a span on its instance.
pub fn downtime(outcome: &Outcome) -> Vec<Span> {
    let world = &outcome.scenario.world;
    let down_ms = world.mechanism.restart_down_ms(world.redis_restart_ms, world.ttl_ms);
    let events = &outcome.record.events;
    let restarts = events.iter().enumerate().filter_map(|(index, event)| match event.kind {
        EventKind::FaultFired { fault: FaultKind::RedisRestart { instance, .. }, .. } => {
            Some((index, event.at_ms, instance))
        }
        _ => None,
    });
    let instances = world.redis_instances();
    let name = |instance: u8| match instances {
        1 => "redis".to_owned(),
        _ => format!("redis#{}", instance + 1),
    };
    restarts
        .map(|(index, at, instance)| Span {
            worker: None,
            hop: name(instance),
            from: at,
            to: at + down_ms.max(1),
            label: match down_ms {
                0 => format!("{} restarts (back at once)", name(instance)),
                _ => format!(
                    "{} restarts: refuses connections for {} ms",
                    name(instance),
                    group_thousands(down_ms)
                ),
            },
            event: index,
        })
        .collect()
}
