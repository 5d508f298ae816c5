//! A live run's event files: what each process writes reads back as the very events the
//! simulation records, whatever their kind.

use fencesim::model::Mechanism;
use fencesim::runner::run;
use fencesim::scenario::{self, FaultMask};
use fencesim::sim::{EventKind, GatewayMode};
use std::collections::BTreeSet;

/// A process's event file is read back into the very events written, for every kind the
/// simulated runs of every mechanism record.
#[test]
fn an_event_file_reads_back_as_the_events_written() {
    use fencesim::live::log::{read_all, EventLog};
    let path = std::env::temp_dir().join(format!("fencesim-events-{}.jsonl", std::process::id()));
    let log = EventLog::create(&path).expect("an event file");
    let mut written = Vec::new();
    for mechanism in Mechanism::ALL {
        for gateway in GatewayMode::ALL {
            let world = scenario::build("random", 7, mechanism, gateway, FaultMask::ALL).expect("a world");
            let outcome = run(&world, 7).expect("a run");
            for event in &outcome.record.events {
                log.record_at(written.len() as u64, event.kind.clone());
                written.push(event.kind.clone());
            }
        }
    }
    let kinds: BTreeSet<String> = written
        .iter()
        .map(|kind| format!("{kind:?}").split([' ', '{']).next().unwrap_or("").to_owned())
        .collect();
    assert!(kinds.len() >= 15, "many kinds of event: {kinds:?}");
    drop(log);
    let read: Vec<EventKind> = read_all(std::slice::from_ref(&path))
        .expect("the file reads back")
        .into_iter()
        .map(|line| line.happened)
        .collect();
    let _ = std::fs::remove_file(&path);
    assert_eq!(read.len(), written.len());
    assert!(read == written, "every event reads back as itself");
}
