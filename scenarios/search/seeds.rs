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
}

#[cfg(test)]
mod tests {
    use super::*;

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
