//! Requests that share a story millisecond, released in the simulation's order. A replay's
//! simulated run keeps the order its world served requests and fired faults in
//! (`fencesim_sim::run_ordered`); where two parties (two workers, or a worker and a fault)
//! act in the same millisecond, the later one waits, just before its request leaves or
//! its fault acts, until the earlier one has been answered or has acted, or until its
//! patience runs out (the live run went another way). Each answered request that another
//! waits for leaves a file in the run's directory; the waiter looks for it.
//!
//! Without it, the same one of two confirms in one millisecond went first in every live run
//! whatever the simulation did, and a Redis restart at the millisecond of a worker's `INCR`
//! came before it live and after it simulated.

use fencesim_sim::{Fault, Hop, Served};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One party's act, as both runs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Act {
    /// A worker's `nth` request on `hop` (counted as a call trigger counts).
    Request { worker: u32, hop: Hop, nth: u32 },
    /// The fault at this place in the plan, fired by the coordinator at its time or by a
    /// worker at its own step or request.
    Fault(usize),
}

impl Act {
    fn party(self) -> Option<u32> {
        match self {
            Act::Request { worker, .. } => Some(worker),
            Act::Fault(_) => None,
        }
    }

    fn file_name(self) -> String {
        match self {
            Act::Request { worker, hop, nth } => format!("turn-w{worker}-h{}-{nth}", hop as u8),
            Act::Fault(index) => format!("turn-f{index}"),
        }
    }
}

/// Who waits for whom, and where the answered acts are marked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Turns {
    pub dir: PathBuf,
    /// Each act that waits, with the act it waits for.
    pub after: BTreeMap<String, Act>,
    /// The acts another waits for.
    pub awaited: Vec<Act>,
    /// How long an act waits at most, in real microseconds.
    pub patience_us: u64,
}

impl Turns {
    /// The turns of a simulated run's order: within each millisecond, each act of one party
    /// right after another party's waits for it. `faults` is the plan, to name a fault by its
    /// place in it; a fault is its own party, whoever fires it (the coordinator at its time,
    /// a worker at its step or request).
    pub fn of(served: &[(u64, Served)], faults: &[Fault], dir: &Path, patience: Duration) -> Turns {
        let act = |served: &Served| match served {
            Served::Request { worker, hop, nth } => {
                Some(Act::Request { worker: worker.0, hop: *hop, nth: *nth })
            }
            Served::Fault(fault) => faults.iter().position(|f| f == fault).map(Act::Fault),
        };
        let mut turns =
            Turns { dir: dir.to_owned(), patience_us: patience.as_micros() as u64, ..Turns::default() };
        for pair in served.windows(2) {
            let ((at, before), (then, now)) = (&pair[0], &pair[1]);
            let (Some(before), Some(now)) = (act(before), act(now)) else { continue };
            if at == then && before.party() != now.party() {
                turns.after.insert(now.file_name(), before);
                turns.awaited.push(before);
            }
        }
        turns.awaited.sort_unstable();
        turns.awaited.dedup();
        turns
    }

    /// Waits until the act `act` waits for has been answered, or patience runs out.
    pub fn wait_for(&self, act: Act) {
        let Some(before) = self.after.get(&act.file_name()) else { return };
        let marked = self.dir.join(before.file_name());
        let until = Instant::now() + Duration::from_micros(self.patience_us);
        while !marked.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// `act` has been answered: marked, if another waits for it.
    pub fn done(&self, act: Act) {
        if self.awaited.binary_search(&act).is_ok() {
            let _ = std::fs::write(self.dir.join(act.file_name()), b"");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::WorkerId;
    use fencesim_sim::{FaultKind, Persistence, Trigger};

    fn request(worker: u32, hop: Hop, nth: u32) -> Served {
        Served::Request { worker: WorkerId(worker), hop, nth }
    }

    #[test]
    fn only_another_party_s_act_in_the_same_millisecond_is_waited_for() {
        let restart = Fault {
            kind: FaultKind::RedisRestart { instance: 0, persistence: Persistence::ALL[0] },
            trigger: Trigger::At { at_ms: 2 },
        };
        let served = [
            (1, request(0, Hop::Redis, 1)),
            (2, request(1, Hop::Redis, 1)),
            (2, request(0, Hop::Redis, 2)),
            (2, Served::Fault(restart.clone())),
            (2, request(0, Hop::Database, 1)),
            (2, request(0, Hop::Database, 2)),
            (3, request(1, Hop::Redis, 2)),
        ];
        let dir = std::env::temp_dir().join(format!("fencesim-turns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let turns = Turns::of(&served, &[restart], &dir, Duration::from_millis(5));
        let a = |hop, nth| Act::Request { worker: 0, hop, nth };
        let b = |nth| Act::Request { worker: 1, hop: Hop::Redis, nth };
        let expected = [
            (a(Hop::Redis, 2).file_name(), b(1)),
            (Act::Fault(0).file_name(), a(Hop::Redis, 2)),
            (a(Hop::Database, 1).file_name(), Act::Fault(0)),
        ];
        assert_eq!(turns.after, expected.into_iter().collect(), "not A's own, not across milliseconds");
        // an act waits until the one before it is marked, and no longer than its patience
        let started = Instant::now();
        turns.wait_for(a(Hop::Redis, 2));
        assert!(started.elapsed() >= Duration::from_millis(5), "nothing marked: it waited its patience");
        turns.done(b(1));
        let started = Instant::now();
        turns.wait_for(a(Hop::Redis, 2));
        assert!(started.elapsed() < Duration::from_millis(5), "marked: it went at once");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
