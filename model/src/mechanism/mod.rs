//! The mechanisms a worker can use to protect its writes, one small module each, behind
//! one type. A mechanism is data: where the worker's token comes from (if anywhere), how
//! it holds and releases its lease, and what it does when a write matches no row.

pub mod from_file;

pub use from_file::FromFile;

use crate::ids::{MerchantId, Token, WorkerId};
use crate::refund::WriteGuard;
use crate::store::Statements;

/// Where a holder's token comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenPolicy {
    /// No token: writes carry no predicate on the fence.
    None,
    /// `INCR fence:settle:<merchant>` on Redis, right after the lease is granted.
    RedisIncr,
    /// A per-merchant sequence in the refund database itself.
    DbSequence,
}

/// What a worker does when a claim or confirm updates zero rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnRejectedWrite {
    /// Skip the row and go on: nothing tells the worker its lease is gone.
    Skip,
    /// Give the batch up (a fence violation: never retry with the same token).
    Abandon,
}

/// How the lease is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseKind {
    /// One Redis instance.
    Single,
    /// Five instances; the lease needs a majority within its validity time.
    Redlock,
}

/// Redlock's allowance for clock drift between instances: 1% of the TTL plus 2 ms. Both a
/// lease's validity (`lease.rs`) and a restarted instance's time out of service leave it.
pub fn drift_ms(ttl_ms: u64) -> u64 {
    ttl_ms / 100 + 2
}

/// How the lease is given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleasePolicy {
    /// Delete the key only if it still holds our value.
    CompareAndDelete,
    /// `DEL key`, whoever holds it now.
    PlainDel,
}

/// The lease's release script, as Redis runs it (`EVAL`): `KEYS[1]` is the lock, `ARGV[1]`
/// the holder's value; it deletes the lock only if it still holds that value.
pub const COMPARE_AND_DELETE_LUA: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// The lease's renewal script: `ARGV[2]` is the new TTL in milliseconds; it re-arms the
/// TTL only if the lock still holds the holder's value.
pub const COMPARE_AND_EXTEND_LUA: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// A release that deletes the lock whoever holds it (what `ReleasePolicy::PlainDel` sends
/// as a `DEL`).
pub const PLAIN_DEL_LUA: &str = "return redis.call('del', KEYS[1])";

/// Where every built-in mechanism holds its lease on Redis.
pub const LEASE_KEY: &str = "lock:settle:{merchant}";

/// Where every built-in mechanism counts its tokens on Redis.
pub const COUNTER_KEY: &str = "fence:settle:{merchant}";

/// How often the built-in renewing mechanisms renew: three times per TTL.
pub const RENEWALS_PER_TTL: u32 = 3;

/// The Lua a mechanism's lease runs on Redis: each returns 1 when it did its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scripts {
    /// Takes the lease, if the mechanism takes it with a script of its own: `KEYS[1]` the
    /// lease's key, `ARGV[1]` the worker's value, `ARGV[2]` the TTL in milliseconds; it
    /// returns 1 (or `OK`) when it took the lease, 0 (or nil) when it did not. `None`: the
    /// lease is taken with `SET key value NX PX ttl`, as every built-in takes it.
    pub acquire: Option<&'static str>,
    /// Gives the lease back (and gives back a grant the lease does not keep).
    pub release: &'static str,
    /// Renews the lease: `ARGV[2]` is the TTL in milliseconds.
    pub renew: &'static str,
}

/// What a mechanism promises about the rows and the money, which the suite holds it to:
/// a safe mechanism must keep every invariant over the random suite, an unsafe one must be
/// caught breaking one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Safety {
    /// Nothing stops a holder whose lease ended from writing.
    Unsafe,
    /// Safe as long as Redis keeps the token counter: a counter lost with a restart, or
    /// sent back by a failover to a replica that had not received its last increments, is not.
    UnlessCounterLost,
    /// Safe through a failover (each grant and each token is on the replica before it is
    /// used), as long as a restart keeps the counter.
    UnlessRestartLosesCounter,
    /// Safe under every fault the suite injects.
    Safe,
}

