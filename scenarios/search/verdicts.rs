//! The verdicts of many seeds, kept small enough to commit: for each mechanism, gateway
//! mode and invariant, how many seeds broke it and a digest of which ones. The matrix
//! writes them into the guarantees report over seeds 1 to `VERDICT_SEEDS`, and a test runs
//! the same seeds and compares, so that a change meant to leave every verdict alone (a
//! cheaper store, a faster runtime) is held to it seed by seed, not only on the seeds the
//! report's table shows.
//!
//! The digest is the wrapping sum of a 64-bit mix of each seed: the same set gives the same
//! digest whatever order or shards its seeds came in, and a set with one seed more, less or
//! other gives another (barring a 64-bit collision).

use crate::search::explore::SeedResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Seeds per mechanism and gateway mode whose verdicts the committed report keeps.
pub const VERDICT_SEEDS: u64 = 2_000;

/// The seeds that broke one invariant: how many, and the digest of which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedSet {
    pub count: u64,
    pub digest: u64,
}

impl SeedSet {
    pub fn add(&mut self, seed: u64) {
        self.count += 1;
        self.digest = self.digest.wrapping_add(mix(seed));
    }

    /// The union with a set of other seeds (another shard's).
    pub fn absorb(&mut self, other: SeedSet) {
        self.count += other.count;
        self.digest = self.digest.wrapping_add(other.digest);
    }
}

/// One mechanism and gateway mode over its seeds: per invariant, the seeds that broke it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    pub seeds: u64,
    pub broken: BTreeMap<String, SeedSet>,
}

impl Verdicts {
    /// Counts one seed's verdict.
    pub fn add(&mut self, result: &SeedResult) {
        self.seeds += 1;
        for invariant in &result.violations {
            self.broken.entry((*invariant).to_owned()).or_default().add(result.seed);
        }
    }

    /// Adds the verdicts of other seeds (another shard's).
    pub fn absorb(&mut self, other: &Verdicts) {
        self.seeds += other.seeds;
        for (invariant, set) in &other.broken {
            self.broken.entry(invariant.clone()).or_default().absorb(*set);
        }
    }
}

/// A seed spread over 64 bits (the finaliser of a well-known splittable generator), so that
/// neighbouring seeds share no bits in the sum.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(seeds: &[u64]) -> SeedSet {
        let mut set = SeedSet::default();
        seeds.iter().for_each(|&seed| set.add(seed));
        set
    }

    #[test]
    fn a_set_has_one_digest_whatever_the_order_or_the_shards() {
        let whole = set(&[3, 9, 27, 81]);
        assert_eq!(set(&[81, 3, 27, 9]), whole);
        let mut merged = set(&[27, 81]);
        merged.absorb(set(&[3, 9]));
        assert_eq!(merged, whole);
    }

    #[test]
    fn a_seed_more_less_or_other_moves_the_digest() {
        let whole = set(&[3, 9, 27, 81]);
        for other in [&[3, 9, 27][..], &[3, 9, 27, 81, 82], &[3, 9, 27, 80], &[2, 10, 27, 81]] {
            assert_ne!(set(other).digest, whole.digest, "{other:?}");
        }
    }
}
