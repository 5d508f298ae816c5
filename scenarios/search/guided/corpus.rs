//! The corpus: the (world, plan) pairs a guided search keeps, each because its run reached
//! a feature no plan kept before it had, and how many runs reached each feature. A plan is
//! chosen to grow from by the rarity of what it reached: the rarer its features among all
//! the runs so far, the more often.

use crate::scenario::production::Rates;
use crate::scenario::Scenario;
use crate::search::guided::features::{is_goal, Features};
use fencesim_sim::FaultPlan;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// One kept plan, in its world, with the seed its runs take.
#[derive(Clone, Debug)]
pub struct Entry {
    pub seed: u64,
    pub scenario: Scenario,
    pub features: Features,
    /// When its run first reached a feature no earlier plan had: a fault added after it
    /// leaves the path up to there as it was.
    pub moment_ms: u64,
    /// Branches made from its moment so far, and how many of them were kept (reached a
    /// feature no kept plan held): what its energy is worked out from.
    pub branches: u32,
    pub finds: u32,
}

impl Entry {
    pub fn plan(&self) -> &FaultPlan {
        &self.scenario.world.faults
    }

    /// The moments a branch of this plan may start from: its moment (when its run first
    /// reached something new), each time one of its faults fired and each time its run first
    /// reached a situation (a lease that expired while held, a refund call that timed out:
    /// where a fault's consequence shows, a lease's life or a timeout after the fault), in
    /// order.
    pub fn points(&self) -> Vec<u64> {
        let mut points: Vec<u64> = self.features.fired.iter().flatten().copied().collect();
        points.extend(self.features.situation_times());
        points.push(self.moment_ms);
        points.sort_unstable();
        points.dedup();
        points
    }

    /// How rare its fired faults make its run under `rates`: the product of each fired
    /// fault's one-in-so-many (1 for every kind under the swarm's rates, which draw every
    /// kind as often), at most `RAREST`.
    pub fn rarity(&self, rates: Rates) -> u64 {
        let plan = &self.plan().faults;
        (plan.iter().zip(&self.features.fired))
            .filter(|(_, fired)| fired.is_some())
            .fold(1u64, |product, (fault, _)| product.saturating_mul(rates.one_in(fault.kind.kind())))
            .min(RAREST)
    }
}

/// The most a plan's fired faults multiply its weight as a branch's parent by.
const RAREST: u64 = 1 << 16;

/// The most one plan weighs as a branch's parent: a corpus's sum of weights stays far
/// below what a `u64` holds.
const HEAVIEST: u64 = 1 << 52;

/// The most plans a corpus keeps: past it, a run that reaches something new is counted
/// but not kept (a search of thousands of runs keeps a few hundred).
pub const MOST_ENTRIES: usize = 1_024;

/// What a plan's rarest feature weighs: a feature reached by `n` runs weighs `WEIGHT / n`.
const WEIGHT: u64 = 1 << 20;

/// Events that weigh a plan's run as much as its features: a run of `COST_BASE` events
/// halves a plan's weight.
const COST_BASE: u64 = 200;

/// How many times more a goal feature (`features::is_goal`) weighs than another as rare.
const GOAL: u64 = 8;

/// A plan's energy as a branch's parent before any branch of it ran, what each kept
/// branch adds to it, and how many branches make it one share smaller (`branch_weights`).
const ENERGY: u64 = 4;
const FIND: u64 = 8;
const TIRING: u64 = 4;

#[derive(Debug, Default)]
pub struct Corpus {
    entries: Vec<Entry>,
    /// Runs that reached each feature, over every run so far.
    hits: BTreeMap<u32, u64>,
    /// Kept plans that hold each feature.
    held: BTreeMap<u32, u32>,
}

