//! The mutant catalogue: realistic bugs in the worker, lock and store code, each planted
//! at run time by wiring a worker's ports differently (`planted`), so that the harness's
//! power to catch bugs can be measured without editing the model. The model itself has
//! no trace of them: a SQL mutant is the store given other statement text, every other
//! mutant a wrapper around one port.

mod planted;

pub use planted::Planted;

use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mutant {
    /// The claim accepts `fence <= token` instead of `fence < token`.
    ClaimFenceAtMost,
    /// The confirm accepts `fence >= token` instead of `fence = token`.
    ConfirmFenceAtLeast,
    /// The confirm has no fence predicate at all.
    ConfirmWithoutFence,
    /// A claim that updated no row is treated as a success.
    ClaimRowCountIgnored,
    /// A worker keeps the token it took for a job and reuses it when the job comes back
    /// (jobs are one per merchant, so the token is kept per merchant).
    TokenPerJob,
    /// A worker takes one token and reuses it for every batch.
    TokenPerWorker,
    /// The lease is released with a plain `DEL`.
    ReleaseWithDel,
    /// Every worker uses the same lock value.
    SharedLockValue,
    /// The renewal script sets the key again when it finds it missing.
    ExtendRecreates,
    /// A restarted Redis's counter is not seeded from `MAX(fence)`.
    NoReseedAfterRestart,
    /// The idempotency key is made per attempt instead of per refund.
    KeyPerAttempt,
    /// The claim also accepts rows already `sent`.
    ClaimAcceptsSent,
    /// The consumer acks a job as soon as it is delivered, not when its batch is done
    /// (a queue client's auto-ack): a worker that dies mid-batch takes the job with it.
    AckOnReceive,
    /// The release checks the value with `GET`, then deletes with a separate `DEL`: the
    /// key can change hands in between.
    ReleaseByGetThenDel,
    /// The lease is taken with `SETNX` and given its TTL by a second command: a process
    /// that dies in between leaves a lock that never expires.
    AcquireSetnxThenPexpire,
    /// The renewal passes the TTL in milliseconds where seconds are expected: a holder that
    /// dies after renewing blocks the merchant a thousand times longer.
    ExtendTtlAsSeconds,
    /// The claim compares fences as text: `'9' < '10'` is false, `'10' < '9'` true.
    FenceComparedAsText,
    /// The token is kept in a signed 32-bit integer: past 2^31-1 it wraps negative.
    TokenWrapsAt32Bits,
    /// The renewal ignores the script's answer: a holder never learns its lease is gone.
    RenewalIgnoresResult,
    /// The gateway client reports a timeout as a plain failure: the worker sends the call
    /// again without looking up whether the first one paid.
    TimeoutTakenAsFailure,
    /// A refund call that failed is reported as a success: the row is confirmed `sent`
    /// although no money moved.
    FailureTakenAsRefunded,
    /// Each retry of a refund call is sent with a new idempotency key, so a call still on
    /// its way and its retry are two refunds.
    RetryMintsNewKey,
    /// Whether the lease is still held is judged on the worker's own clock (taken at plus
    /// TTL), not asked of Redis, which may have dropped the key sooner.
    ExpiryJudgedOnClientClock,
    /// The TTL is passed in whole seconds: a lease under a second gets an expiry of 0, and
    /// Redis deletes the key at once.
    SubsecondTtlTruncated,
}

