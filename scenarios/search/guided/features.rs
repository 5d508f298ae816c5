//! What a run reached, as a guided search counts it: a small sorted set of numbers, each
//! a feature of the run's path. A plan is worth keeping when its run reaches a feature the
//! runs before it reached rarely or never.
//!
//! The features: each `sometimes` situation; each fault kind fired at each kind of place
//! (a protocol step, a request on a hop, a request inside an operation, a time); each
//! situation reached for the first time after a fault of each kind had fired (the order a
//! race needs); and how many times a near miss happened, in buckets (a write a fence
//! turned away, a write that found its row already sent, a lease granted, a fault that
//! fired), so that a run that came closer more often is new as well.

use crate::check::coverage::{Mark, Sometimes, Touched};
use crate::scenario::random::TRIGGER_STEPS;
use crate::search::guided::near::{self, NEAR_MISSES};
use fencesim_sim::{FaultName, Hop, RunRecord, Trigger};
use strum::EnumCount;

/// One run's features, sorted, each with the time (ms into the run) it was first reached:
/// the moment a plan may be branched from without changing what came before.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub ids: Vec<u32>,
    pub at_ms: Vec<u64>,
    /// How many events the run recorded: what a run of this plan costs, roughly.
    pub events: usize,
    /// Each of the plan's faults with the time it fired, if it did: which of them a branch
    /// from a moment keeps.
    pub fired: Vec<Option<u64>>,
}

/// Where the numbers of each family of features start.
const SITUATION: u32 = 0;
const FIRED: u32 = 100;
const AFTER: u32 = 2_000;
const COUNT: u32 = 4_000;
/// Places a fault fires at: each trigger step, each hop called, each hop inside an
/// operation, a time.
const PLACES: u32 = (TRIGGER_STEPS.len() + 2 * Hop::COUNT + 1) as u32;
/// The counts taken in buckets: four of coverage's, then the near misses.
const COUNTED: usize = 4 + NEAR_MISSES.len();
const BUCKETS: u32 = 8;

const _: () = assert!(SITUATION + Sometimes::ALL.len() as u32 <= FIRED);
const _: () = assert!(FIRED + PLACES * FaultName::COUNT as u32 <= AFTER);
const _: () = assert!(AFTER + (FaultName::COUNT * Sometimes::ALL.len()) as u32 <= COUNT);
const _: () = assert!(COUNTED as u32 * BUCKETS < 1_000);

fn place(trigger: &Trigger) -> u32 {
    let steps = TRIGGER_STEPS.len() as u32;
    match trigger {
        Trigger::Step { step, .. } => {
            TRIGGER_STEPS.iter().position(|known| known == step).unwrap_or(0) as u32
        }
        Trigger::Call { hop, .. } => steps + *hop as u32,
        Trigger::Within { hop, .. } => steps + Hop::COUNT as u32 + *hop as u32,
        Trigger::At { .. } => PLACES - 1,
    }
}

/// 0, 1, 2, 3, 4 to 7, 8 to 15, 16 to 31, 32 or more: bucket 0 to 7.
fn bucket(count: u32) -> u32 {
    match count {
        0..=3 => count,
        _ => (count.ilog2() + 2).min(BUCKETS - 1),
    }
}

/// Whether a feature is one the search steers towards: a `sometimes` situation, or a near
/// miss (or a write a fence turned away, or one that found its row sent) that happened at
/// least once. A plan that holds a rare one is chosen more often than one whose rarest
/// feature is only a fault fired at a new place.
pub fn is_goal(id: u32) -> bool {
    let counted = id.checked_sub(COUNT).map(|at| (at / BUCKETS, at % BUCKETS));
    id < FIRED || counted.is_some_and(|(count, bucket)| bucket > 0 && !(2..4).contains(&count))
}

