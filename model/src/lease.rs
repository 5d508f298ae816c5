//! Lease and token clients over Redis instances: one instance, or Redlock's majority of
//! five within a validity time. Production code; the instances may be real or simulated.
//!
//! Redlock is used as its algorithm asks, with these choices:
//! - the validity of a lease is the TTL less the time its acquisition took (measured on the
//!   worker's own clock, from before the first `SET`) less the drift allowance (1% of the
//!   TTL plus 2 ms); a majority granted with no validity left is given back at once;
//! - an extension re-arms the TTL on each instance that still holds our value (compare and
//!   extend) and counts only with a majority, its validity computed the same way from
//!   before its first command; a failed one leaves the old validity running out;
//! - `holds` asks no instance: it says whether more than `validity_margin_ms` of validity
//!   is left by the worker's clock (the worker asks before each write);
//! - the lease is released on every instance, whatever the majority was;
//! - a vote that splits the instances (some granted, no majority) is tried again after a
//!   delay drawn from the lease's value, at most `SPLIT_VOTE_TRIES` rounds in all.

use crate::ids::{MerchantId, Token, WorkerId};
use crate::mechanism::{drift_ms, LeaseKind, Mechanism, Scripts, Spec, TokenPolicy};
use crate::ports::{BackendError, Clock, LeaseStore, RedisInstance, RefundStore, TokenSource};

/// The instances a lease is held on and how.
pub struct LeaseClient<I, C> {
    pub kind: LeaseKind,
    /// Wait for the replicas after each grant, and keep the lease only once they have it.
    pub wait_replica: bool,
    /// The release and renewal scripts it runs on each instance.
    pub scripts: Scripts,
    pub instances: Vec<I>,
    pub clock: C,
    /// Redlock: each lease held (key, value), when it stops being valid by the worker's
    /// clock, and its TTL.
    validities: std::sync::Mutex<Vec<(String, String, Validity)>>,
}

impl<I, C> LeaseClient<I, C> {
    /// The lease client `mechanism` uses, over `instances` (as many as it asks for).
    pub fn new(mechanism: Mechanism, instances: Vec<I>, clock: C) -> LeaseClient<I, C> {
        assert_eq!(
            instances.len(),
            mechanism.redis_instances(),
            "{mechanism} holds its lease on that many instances"
        );
        let spec = mechanism.spec();
        LeaseClient {
            kind: spec.lease,
            wait_replica: spec.wait_replica,
            scripts: spec.scripts,
            instances,
            clock,
            validities: Default::default(),
        }
    }

    /// Redlock: the lease (key, value) is valid as `validity` says; `None` forgets it.
    fn set_validity(&self, key: &str, value: &str, validity: Option<Validity>) {
        let mut leases = self.validities.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = leases.iter().position(|(k, v, _)| (k.as_str(), v.as_str()) == (key, value));
        match (held, validity) {
            (Some(at), Some(validity)) => leases[at].2 = validity,
            (Some(at), None) => {
                leases.swap_remove(at);
            }
            (None, Some(validity)) => leases.push((key.to_owned(), value.to_owned(), validity)),
            (None, None) => {}
        }
    }

    fn validity(&self, key: &str, value: &str) -> Option<Validity> {
        let leases = self.validities.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        leases
            .iter()
            .find(|(k, v, _)| (k.as_str(), v.as_str()) == (key, value))
            .map(|(_, _, validity)| *validity)
    }

    fn majority(&self) -> usize {
        self.instances.len() / 2 + 1
    }

    fn first(&self) -> &I {
        &self.instances[0]
    }
}

/// A Redlock lease's validity: until when, by the worker's clock, from a start (the
/// acquisition's or the last extension's) with this TTL.
#[derive(Clone, Copy, Debug)]
struct Validity {
    until_ms: u64,
    ttl_ms: u64,
}

impl Validity {
    /// Valid from `start_ms` with `ttl_ms`, after `elapsed_ms` spent getting a majority:
    /// none if the drift allowance and the time spent leave nothing.
    fn after(start_ms: u64, elapsed_ms: u64, ttl_ms: u64) -> Option<Validity> {
        (ttl_ms.saturating_sub(elapsed_ms + drift_ms(ttl_ms)) > 0)
            .then(|| Validity { until_ms: start_ms + ttl_ms - drift_ms(ttl_ms), ttl_ms })
    }
}

/// How one round of a Redlock acquisition ended.
enum Vote {
    /// A majority, with validity left.
    Won,
    /// Some instances granted the key, too few or too late: others asked at the same
    /// time, or an instance failed.
    Split,
    /// No instance granted it: another holder is live.
    Lost,
}