impl Corpus {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Counts a run and keeps its plan when it reached a feature no kept plan holds;
    /// whether it was kept.
    pub fn consider(&mut self, seed: u64, scenario: &Scenario, features: Features) -> bool {
        for id in &features.ids {
            *self.hits.entry(*id).or_default() += 1;
        }
        let new: Vec<usize> =
            (0..features.len()).filter(|&at| !self.held.contains_key(&features.ids[at])).collect();
        if new.is_empty() || self.entries.len() >= MOST_ENTRIES {
            return false;
        }
        let moment_ms = new.iter().map(|&at| features.at_ms[at]).min().unwrap_or(0);
        for id in &features.ids {
            *self.held.entry(*id).or_default() += 1;
        }
        self.entries.push(Entry {
            seed,
            scenario: scenario.clone(),
            features,
            moment_ms,
            branches: 0,
            finds: 0,
        });
        true
    }

    /// How much a plan weighs when one is chosen: the rarity of its rarest feature (not
    /// the sum over its features, which would favour the biggest worlds, whose runs have
    /// the most features and cost the most), over what its run cost: of two plans with a
    /// feature as rare, the one whose run recorded half the events is chosen about twice
    /// as often.
    fn weight(&self, entry: &Entry) -> u64 {
        let rarest = self.rarest(entry);
        (rarest * COST_BASE / (COST_BASE + entry.features.events as u64)).max(1)
    }

    /// The weight of a plan's rarest feature.
    fn rarest(&self, entry: &Entry) -> u64 {
        let rarity = |id: &u32| {
            let weight = WEIGHT / self.hits.get(id).copied().unwrap_or(1).max(1);
            if is_goal(*id) {
                weight * GOAL
            } else {
                weight
            }
        };
        entry.features.ids.iter().map(rarity).max().unwrap_or(0).max(1)
    }

    /// Every kept plan's weight, in the order kept: what `choose` takes, worked out once
    /// for a generation (the corpus does not change while one is made).
    pub fn weights(&self) -> Vec<u64> {
        self.entries.iter().map(|entry| self.weight(entry)).collect()
    }

    /// A kept plan, chosen with chances in proportion to its weight in `weights`.
    pub fn choose(&self, weights: &[u64], rng: &mut ChaCha8Rng) -> Option<&Entry> {
        self.choose_at(weights, rng).map(|at| &self.entries[at])
    }

    /// `choose`, as the plan's place in the corpus.
    pub fn choose_at(&self, weights: &[u64], rng: &mut ChaCha8Rng) -> Option<usize> {
        let total: u64 = weights.iter().sum();
        if total == 0 {
            return None;
        }
        let mut point = rng.gen_range(0..total);
        for (at, weight) in weights.iter().enumerate() {
            if point < *weight {
                return Some(at);
            }
            point -= weight;
        }
        Some(self.entries.len() - 1)
    }

    /// The kept plan at `at`.
    pub fn entry(&self, at: usize) -> &Entry {
        &self.entries[at]
    }

    /// Every kept plan's weight as a branch's parent: its weight times its energy times
    /// how rare its fired faults make it under `rates` (`Entry::rarity`: a plan whose run
    /// had a crash fire stands for two hundred production runs, one with no fault for one).
    /// A plan starts with `ENERGY`; each branch of it that was kept adds `FIND` to it, and
    /// every `TIRING` branches made from it divide it once more, so that the search branches
    /// on from the moments whose branches keep reaching new situations and leaves the ones
    /// whose branches stopped.
    pub fn branch_weights(&self, rates: Rates) -> Vec<u64> {
        self.entries
            .iter()
            .map(|entry| {
                let energy = ENERGY.saturating_add(FIND.saturating_mul(u64::from(entry.finds)));
                let weight =
                    self.weight(entry).saturating_mul(energy) / (ENERGY + u64::from(entry.branches) / TIRING);
                weight.saturating_mul(entry.rarity(rates)).clamp(1, HEAVIEST)
            })
            .collect()
    }

    /// A branch of the plan at `parent` was run: counted, and whether it was kept.
    pub fn credit(&mut self, parent: usize, kept: bool) {
        if let Some(entry) = self.entries.get_mut(parent) {
            entry.branches += 1;
            entry.finds += u32::from(kept);
        }
    }

    /// Any kept plan, each as likely (what a splice takes a fault from).
    pub fn any(&self, rng: &mut ChaCha8Rng) -> Option<&Entry> {
        (!self.entries.is_empty()).then(|| &self.entries[rng.gen_range(0..self.entries.len())])
    }
}