/// What a mechanism is, in data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: &'static str,
    pub promise: &'static str,
    /// What it breaks with no fault at all, if anything: the weakness a batch that
    /// outlasts its TTL shows by itself. `None`: nothing may break without a fault, and a
    /// test holds it to that over many random worlds.
    pub without_faults: Option<&'static str>,
    pub safety: Safety,
    pub tokens: TokenPolicy,
    pub on_rejected_write: OnRejectedWrite,
    /// What a fenced worker does when a write finds its row already `sent` by another
    /// holder (no newer fence turned it away). The article's rule counts every write that
    /// updated nothing as a fence violation and abandons; its mechanisms keep that rule.
    pub on_row_already_sent: OnRejectedWrite,
    pub lease: LeaseKind,
    pub release: ReleasePolicy,
    /// How many times per TTL a background task renews the lease (every `TTL / n`); 0:
    /// never.
    pub renewals_per_ttl: u32,
    /// `GET` the lock key before every write and abandon if it is not ours.
    pub check_before_write: bool,
    /// Read the lease again once the token is taken, and give the batch up if it is no
    /// longer ours: a step beyond the article's four, which every built-in that takes a
    /// token makes (a holder held up between its lease and its token could otherwise draw a
    /// token newer than its successor's and fence the live holder out).
    pub check_after_token: bool,
    /// When Redis starts, seed the token counter from `MAX(fence)` of the merchant's rows.
    pub seed_counter_on_restart: bool,
    /// The Redis key the lease is held at: `{merchant}` and `{worker}` are put in
    /// (`lock:settle:{merchant}` for every built-in; a key that names the worker gives each
    /// worker a lease of its own, and none keeps another out).
    pub lease_key: &'static str,
    /// The Redis key a `RedisIncr` token is counted at: `{merchant}` and `{worker}` are
    /// put in (`fence:settle:{merchant}` for every built-in; a key that names the worker
    /// gives each worker a counter of its own).
    pub counter_key: &'static str,
    /// Whether the second store (the settlement ledger) is fenced too, with its own fence
    /// column and the same token, when the mechanism takes one. `false`: its postings carry
    /// no predicate however carefully the refund rows are fenced.
    pub fence_settlement: bool,
    /// `WAIT` for the replicas after the lease's `SET` and the token's `INCR`, and use
    /// neither until every replica has it.
    pub wait_replica: bool,
    /// The scripts the lease runs (a `PlainDel` release sends `DEL` instead of its script).
    pub scripts: Scripts,
    /// The SQL its workers run.
    pub statements: Statements,
}

impl Spec {
    /// The key `worker` holds `merchant`'s lease at.
    pub fn lease_key_of(&self, merchant: MerchantId, worker: WorkerId) -> String {
        put_in(self.lease_key, merchant, worker)
    }

    /// Every key a merchant's lease may be held at, one per worker of `workers` when the key
    /// names the worker, in worker order.
    pub fn lease_keys(&self, merchant: MerchantId, workers: u32) -> Vec<String> {
        every_worker(self.lease_key, merchant, workers)
    }

    /// The counter `worker`'s token for `merchant` is taken from.
    pub fn counter_key_of(&self, merchant: MerchantId, worker: WorkerId) -> String {
        put_in(self.counter_key, merchant, worker)
    }

    /// Every counter a merchant's tokens may be taken from, one per worker of `workers`
    /// when the key names the worker, in worker order.
    pub fn counter_keys(&self, merchant: MerchantId, workers: u32) -> Vec<String> {
        every_worker(self.counter_key, merchant, workers)
    }

    /// The shape most mechanisms share: one instance, compare-and-delete, nothing extra.
    pub const BASE: Spec = Spec {
        name: "",
        promise: "",
        without_faults: None,
        safety: Safety::Unsafe,
        tokens: TokenPolicy::None,
        on_rejected_write: OnRejectedWrite::Skip,
        on_row_already_sent: OnRejectedWrite::Skip,
        lease: LeaseKind::Single,
        release: ReleasePolicy::CompareAndDelete,
        renewals_per_ttl: 0,
        check_before_write: false,
        check_after_token: true,
        seed_counter_on_restart: false,
        lease_key: LEASE_KEY,
        counter_key: COUNTER_KEY,
        fence_settlement: true,
        wait_replica: false,
        scripts: Scripts { acquire: None, release: COMPARE_AND_DELETE_LUA, renew: COMPARE_AND_EXTEND_LUA },
        statements: Statements::SQLITE,
    };
}

/// A key of `template` with the merchant and the worker put in.
fn put_in(template: &str, merchant: MerchantId, worker: WorkerId) -> String {
    template.replace("{merchant}", &merchant.to_string()).replace("{worker}", &worker.to_string())
}

/// `template`'s keys for a merchant, one per worker when it names the worker.
fn every_worker(template: &str, merchant: MerchantId, workers: u32) -> Vec<String> {
    let mut keys: Vec<String> =
        (0..workers.max(1)).map(|w| put_in(template, merchant, WorkerId(w))).collect();
    keys.dedup();
    keys
}

