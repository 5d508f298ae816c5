//! Seed ranges, checked once: every command that runs many seeds takes its range here, so
//! that no range runs past the last seed and no arithmetic on seeds wraps.

use std::ops::Range;

/// `count` seeds from `from`: `from`, `from + 1`, ..., every one a valid seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    pub from: u64,
    pub count: u64,
}

impl SeedRange {
    /// The range, or a message naming the largest count that fits from `from`.
    pub fn new(from: u64, count: u64) -> Result<SeedRange, String> {
        if count == 0 {
            return Err("--seeds must be at least 1".to_owned());
        }
        if from.checked_add(count - 1).is_none() {
            // from is at least 1 here: from seed 0 every count fits
            let largest = u64::MAX - from + 1;
            return Err(format!(
                "--seeds {count} from seed {from} runs past the last seed ({}): the largest valid --seeds from {from} is {largest}",
                u64::MAX
            ));
        }
        Ok(SeedRange { from, count })
    }

    /// The seeds `1..=count`.
    pub fn first(count: u64) -> Result<SeedRange, String> {
        SeedRange::new(1, count)
    }

    /// The range's positions, `0..count`: what a pool runs (a position always fits).
    pub fn positions(self) -> Range<u64> {
        0..self.count
    }

    /// The seed at `position` of the range.
    pub fn seed(self, position: u64) -> u64 {
        self.from + position
    }

    pub fn last(self) -> u64 {
        self.from + (self.count - 1)
    }

    /// The share of shard `shard` of `of` (from 1): the range cut into `of` contiguous
    /// blocks that differ in length by at most one, so that the shards together run every
    /// seed once, in the same order, and shard 1's seeds come first.
    pub fn shard(self, shard: Shard) -> Result<SeedRange, String> {
        if shard.of > self.count {
            return Err(format!("{} shards of {} seed(s): every shard needs a seed", shard.of, self.count));
        }
        let cut = |k: u64| (u128::from(self.count) * u128::from(k) / u128::from(shard.of)) as u64;
        let (start, end) = (cut(shard.index - 1), cut(shard.index));
        Ok(SeedRange { from: self.from + start, count: end - start })
    }
}

/// One machine's part of a search: shard `index` of `of`, counted from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u64,
    pub of: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `K/N`: shard K of N, with 1 <= K <= N.
    fn from_str(text: &str) -> Result<Shard, String> {
        let expected =
            || format!("expected a shard as K/N with 1 <= K <= N (shard 7 of 50: 7/50), got '{text}'");
        let (index, of) = text.split_once('/').ok_or_else(expected)?;
        let (index, of) = (
            index.trim().parse::<u64>().map_err(|_| expected())?,
            of.trim().parse::<u64>().map_err(|_| expected())?,
        );
        if index == 0 || index > of {
            return Err(expected());
        }
        Ok(Shard { index, of })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_run_every_seed_of_the_range_once_in_order() {
        for (from, count, of) in [(1, 10, 3), (1, 1000, 50), (7, 5, 5), (u64::MAX - 99, 100, 7), (0, 1, 1)] {
            let range = SeedRange::new(from, count).unwrap();
            let mut seen = Vec::new();
            for index in 1..=of {
                let share = range.shard(Shard { index, of }).unwrap();
                assert!(share.count == count / of || share.count == count / of + 1, "even shares");
                seen.extend(share.positions().map(|p| share.seed(p)));
            }
            let all: Vec<u64> = range.positions().map(|p| range.seed(p)).collect();
            assert_eq!(seen, all, "{of} shards of {count} seeds from {from}");
        }
        assert!(SeedRange::new(1, 3).unwrap().shard(Shard { index: 1, of: 4 }).is_err());
        assert_eq!("7/50".parse::<Shard>(), Ok(Shard { index: 7, of: 50 }));
        for bad in ["0/4", "5/4", "4", "a/b", "-1/4", "1/0"] {
            assert!(bad.parse::<Shard>().unwrap_err().contains("K/N"), "{bad}");
        }
    }

    #[test]
    fn a_range_reaches_the_last_seed_and_not_one_past_it() {
        let last = SeedRange::new(u64::MAX, 1).unwrap();
        assert_eq!((last.seed(0), last.last()), (u64::MAX, u64::MAX));
        let tail = SeedRange::new(u64::MAX - 4, 5).unwrap();
        assert_eq!(tail.positions().map(|p| tail.seed(p)).next_back(), Some(u64::MAX));
        let past = SeedRange::new(u64::MAX - 2, 5).unwrap_err();
        assert!(past.contains("the largest valid --seeds from 18446744073709551613 is 3"), "{past}");
        assert!(SeedRange::new(u64::MAX, 2).unwrap_err().contains("is 1"));
        assert_eq!(SeedRange::new(0, u64::MAX).unwrap().last(), u64::MAX - 1);
        assert!(SeedRange::new(5, 0).is_err());
    }
}