impl Mutant {
    pub const ALL: [Mutant; 24] = [
        Mutant::ClaimFenceAtMost,
        Mutant::ConfirmFenceAtLeast,
        Mutant::ConfirmWithoutFence,
        Mutant::ClaimRowCountIgnored,
        Mutant::TokenPerJob,
        Mutant::TokenPerWorker,
        Mutant::ReleaseWithDel,
        Mutant::SharedLockValue,
        Mutant::ExtendRecreates,
        Mutant::NoReseedAfterRestart,
        Mutant::KeyPerAttempt,
        Mutant::ClaimAcceptsSent,
        Mutant::AckOnReceive,
        Mutant::ReleaseByGetThenDel,
        Mutant::AcquireSetnxThenPexpire,
        Mutant::ExtendTtlAsSeconds,
        Mutant::FenceComparedAsText,
        Mutant::TokenWrapsAt32Bits,
        Mutant::RenewalIgnoresResult,
        Mutant::TimeoutTakenAsFailure,
        Mutant::FailureTakenAsRefunded,
        Mutant::RetryMintsNewKey,
        Mutant::ExpiryJudgedOnClientClock,
        Mutant::SubsecondTtlTruncated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::ClaimFenceAtMost => "claim-fence-at-most",
            Mutant::ConfirmFenceAtLeast => "confirm-fence-at-least",
            Mutant::ConfirmWithoutFence => "confirm-without-fence",
            Mutant::ClaimRowCountIgnored => "claim-row-count-ignored",
            Mutant::TokenPerJob => "token-per-job",
            Mutant::TokenPerWorker => "token-per-worker",
            Mutant::ReleaseWithDel => "release-with-del",
            Mutant::SharedLockValue => "shared-lock-value",
            Mutant::ExtendRecreates => "extend-recreates",
            Mutant::NoReseedAfterRestart => "no-reseed-after-restart",
            Mutant::KeyPerAttempt => "key-per-attempt",
            Mutant::ClaimAcceptsSent => "claim-accepts-sent",
            Mutant::AckOnReceive => "ack-on-receive",
            Mutant::ReleaseByGetThenDel => "release-by-get-then-del",
            Mutant::AcquireSetnxThenPexpire => "acquire-setnx-then-pexpire",
            Mutant::ExtendTtlAsSeconds => "extend-ttl-ms-as-seconds",
            Mutant::FenceComparedAsText => "fence-compared-as-text",
            Mutant::TokenWrapsAt32Bits => "token-wraps-at-32-bits",
            Mutant::RenewalIgnoresResult => "renewal-ignores-extend-result",
            Mutant::TimeoutTakenAsFailure => "timeout-taken-as-failure",
            Mutant::FailureTakenAsRefunded => "failure-taken-as-refunded",
            Mutant::RetryMintsNewKey => "retry-mints-new-key",
            Mutant::ExpiryJudgedOnClientClock => "expiry-judged-on-client-clock",
            Mutant::SubsecondTtlTruncated => "subsecond-ttl-truncated",
        }
    }

    /// The mechanism the bug is planted in: one whose code has the buggy line.
    pub fn baseline(self) -> Mechanism {
        match self {
            Mutant::ClaimFenceAtMost => Mechanism::Fenced,
            Mutant::ExtendRecreates | Mutant::ExtendTtlAsSeconds | Mutant::RenewalIgnoresResult => {
                Mechanism::TtlRenewal
            }
            Mutant::NoReseedAfterRestart => Mechanism::FencedSeeded,
            Mutant::ExpiryJudgedOnClientClock => Mechanism::CheckBeforeWrite,
            Mutant::ConfirmFenceAtLeast
            | Mutant::ConfirmWithoutFence
            | Mutant::ClaimRowCountIgnored
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::KeyPerAttempt
            | Mutant::ClaimAcceptsSent
            | Mutant::AckOnReceive
            | Mutant::ReleaseByGetThenDel
            | Mutant::AcquireSetnxThenPexpire
            | Mutant::FenceComparedAsText
            | Mutant::TokenWrapsAt32Bits
            | Mutant::TimeoutTakenAsFailure
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey
            | Mutant::SubsecondTtlTruncated => Mechanism::FencedDbSequence,
        }
    }

    /// The gateway a mutant is searched with. A claim whose row count is ignored lets a stale
    /// worker call the gateway for a row it does not own, and a timeout taken as a failure
    /// sends a paid call again; an idempotent gateway absorbs such a call (which is why the
    /// idempotency key exists), so those searches use one that pays.
    pub fn gateway(self) -> GatewayMode {
        match self {
            Mutant::ClaimRowCountIgnored | Mutant::TimeoutTakenAsFailure => GatewayMode::NonIdempotent,
            Mutant::ClaimFenceAtMost
            | Mutant::ConfirmFenceAtLeast
            | Mutant::ConfirmWithoutFence
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::ExtendRecreates
            | Mutant::NoReseedAfterRestart
            | Mutant::KeyPerAttempt
            | Mutant::ClaimAcceptsSent
            | Mutant::AckOnReceive
            | Mutant::ReleaseByGetThenDel
            | Mutant::AcquireSetnxThenPexpire
            | Mutant::ExtendTtlAsSeconds
            | Mutant::FenceComparedAsText
            | Mutant::TokenWrapsAt32Bits
            | Mutant::RenewalIgnoresResult
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey
            | Mutant::ExpiryJudgedOnClientClock
            | Mutant::SubsecondTtlTruncated => GatewayMode::Idempotent,
        }
    }

    /// The public report the bug is modelled on, by its title and where it was filed; none
    /// for the catalogue's own bugs.
    pub fn source(self) -> Option<&'static str> {
        match self {
            Mutant::AckOnReceive => Some("an ACH gateway's pull request 138, whose maintainer wrote \"We used to ack this early and it caused a bunch of issues\""),
            Mutant::KeyPerAttempt => Some("\"Idempotency key for /payments depends on volatile request fields\" (a payment connector's issue 1305)"),
            Mutant::ExtendRecreates => Some("\"Lock extension via lock method allows extending expired locks\" (a Ruby Redlock client's issue 36)"),
            Mutant::ReleaseByGetThenDel => Some("\"Fix race condition in redis.lock.Lock.release\" (a Python Redis client's pull request 1031)"),
            Mutant::AcquireSetnxThenPexpire => Some("\"Dead lock in redis lock provider\" (a Java scheduler-lock library's issue 65)"),
            Mutant::ExtendTtlAsSeconds => Some("\"extend_life interprets TTL as seconds rather than milliseconds\" (a Ruby Redlock client's issue 44)"),
            Mutant::FenceComparedAsText | Mutant::TokenWrapsAt32Bits => Some("\"Zookeeper sequence node overflow causes perpetual re-election\" (a Python ZooKeeper client's issue 730: sequences compared as text, a signed 32-bit counter)"),
            Mutant::RenewalIgnoresResult => Some("\"RedissonLock.renewExpiration will refresh forever\" (a Java Redis client's issue 2037)"),
            Mutant::TimeoutTakenAsFailure => Some("\"RefundReconciliationJob Auto-Fails Refunds Without Gateway Consultation — Risk of Double Refund\" (a payment platform's issue 222)"),
            Mutant::FailureTakenAsRefunded => Some("\"A refund that fails at the payment gateway can still set the Payment to Refunded\" (an e-commerce plugin's issue 9013)"),
            Mutant::RetryMintsNewKey => Some("\"CreatePayment tells the model the idempotency key must be 'unique for every request' — so a retried call mints a new key and charges the card twice\" (a payment platform's tool server, issue 31)"),
            Mutant::ExpiryJudgedOnClientClock => Some("\"Distributed lock will fail if clients aren't synchronized\" (a Python Redis toolkit's issue 18)"),
            Mutant::SubsecondTtlTruncated => Some("\"Bug: RedisTaskLock truncates sub-second TTL to zero causing immediate lock deletion\" (a Rust web framework's issue 2719)"),
            Mutant::ClaimFenceAtMost
            | Mutant::ConfirmFenceAtLeast
            | Mutant::ConfirmWithoutFence
            | Mutant::ClaimRowCountIgnored
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::NoReseedAfterRestart
            | Mutant::ClaimAcceptsSent => None,
        }
    }

    /// Where the bug is planted: the port it wraps, or the statement it rewrites.
    pub fn planted_in(self) -> &'static str {
        match self {
            Mutant::ClaimFenceAtMost | Mutant::ClaimAcceptsSent | Mutant::FenceComparedAsText => {
                "the store's claim statement"
            }
            Mutant::ConfirmFenceAtLeast | Mutant::ConfirmWithoutFence => "the store's confirm statement",
            Mutant::ClaimRowCountIgnored => "the refund store port",
            Mutant::TokenPerJob | Mutant::TokenPerWorker | Mutant::TokenWrapsAt32Bits => {
                "the token source port"
            }
            Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::RenewalIgnoresResult
            | Mutant::ExpiryJudgedOnClientClock => "the lease store port",
            Mutant::ExtendRecreates | Mutant::ExtendTtlAsSeconds => "the Redis port's renewal script",
            Mutant::ReleaseByGetThenDel => "the Redis port's release script",
            Mutant::AcquireSetnxThenPexpire | Mutant::SubsecondTtlTruncated => "the Redis port's SET NX PX",
            Mutant::NoReseedAfterRestart => "the deployment's Redis start-up routine",
            Mutant::KeyPerAttempt
            | Mutant::TimeoutTakenAsFailure
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey => "the gateway port",
            Mutant::AckOnReceive => "the job queue port",
        }
    }
}

fencesim_model::named_enum!(Mutant, "mutant");