/// The registry: one line per mechanism, `Variant => module`. The module holds the
/// mechanism's `SPEC`; this line declares the module, the variant, its place in
/// `Mechanism::ALL` and its spec, so adding a mechanism is a new file and one line here.
macro_rules! mechanisms {
    ($($variant:ident => $module:ident,)+) => {
        $(pub mod $module;)+

        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Mechanism {
            $($variant,)+
            /// A mechanism a team described in a file, read once and kept for the process.
            File(FromFile),
        }

        impl Mechanism {
            /// The built-in mechanisms (a file's is not among them).
            pub const ALL: [Mechanism; [$(Mechanism::$variant,)+].len()] = [$(Mechanism::$variant,)+];

            pub fn spec(self) -> &'static Spec {
                match self {
                    $(Mechanism::$variant => &$module::SPEC,)+
                    Mechanism::File(file) => &file.0.spec,
                }
            }
        }
    };
}

mechanisms! {
    TtlOnly => ttl_only,
    TtlRenewal => ttl_renewal,
    CheckBeforeWrite => check_before_write,
    Fenced => fenced,
    FencedSeeded => fenced_seeded,
    FencedDbSequence => fenced_db_sequence,
    Redlock => redlock,
    PlainDelRelease => plain_del_release,
    FencedRenewal => fenced_renewal,
    RedlockFenced => redlock_fenced,
    FencedOneStore => fenced_one_store,
    FencedWaitReplica => fenced_wait_replica,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// How many Redis instances the lease lives on: five for Redlock, else one.
    pub fn redis_instances(self) -> usize {
        match self.spec().lease {
            LeaseKind::Single => 1,
            LeaseKind::Redlock => 5,
        }
    }

    /// How long a restarted Redis instance stays out of service: the deployment's own
    /// restart time, and under Redlock at least the TTL and its drift allowance, as the
    /// algorithm asks of an instance that may have lost its keys (back sooner, it could
    /// grant a key to a second majority while the first holder still counts on it).
    pub fn restart_down_ms(self, restart_ms: u64, ttl_ms: u64) -> u64 {
        match self.spec().lease {
            LeaseKind::Single => restart_ms,
            LeaseKind::Redlock => restart_ms.max(ttl_ms + drift_ms(ttl_ms)),
        }
    }

    /// The guard this mechanism puts on every write of a holder with `token`.
    pub fn guard(self, token: Option<Token>) -> WriteGuard {
        match (self.spec().tokens, token) {
            (TokenPolicy::None, _) | (_, None) => WriteGuard::Unfenced,
            (_, Some(t)) => WriteGuard::Fence(t),
        }
    }
}

impl Mechanism {
    /// The guard this mechanism puts on a holder's writes to the settlement ledger.
    pub fn settlement_guard(self, token: Option<Token>) -> WriteGuard {
        match self.spec().fence_settlement {
            true => self.guard(token),
            false => WriteGuard::Unfenced,
        }
    }
}

impl Mechanism {
    /// The text of the file the mechanism was read from; `None` for a built-in.
    pub fn file_text(self) -> Option<&'static str> {
        match self {
            Mechanism::File(file) => Some(file.0.text),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused_with_the_choices() {
        for m in Mechanism::ALL {
            assert_eq!(m.name().parse::<Mechanism>(), Ok(m));
            assert!(!m.spec().promise.is_empty());
        }
        let err = "fencing".parse::<Mechanism>().unwrap_err();
        assert!(err.contains("unknown mechanism 'fencing'"), "{err}");
        assert!(err.contains("ttl-only") && err.contains("fenced-db-sequence"), "{err}");
    }

    #[test]
    fn only_a_token_taking_mechanism_fences_its_writes() {
        assert_eq!(Mechanism::TtlOnly.guard(Some(Token(3))), WriteGuard::Unfenced);
        assert_eq!(Mechanism::Redlock.guard(Some(Token(3))), WriteGuard::Unfenced);
        assert_eq!(Mechanism::Fenced.guard(Some(Token(3))), WriteGuard::Fence(Token(3)));
        assert_eq!(Mechanism::FencedDbSequence.guard(Some(Token(3))), WriteGuard::Fence(Token(3)));
    }

    #[test]
    fn fenced_one_store_fences_the_rows_and_leaves_the_settlement_ledger_unfenced() {
        let one = Mechanism::FencedOneStore;
        assert_eq!(one.guard(Some(Token(3))), WriteGuard::Fence(Token(3)));
        assert_eq!(one.settlement_guard(Some(Token(3))), WriteGuard::Unfenced);
        assert_eq!(Mechanism::Fenced.settlement_guard(Some(Token(3))), WriteGuard::Fence(Token(3)));
        assert_eq!(Mechanism::TtlOnly.settlement_guard(Some(Token(3))), WriteGuard::Unfenced);
    }
}