impl Features {
    fn reach(&mut self, id: u32, at_ms: u64) {
        // first reach kept: the ids are made unique and sorted at the end
        self.ids.push(id);
        self.at_ms.push(at_ms);
    }

    /// The features of a run, with what coverage counts of it.
    pub fn of(record: &RunRecord, world: &fencesim_sim::WorldConfig) -> (Features, Touched) {
        let fired_times = crate::search::closeness::fired_times(record, &world.faults.faults);
        let mut features =
            Features { events: record.events.len(), fired: fired_times, ..Features::default() };
        let mut fired: u32 = 0;
        let mut kinds_fired: Vec<FaultName> = Vec::new();
        let touched = Touched::scan(record, world, |mark| match mark {
            Mark::Fired { kind, trigger, at_ms } => {
                fired += 1;
                features.reach(FIRED + place(&trigger) * FaultName::COUNT as u32 + kind as u32, at_ms);
                if !kinds_fired.contains(&kind) {
                    kinds_fired.push(kind);
                }
            }
            Mark::Reached { situation, at_ms } => {
                features.reach(SITUATION + situation as u32, at_ms);
                for kind in &kinds_fired {
                    let pair = *kind as u32 * Sometimes::ALL.len() as u32 + situation as u32;
                    features.reach(AFTER + pair, at_ms);
                }
            }
        });
        let end = record.events.last().map_or(0, |event| event.at_ms);
        let near = near::count(record);
        let counted =
            [touched.fence_rejections, touched.found_sent, touched.leases, fired].into_iter().chain(near);
        for (index, count) in counted.enumerate() {
            features.reach(COUNT + index as u32 * BUCKETS + bucket(count), end);
        }
        features.settle();
        (features, touched)
    }

    /// Sorted by id, each id once with its earliest time.
    fn settle(&mut self) {
        let mut pairs: Vec<(u32, u64)> = self.ids.iter().copied().zip(self.at_ms.iter().copied()).collect();
        pairs.sort_unstable();
        pairs.dedup_by_key(|pair| pair.0);
        (self.ids, self.at_ms) = pairs.into_iter().unzip();
    }

    /// When the run first reached each of its situations (`Sometimes`), alone or after a
    /// fault of a kind: the times a fault's consequences showed, in no order.
    pub fn situation_times(&self) -> impl Iterator<Item = u64> + '_ {
        let situation = |id: u32| id < FIRED || (AFTER..COUNT).contains(&id);
        (self.ids.iter().zip(&self.at_ms)).filter(move |(id, _)| situation(**id)).map(|(_, at)| *at)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fall_in_growing_buckets() {
        let buckets: Vec<u32> =
            [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 1_000].into_iter().map(bucket).collect();
        assert_eq!(buckets, [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 7, 7]);
    }

    #[test]
    fn situation_times_are_those_of_situations_alone_or_after_a_fault() {
        let features = Features {
            ids: vec![SITUATION + 1, FIRED + 3, AFTER + 5, COUNT + 2],
            at_ms: vec![10, 20, 30, 40],
            ..Features::default()
        };
        // a fault's firing is a point of its own (`fired`); a count is taken at the run's end
        assert_eq!(features.situation_times().collect::<Vec<u64>>(), [10, 30]);
    }

    #[test]
    fn every_place_has_a_number_of_its_own() {
        let mut seen = std::collections::BTreeSet::new();
        let worker = fencesim_model::WorkerId(0);
        for step in TRIGGER_STEPS {
            seen.insert(place(&Trigger::Step { worker, step, nth: 1 }));
        }
        for hop in Hop::all() {
            seen.insert(place(&Trigger::Call { worker, hop, nth: 1 }));
            seen.insert(place(&Trigger::Within { worker, hop, nth: 1 }));
        }
        seen.insert(place(&Trigger::At { at_ms: 0 }));
        assert_eq!(seen.len() as u32, PLACES);
        assert!(seen.iter().all(|place| *place < PLACES));
    }
}
