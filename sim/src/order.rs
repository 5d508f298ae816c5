//! The order in which the world served its requests and fired its faults, kept only
//! when a run asks for it (the live arm does, to release a real run's requests that share
//! a story millisecond in the simulation's order): not part of the history, so a run that
//! keeps it has the same trace as one that does not.

use crate::fault::{Fault, Hop};
use fencesim_model::WorkerId;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Who acted, as both a simulated and a live run can name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Served {
    /// `worker`'s `nth` request on `hop` (counted from 1, as a call trigger counts) reached
    /// its component.
    Request { worker: WorkerId, hop: Hop, nth: u32 },
    /// A fault of the plan fired (at its time, or at the step or request that triggers it).
    Fault(Fault),
}

/// What the run served, in order, with each one's story millisecond.
#[derive(Default)]
pub struct OrderLog {
    counts: BTreeMap<(WorkerId, Hop), u32>,
    pub served: Vec<(u64, Served)>,
}

impl OrderLog {
    pub fn request(&mut self, at_ms: u64, worker: WorkerId, hop: Hop) {
        let nth = self.counts.entry((worker, hop)).or_default();
        *nth += 1;
        self.served.push((at_ms, Served::Request { worker, hop, nth: *nth }));
    }

    pub fn fault(&mut self, at_ms: u64, fault: Fault) {
        self.served.push((at_ms, Served::Fault(fault)));
    }
}

/// The log a world keeps, if it keeps one.
pub(crate) type Kept = Option<Mutex<OrderLog>>;
