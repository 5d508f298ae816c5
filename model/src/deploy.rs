//! What a deployment does around its workers, as production would: before any worker
//! starts, each merchant's token counter is placed where the mechanism keeps it; when a
//! Redis instance comes back from a restart, its start-up routine runs (for
//! `fenced-seeded`: seed each missing counter from the highest fence the rows hold).

use crate::ids::MerchantId;
use crate::mechanism::{Mechanism, TokenPolicy};
use crate::store::SqliteRefunds;

/// Counters a deployment sets on a Redis instance through its own admin connection, not a
/// worker's: at start-up, nothing else is running.
pub trait CounterAdmin {
    fn has(&self, key: &str) -> bool;
    fn set(&mut self, key: &str, value: i64);
}

/// Where the refund database's token sequences are set, whichever database it is.
pub trait SequenceAdmin {
    type Error;
    /// Sets where the merchant's sequence stands (the next token is `value + 1`).
    fn set_sequence(&self, merchant: MerchantId, value: i64) -> Result<(), Self::Error>;
}

impl SequenceAdmin for SqliteRefunds {
    type Error = rusqlite::Error;

    fn set_sequence(&self, merchant: MerchantId, value: i64) -> rusqlite::Result<()> {
        SqliteRefunds::set_sequence(self, merchant, value)
    }
}

impl Mechanism {
    /// Places each merchant's counter where this mechanism keeps its tokens: on the first
    /// Redis instance (each of `workers` workers' own, when the counter's key names the
    /// worker), in the refund database's sequence, or nowhere.
    pub fn place_counters<S: SequenceAdmin>(
        self,
        counters: &[(MerchantId, i64)],
        workers: u32,
        redis: &mut impl CounterAdmin,
        store: &S,
    ) -> Result<(), S::Error> {
        for &(merchant, value) in counters {
            match self.spec().tokens {
                TokenPolicy::RedisIncr => {
                    for key in self.spec().counter_keys(merchant, workers) {
                        redis.set(&key, value);
                    }
                }
                TokenPolicy::DbSequence => store.set_sequence(merchant, value)?,
                TokenPolicy::None => {}
            }
        }
        Ok(())
    }

    /// The start-up routine of Redis instance `instance` after a restart. Returns the
    /// counters it seeded, with their values, in merchant order.
    pub fn on_redis_start(
        self,
        instance: u8,
        merchants: impl IntoIterator<Item = MerchantId>,
        workers: u32,
        redis: &mut impl CounterAdmin,
        max_fence: impl Fn(MerchantId) -> Option<i64>,
    ) -> Vec<(String, i64)> {
        if !self.spec().seed_counter_on_restart || instance != 0 {
            return Vec::new();
        }
        let mut seeded = Vec::new();
        for merchant in merchants {
            for key in self.spec().counter_keys(merchant, workers) {
                if redis.has(&key) {
                    continue;
                }
                let value = max_fence(merchant).unwrap_or(0);
                redis.set(&key, value);
                seeded.push((key, value));
            }
        }
        seeded
    }
}
