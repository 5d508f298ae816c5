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
}

impl Mutant {
    pub const ALL: [Mutant; 13] = [
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
        }
    }

    /// The mechanism the bug is planted in: one whose code has the buggy line.
    pub fn baseline(self) -> Mechanism {
        match self {
            Mutant::ClaimFenceAtMost => Mechanism::Fenced,
            Mutant::ExtendRecreates => Mechanism::TtlRenewal,
            Mutant::NoReseedAfterRestart => Mechanism::FencedSeeded,
            Mutant::ConfirmFenceAtLeast
            | Mutant::ConfirmWithoutFence
            | Mutant::ClaimRowCountIgnored
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::KeyPerAttempt
            | Mutant::ClaimAcceptsSent
            | Mutant::AckOnReceive => Mechanism::FencedDbSequence,
        }
    }

    /// The gateway a mutant is searched with. A claim whose row count is ignored lets a stale
    /// worker call the gateway for a row it does not own; an idempotent gateway absorbs that
    /// call (which is why the idempotency key exists), so the search uses one that pays.
    pub fn gateway(self) -> GatewayMode {
        match self {
            Mutant::ClaimRowCountIgnored => GatewayMode::NonIdempotent,
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
            | Mutant::AckOnReceive => GatewayMode::Idempotent,
        }
    }

    /// Where the bug is planted: the port it wraps, or the statement it rewrites.
    pub fn planted_in(self) -> &'static str {
        match self {
            Mutant::ClaimFenceAtMost | Mutant::ClaimAcceptsSent => "the store's claim statement",
            Mutant::ConfirmFenceAtLeast | Mutant::ConfirmWithoutFence => "the store's confirm statement",
            Mutant::ClaimRowCountIgnored => "the refund store port",
            Mutant::TokenPerJob | Mutant::TokenPerWorker => "the token source port",
            Mutant::ReleaseWithDel | Mutant::SharedLockValue => "the lease store port",
            Mutant::ExtendRecreates => "the Redis port's renewal script",
            Mutant::NoReseedAfterRestart => "the deployment's Redis start-up routine",
            Mutant::KeyPerAttempt => "the gateway port",
            Mutant::AckOnReceive => "the job queue port",
        }
    }
}

fencesim_model::named_enum!(Mutant, "mutant");
