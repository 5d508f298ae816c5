//! Fresh failures played live: each drawn failure (`search::fresh`) judged by the
//! simulation, refused by name or played once on a real database at the time scale `live`
//! would choose, and the live verdict set beside the simulated one. Where they differ, the
//! first event where the two histories part is named: each party's events (a worker's
//! steps and requests, the queue's, the faults') are compared in order without their times
//! and the values a run draws afresh, and the earliest difference in the simulated story
//! is the one told.

use crate::files::replay_file::ReplayFile;
use crate::live::coordinator::{live_scenario, run_live};
use crate::live::fidelity::config;
use crate::live::scale::{choose, shortest_interval};
use crate::runner::{run_with, Outcome};
use fencesim_sim::Event;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One failure played on one database.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Played {
    pub database: String,
    pub scale: f64,
    /// The invariants the live run broke.
    pub live: Vec<String>,
    /// Where the histories part, when the verdicts differ.
    pub parted: Option<Parting>,
}

/// The first event where the live history leaves the simulated one.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Parting {
    /// Whose events part: a worker (`A`), or `queue`, `redis`, `faults`...
    pub party: String,
    /// The party's event at that place in each history, with its story time, if it has one.
    pub simulated: Option<(u64, String)>,
    pub live: Option<(u64, String)>,
}

/// What a file's simulated run breaks, and why live refuses it, if it does.
pub struct Judged {
    pub simulated: Outcome,
    pub refused: Option<String>,
}

pub fn judge(file: &ReplayFile, program: &Path) -> Result<Judged, String> {
    let simulated = run_with(&file.scenario()?, file.seed, file.mutant)?;
    let refused = live_scenario(&config(file, program, 1.0, "sqlite", None)?).err();
    Ok(Judged { simulated, refused })
}

/// Plays `file` once on `database` (at `postgres` for PostgreSQL), at the scale chosen for
/// the database's lag per request, and compares it with its simulated run.
pub fn play(
    file: &ReplayFile,
    simulated: &Outcome,
    program: &Path,
    database: &str,
    lag: Duration,
    postgres: Option<&str>,
) -> Result<Played, String> {
    let scale = choose(shortest_interval(simulated), lag).scale;
    let live = run_live(&config(file, program, scale, database, postgres)?)?;
    let names = |o: &Outcome| -> Vec<String> {
        o.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant.to_owned()).collect()
    };
    let live_broken = names(&live);
    let parted = (live_broken != names(simulated))
        .then(|| first_parting(&simulated.record.events, &live.record.events))
        .flatten();
    Ok(Played { database: database.to_owned(), scale, live: live_broken, parted })
}

/// The fields a run draws afresh or a real machine times differently: left out of the
/// comparison.
const VOLATILE: [&str; 9] =
    ["at", "value", "holder", "gateway_ref", "epoch", "receipt", "lands_at_ms", "ttl_ms", "delivery"];

/// An event as compared: its party, and its fields without the volatile ones.
fn projected(event: &Event) -> (String, String) {
    let mut value = serde_json::to_value(&event.kind).unwrap_or_default();
    let party = value
        .get("worker")
        .and_then(|w| w.as_str())
        .map_or_else(|| event.kind.actor().to_string(), str::to_owned);
    if let Some(fields) = value.as_object_mut() {
        for field in VOLATILE {
            fields.remove(field);
        }
        fields.remove("worker");
    }
    let words = match value.as_object() {
        Some(fields) => fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
        None => value.to_string(),
    };
    (party, words.replace('"', ""))
}

/// Each party's events in order, with their story times.
fn by_party(events: &[Event]) -> BTreeMap<String, Vec<(u64, String)>> {
    let mut parties: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for event in events {
        let (party, words) = projected(event);
        parties.entry(party).or_default().push((event.at_ms, words));
    }
    parties
}

/// The earliest place, by the simulated story's time, where a party's events differ
/// between the two histories; `None` when every party's events are the same.
pub fn first_parting(simulated: &[Event], live: &[Event]) -> Option<Parting> {
    let (simulated, live) = (by_party(simulated), by_party(live));
    let empty = Vec::new();
    let parties = simulated.keys().chain(live.keys()).collect::<std::collections::BTreeSet<_>>();
    let partings = parties.into_iter().filter_map(|party| {
        let (ours, theirs) = (simulated.get(party).unwrap_or(&empty), live.get(party).unwrap_or(&empty));
        let at = (0..ours.len().max(theirs.len()))
            .find(|&i| ours.get(i).map(|e| &e.1) != theirs.get(i).map(|e| &e.1))?;
        let parting =
            Parting { party: party.clone(), simulated: ours.get(at).cloned(), live: theirs.get(at).cloned() };
        let when = parting.simulated.as_ref().or(parting.live.as_ref()).map_or(u64::MAX, |e| e.0);
        Some((when, parting))
    });
    partings.min_by_key(|(when, _)| *when).map(|(_, parting)| parting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::{RefundId, WorkerId};
    use fencesim_sim::EventKind;

    fn lookup(at_ms: u64, worker: u32, refund: u32) -> Event {
        let kind = EventKind::Lookup { worker: WorkerId(worker), refund: RefundId(refund), found: None };
        Event { at_ms, kind }
    }

    #[test]
    fn the_parting_is_the_earliest_difference_of_any_party_and_ignores_interleaving() {
        let simulated = [lookup(1, 0, 1), lookup(1, 1, 7), lookup(5, 0, 2), lookup(9, 1, 8)];
        // B's first event before A's: the same per party, so no parting
        let same = [lookup(1, 1, 7), lookup(2, 0, 1), lookup(5, 0, 2), lookup(9, 1, 8)];
        assert_eq!(first_parting(&simulated, &same), None);
        // A looks up r_3 where it looked up r_2; B's last differs later
        let other = [lookup(1, 0, 1), lookup(1, 1, 7), lookup(6, 0, 3), lookup(9, 1, 9)];
        let parting = first_parting(&simulated, &other).expect("they part");
        assert_eq!(parting.party, "A");
        assert_eq!(parting.simulated.map(|e| e.0), Some(5));
        assert_eq!(parting.live.map(|e| e.0), Some(6));
    }
}