/// How many rounds a Redlock acquisition takes when its votes split. Contenders that ask
/// at the same instant (jobs of one merchant handed out together, as a queue does after
/// their visibility timeouts ran out together) can split every instance between them
/// and, coming back together, split them again for ever; the algorithm asks each to try
/// again after a random delay.
pub const SPLIT_VOTE_TRIES: u32 = 3;

/// The delay before another round after a split vote: up to a fifth of the TTL, drawn
/// from the lease's value (unique to the worker and its acquisition) and the round, so
/// that contenders come back apart, the same in every run of a seed.
pub fn split_vote_delay_ms(value: &str, attempt: u32, ttl_ms: u64) -> u64 {
    // FNV-1a: a fixed hash, so that the delay does not depend on the build's hasher
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.bytes().chain(attempt.to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    1 + hash % (ttl_ms / 5).max(1)
}

impl<I: RedisInstance + Sync, C: Clock + Sync> LeaseClient<I, C> {
    /// Asks one instance for the lease: with the mechanism's acquisition script if it has
    /// one, else `SET key value NX PX ttl`.
    async fn take(&self, instance: &I, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        match self.scripts.acquire {
            Some(script) => instance.acquire_script(script, key, value, ttl_ms).await,
            None => instance.set_nx_px(key, value, ttl_ms).await,
        }
    }

    /// One round of a Redlock acquisition: `SET NX PX` on every instance in turn; a
    /// majority with validity left keeps the lease, anything less is given back on every
    /// instance.
    async fn vote(&self, key: &str, value: &str, ttl_ms: u64) -> Vote {
        let start = self.clock.now_ms();
        let mut granted = 0;
        for instance in &self.instances {
            // an instance that fails counts as a refusal
            if self.take(instance, key, value, ttl_ms).await.unwrap_or(false) {
                granted += 1;
            }
        }
        let validity = Validity::after(start, self.clock.now_ms() - start, ttl_ms);
        if granted >= self.majority() && validity.is_some() {
            self.set_validity(key, value, validity);
            return Vote::Won;
        }
        for instance in &self.instances {
            let _ = instance.release_script(self.scripts.release, key, value).await;
        }
        if granted == 0 {
            Vote::Lost
        } else {
            Vote::Split
        }
    }
}

/// How long a worker waits for the replicas to acknowledge a grant or a token: a fifth of
/// the TTL, so that a lease still has most of its time when the wait ends.
pub fn wait_timeout_ms(ttl_ms: u64) -> u64 {
    (ttl_ms / 5).max(1)
}

/// Whether every replica has what `instance` was last sent (a `WAIT` that fails counts
/// as no).
async fn replicated<I: RedisInstance>(instance: &I, ttl_ms: u64) -> bool {
    instance.wait_replicas(wait_timeout_ms(ttl_ms)).await.unwrap_or(false)
}

/// How much validity a Redlock holder wants left before it writes: a tenth of the TTL, so
/// that a write begun with it left ends, at the latencies the worlds use, before the lease
/// could. A write that takes longer (a pause after the check) is the weakness it keeps.
pub fn validity_margin_ms(ttl_ms: u64) -> u64 {
    ttl_ms / 10
}

impl<I: RedisInstance + Sync, C: Clock + Sync> LeaseStore for LeaseClient<I, C> {
    async fn acquire(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        match self.kind {
            LeaseKind::Single => {
                let granted = self.take(self.first(), key, value, ttl_ms).await?;
                if granted && self.wait_replica && !replicated(self.first(), ttl_ms).await {
                    // a grant the replica may never see is given back, not used
                    let _ = self.first().release_script(self.scripts.release, key, value).await;
                    return Err(BackendError(format!("{key}: the replica did not acknowledge the grant")));
                }
                Ok(granted)
            }
            LeaseKind::Redlock => {
                for attempt in 1..=SPLIT_VOTE_TRIES {
                    match self.vote(key, value, ttl_ms).await {
                        Vote::Won => return Ok(true),
                        Vote::Split if attempt < SPLIT_VOTE_TRIES => {
                            self.clock.sleep_ms(split_vote_delay_ms(value, attempt, ttl_ms)).await;
                        }
                        Vote::Split | Vote::Lost => return Ok(false),
                    }
                }
                Ok(false)
            }
        }
    }

    async fn release(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        self.set_validity(key, value, None);
        let mut any = false;
        for instance in &self.instances {
            any |= instance.release_script(self.scripts.release, key, value).await.unwrap_or(false);
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
        let start = self.clock.now_ms();
        let mut held = 0;
        for instance in &self.instances {
            if instance.renew_script(self.scripts.renew, key, value, ttl_ms).await.unwrap_or(false) {
                held += 1;
            }
        }
        let majority = held >= self.majority();
        if self.kind == LeaseKind::Single || !majority {
            return Ok(majority);
        }
        let validity = Validity::after(start, self.clock.now_ms() - start, ttl_ms);
        if validity.is_some() {
            self.set_validity(key, value, validity);
        }
        Ok(validity.is_some())
    }

    async fn holds(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        if self.kind == LeaseKind::Redlock {
            let now = self.clock.now_ms();
            let validity = self.validity(key, value);
            return Ok(
                validity.is_some_and(|v| v.until_ms.saturating_sub(now) > validity_margin_ms(v.ttl_ms))
            );
        }
        self.confirm_held(key, value).await
    }

    async fn confirm_held(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let mut held = 0;
        for instance in &self.instances {
            if instance.get(key).await.unwrap_or(None).as_deref() == Some(value) {
                held += 1;
            }
        }
        Ok(held >= self.majority())
    }
}

/// Where tokens come from: a Redis counter (with a wait for the replicas after each
/// `INCR`, and the TTL that wait is scaled to), or a sequence in the refund database.
pub enum TokenClient<I, S> {
    Redis { redis: I, wait_replica: Option<u64>, spec: &'static Spec, worker: WorkerId },
    Database(S),
}

impl<I, S> TokenClient<I, S> {
    /// Where `mechanism` takes its tokens from: the database's sequence, or else the
    /// counter on the first Redis instance (a mechanism without tokens never asks); a
    /// mechanism that waits for the replicas waits as long as a lease of `ttl_ms` allows.
    /// `worker`'s counter is the one the mechanism's key names (`Spec::counter_key`).
    pub fn new(mechanism: Mechanism, worker: WorkerId, redis: I, store: S, ttl_ms: u64) -> TokenClient<I, S> {
        let spec = mechanism.spec();
        match spec.tokens {
            TokenPolicy::DbSequence => TokenClient::Database(store),
            TokenPolicy::None | TokenPolicy::RedisIncr => {
                TokenClient::Redis { redis, wait_replica: spec.wait_replica.then_some(ttl_ms), spec, worker }
            }
        }
    }
}

impl<I: RedisInstance + Sync, S: RefundStore + Sync> TokenSource for TokenClient<I, S> {
    async fn next_token(&self, merchant: MerchantId) -> Result<Token, BackendError> {
        match self {
            TokenClient::Redis { redis, wait_replica, spec, worker } => {
                let key = spec.counter_key_of(merchant, *worker);
                let token = redis.incr(&key).await.map(Token)?;
                match wait_replica {
                    Some(ttl_ms) if !replicated(redis, *ttl_ms).await => {
                        Err(BackendError(format!("{key}: the replica did not acknowledge token {token}")))
                    }
                    Some(_) | None => Ok(token),
                }
            }
            TokenClient::Database(store) => store.next_sequence_token(merchant).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redlock_lease_is_valid_for_its_ttl_less_the_drift_from_before_its_first_set() {
        // TTL 200 ms: drift 4 ms; taken from t=1,000 in 30 ms: valid until 1,196
        let validity = Validity::after(1_000, 30, 200).expect("validity left");
        assert_eq!((validity.until_ms, validity.ttl_ms), (1_196, 200));
        // a majority that took the whole TTL but the drift leaves nothing
        assert!(Validity::after(1_000, 196, 200).is_none());
        assert!(Validity::after(1_000, 195, 200).is_some());
        assert_eq!(validity_margin_ms(200), 20);
    }

    #[test]
    fn a_split_vote_is_tried_again_after_a_delay_that_sets_contenders_apart() {
        let delays: Vec<u64> =
            ["A#3", "B#3", "C#1", "D.2#7"].iter().map(|v| split_vote_delay_ms(v, 1, 2_000)).collect();
        assert!(delays.iter().all(|d| (1..=400).contains(d)), "{delays:?}");
        let mut apart = delays.clone();
        apart.sort_unstable();
        apart.dedup();
        assert_eq!(apart.len(), delays.len(), "each contender waits its own time: {delays:?}");
        assert_ne!(split_vote_delay_ms("A#3", 1, 2_000), split_vote_delay_ms("A#3", 2, 2_000));
        assert_eq!(split_vote_delay_ms("A#3", 1, 2_000), split_vote_delay_ms("A#3", 1, 2_000));
        assert_eq!(split_vote_delay_ms("A#3", 1, 3), 1, "a TTL too short for a fifth still waits");
    }
}
