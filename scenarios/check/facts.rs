//! What the checkers read: the run's record, its world and where it stands in wall time;
//! and what they write: breaches, each with the moment and the words.

use fencesim_model::{RefundId, WorkerId};
use fencesim_sim::{Epoch, RunRecord, WallMs, WorldConfig};
use serde::Serialize;

/// One time an invariant did not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Breach {
    pub at_ms: u64,
    /// The event that broke it (its index in the history); none for a check of the state
    /// at rest, which no one event breaks.
    pub event: Option<usize>,
    pub detail: String,
}

/// The facts the checkers need about a run.
pub struct Facts<'a> {
    pub record: &'a RunRecord,
    pub world: &'a WorldConfig,
    pub base: WallMs,
}

impl Facts<'_> {
    pub(super) fn at(&self, ms: u64) -> WallMs {
        self.base.plus(ms)
    }

    fn epoch(&self, number: Option<u32>) -> Option<&Epoch> {
        number.and_then(|number| self.record.epochs.get(number as usize - 1))
    }

    /// "B (epoch 2)", "A (epoch 1, whose lease expired at 10:00:30.000)".
    pub(super) fn who(&self, worker: WorkerId, epoch: Option<u32>) -> String {
        match self.epoch(epoch) {
            None => format!("{worker} (holding no lease)"),
            Some(epoch) => match epoch.expired_at_ms {
                Some(at) => {
                    format!("{worker} (epoch {}, whose lease expired at {})", epoch.number, self.at(at))
                }
                None => format!("{worker} (epoch {})", epoch.number),
            },
        }
    }
}

/// A value per refund row, indexed by the refund's number: the checkers look rows up
/// once per event, so a dense table beats a map.
pub struct PerRow<T> {
    slots: Vec<T>,
}

impl<T: Clone + Default> PerRow<T> {
    pub fn new(world: &WorldConfig) -> PerRow<T> {
        let len = world.rows.iter().map(|row| row.id.0 as usize + 1).max().unwrap_or(0);
        PerRow { slots: vec![T::default(); len] }
    }

    pub fn get(&self, id: RefundId) -> T {
        self.slots.get(id.0 as usize).cloned().unwrap_or_default()
    }

    pub fn slot(&mut self, id: RefundId) -> &mut T {
        let index = id.0 as usize;
        if index >= self.slots.len() {
            self.slots.resize(index + 1, T::default());
        }
        &mut self.slots[index]
    }

    /// Sets the row's value and returns the one it had.
    pub fn replace(&mut self, id: RefundId, value: T) -> T {
        std::mem::replace(self.slot(id), value)
    }
}
