//! The guided search: instead of drawing every run's world and plan afresh, it keeps the
//! plans whose runs reached something no earlier run had (`corpus`), and makes most of its
//! new plans from kept ones (`mutate`: half under the swarm's rates, seven in eight under
//! production's, `mutate::Branching`), so that a race that needs one rare thing and
//! then another is reached from a run that already had the first.
//!
//! It runs in generations of `GENERATION` runs: each generation's plans are made from the
//! corpus as the generation before left it, by a random stream of the search's own, and its
//! results are taken into the corpus in run order. So the runs, and everything said of
//! them, are the same whatever the number of threads and whenever each run finished.

pub mod corpus;
pub mod features;
pub mod mutate;
pub mod near;

use crate::scenario::production::Rates;
use crate::scenario::{FaultMask, Scenario};
use crate::search::pool::Pool;
use corpus::Corpus;
use features::Features;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Runs made and run at once, each generation's plans made from the corpus as the one
/// before left it. Fixed, not the number of threads, so that the runs do not depend on it.
pub const GENERATION: u64 = 16;

/// The search's own stream of randomness (a seed's streams for its world are numbered
/// from 1, its kinds' from 1,000).
const GUIDED_STREAM: u64 = 1 << 32;

/// What runs next: the seed (its world's and its run's randomness), the scenario, and
/// whether it is the seed's own (fresh) or a plan changed from a kept one.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Its place in the search, from 0.
    pub run: u64,
    pub seed: u64,
    pub scenario: Scenario,
    pub fresh: bool,
    /// The kept plan it branched from (its place in the corpus), if it is a branch.
    pub branched_from: Option<usize>,
}

/// What a run said, for the search: its features, whether it found what the search looks
/// for, and what the caller keeps of it.
pub struct Judged<T> {
    pub features: Features,
    pub found: bool,
    pub result: T,
}

/// A guided search's bounds: fresh seeds from `from`, `runs` runs in all.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub from: u64,
    pub runs: u64,
    pub allowed: FaultMask,
    pub stop_at_first: bool,
    /// The rates the fresh worlds are drawn under: how a branch is made
    /// (`mutate::Branching::of`) and how rare a kept plan's fired faults make it.
    pub rates: Rates,
}

/// The next generation's candidates.
fn generation(
    bounds: &Bounds,
    (first_run, count): (u64, u64),
    corpus: &Corpus,
    rng: &mut ChaCha8Rng,
    next_seed: &mut u64,
    fresh: &impl Fn(u64) -> Result<Scenario, String>,
) -> Result<Vec<Candidate>, String> {
    let mut candidates = Vec::with_capacity(count as usize);
    let (weights, branch_weights) = (corpus.weights(), corpus.branch_weights(bounds.rates));
    let branching = mutate::Branching::of(bounds.rates);
    for run in first_run..first_run + count {
        let made = if corpus.is_empty() || rng.gen_ratio(1, branching.fresh_one_in) {
            None
        } else if rng.gen_ratio(1, branching.branch_one_in) {
            corpus.choose_at(&branch_weights, rng).and_then(|at| {
                let parent = corpus.entry(at);
                let branch = mutate::branch(parent, rng, bounds.allowed, branching);
                branch.map(|(scenario, _)| (parent.seed, scenario, Some(at)))
            })
        } else {
            match (corpus.choose(&weights, rng), corpus.any(rng)) {
                (Some(parent), Some(other)) => mutate::mutate(parent, other, rng, bounds.allowed)
                    .map(|scenario| (parent.seed, scenario, None)),
                _ => None,
            }
        };
        let candidate = match made {
            Some((seed, scenario, branched_from)) => {
                Candidate { run, seed, scenario, fresh: false, branched_from }
            }
            None => {
                let seed = *next_seed;
                *next_seed = seed.checked_add(1).ok_or("the guided search ran past the last seed")?;
                Candidate { run, seed, scenario: fresh(seed)?, fresh: true, branched_from: None }
            }
        };
        candidates.push(candidate);
    }
    Ok(candidates)
}

/// Runs a guided search on the pool: `fresh` builds a seed's own scenario, `work` runs a
/// candidate and judges it. `on_arrival` sees each result as it arrives, `in_order` then
/// in run order (none past the first found, with `stop_at_first`). Returns the runs made.
pub fn search<T: Send>(
    bounds: &Bounds,
    pool: &Pool<'_>,
    fresh: impl Fn(u64) -> Result<Scenario, String> + Sync,
    work: impl Fn(&Candidate) -> Result<Judged<T>, String> + Sync,
    mut on_arrival: impl FnMut(&Candidate, &mut T),
    mut in_order: impl FnMut(&Candidate, T),
) -> Result<u64, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(bounds.from);
    rng.set_stream(GUIDED_STREAM);
    let (mut corpus, mut next_seed, mut done) = (Corpus::default(), bounds.from, 0);
    while done < bounds.runs {
        let count = GENERATION.min(bounds.runs - done);
        let candidates = generation(bounds, (done, count), &corpus, &mut rng, &mut next_seed, &fresh)?;
        let mut found = false;
        let ran = pool.run(
            0..count,
            |judged: &Judged<T>| bounds.stop_at_first && judged.found,
            |at| work(&candidates[at as usize]),
            |at, judged| on_arrival(&candidates[at as usize], &mut judged.result),
            |at, judged| {
                let candidate = &candidates[at as usize];
                found |= judged.found;
                let kept = corpus.consider(candidate.seed, &candidate.scenario, judged.features);
                if let Some(parent) = candidate.branched_from {
                    corpus.credit(parent, kept);
                }
                in_order(candidate, judged.result);
            },
        )?;
        done += ran;
        if ran < count || (found && bounds.stop_at_first) {
            break;
        }
    }
    Ok(done)
}
