//! Lease and token clients over Redis instances: one instance, or Redlock's majority of
//! five within a validity time. Production code; the instances may be real or simulated.

use crate::ids::{MerchantId, Token};
use crate::mechanism::{LeaseKind, Mechanism, TokenPolicy};
use crate::ports::{BackendError, Clock, LeaseStore, RedisInstance, RefundStore, TokenSource};

/// The instances a lease is held on and how.
pub struct LeaseClient<I, C> {
    pub kind: LeaseKind,
    pub instances: Vec<I>,
    pub clock: C,
}

impl<I, C> LeaseClient<I, C> {
    /// The lease client `mechanism` uses, over `instances` (as many as it asks for).
    pub fn new(mechanism: Mechanism, instances: Vec<I>, clock: C) -> LeaseClient<I, C> {
        assert_eq!(
            instances.len(),
            mechanism.redis_instances(),
            "{mechanism} holds its lease on that many instances"
        );
        LeaseClient { kind: mechanism.spec().lease, instances, clock }
    }

    fn majority(&self) -> usize {
        self.instances.len() / 2 + 1
    }

    fn first(&self) -> &I {
        &self.instances[0]
    }
}

/// Redlock's allowance for clock drift between instances: 1% of the TTL plus 2 ms.
pub fn drift_ms(ttl_ms: u64) -> u64 {
    ttl_ms / 100 + 2
}

impl<I: RedisInstance + Sync, C: Clock + Sync> LeaseStore for LeaseClient<I, C> {
    async fn acquire(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        match self.kind {
            LeaseKind::Single => self.first().set_nx_px(key, value, ttl_ms).await,
            LeaseKind::Redlock => {
                let start = self.clock.now_ms();
                let mut granted = 0;
                for instance in &self.instances {
                    // an instance that fails counts as a refusal
                    if instance.set_nx_px(key, value, ttl_ms).await.unwrap_or(false) {
                        granted += 1;
                    }
                }
                let elapsed = self.clock.now_ms() - start;
                let valid = ttl_ms.saturating_sub(elapsed + drift_ms(ttl_ms)) > 0;
                if granted >= self.majority() && valid {
                    return Ok(true);
                }
                for instance in &self.instances {
                    let _ = instance.compare_and_delete(key, value).await;
                }
                Ok(false)
            }
        }
    }

    async fn release(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let mut any = false;
        for instance in &self.instances {
            any |= instance.compare_and_delete(key, value).await.unwrap_or(false);
        }
        Ok(any)
    }

    async fn delete(&self, key: &str) -> Result<bool, BackendError> {
        let mut any = false;
        for instance in &self.instances {
            any |= instance.del(key).await.unwrap_or(false);
        }
        Ok(any)
    }

    async fn extend(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let mut held = 0;
        for instance in &self.instances {
            if instance.compare_and_extend(key, value, ttl_ms).await.unwrap_or(false) {
                held += 1;
            }
        }
        Ok(held >= self.majority())
    }

    async fn holds(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let mut held = 0;
        for instance in &self.instances {
            if instance.get(key).await.unwrap_or(None).as_deref() == Some(value) {
                held += 1;
            }
        }
        Ok(held >= self.majority())
    }
}

/// Where tokens come from: a Redis counter, or a sequence in the refund database.
pub enum TokenClient<I, S> {
    Redis(I),
    Database(S),
}

impl<I, S> TokenClient<I, S> {
    /// Where `mechanism` takes its tokens from: the database's sequence, or else the
    /// counter on the first Redis instance (a mechanism without tokens never asks).
    pub fn new(mechanism: Mechanism, redis: I, store: S) -> TokenClient<I, S> {
        match mechanism.spec().tokens {
            TokenPolicy::DbSequence => TokenClient::Database(store),
            TokenPolicy::None | TokenPolicy::RedisIncr => TokenClient::Redis(redis),
        }
    }
}

/// The Redis key of a merchant's token counter.
pub fn counter_key(merchant: MerchantId) -> String {
    format!("fence:settle:{merchant}")
}

impl<I: RedisInstance + Sync, S: RefundStore + Sync> TokenSource for TokenClient<I, S> {
    async fn next_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        match self {
            TokenClient::Redis(redis) => redis.incr(&counter_key(merchant)).await.map(Token),
            TokenClient::Database(store) => store.next_sequence_token(merchant).await,
        }
    }
}
