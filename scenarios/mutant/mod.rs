//! The mutant catalogue: realistic bugs in the worker, lock and store code, each planted
//! at run time by wiring a worker's ports differently (`planted`), so that the harness's
//! power to catch bugs can be measured without editing the model. The model itself has
//! no trace of them: a SQL mutant is the store given other statement text, every other
//! mutant a wrapper around one port.

mod acts;
mod planted;
mod ports;

pub use acts::acts;
pub use planted::{OwnPorts, Planted, PlantedPorts};
pub use ports::RawRedis;

use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use strum::EnumCount;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, strum::EnumCount)]
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
    /// The settlement ledger's posting moves the balance without its fence predicate: the
    /// refund rows are fenced, the second store's statement was written without one.
    PostingWithoutFence,
    /// The client sends `WAIT 1 timeout` after the lease's `SET` and the token's `INCR` but
    /// never reads its answer: a wait that timed out, or failed with the primary, is taken
    /// as the replica's acknowledgement, and a failover can issue the same token again.
    /// Modelled on a common mistake: `WAIT` treated as making a write durable, its count
    /// never compared with the replicas asked for.
    WaitAnswerIgnored,
    /// A lookup that found no refund is taken as proof that none was ever sent, and the
    /// refund is paid under a fresh idempotency key: a lookup answered from a lagging copy
    /// then makes a second refund that the refund's own key would have turned into a replay.
    LookupMissMintsNewKey,
    // The deep catalogue: bugs that break only when two rare things meet (`Spec::deep`).
    /// The idempotency key carries the worker process's start-up generation (bumped each
    /// time a process starts, to keep an old deploy's keys apart): every worker started
    /// together sends the same key, a process started again after a crash another.
    KeyPerStartGeneration,
    /// A refund whose outcome is unknown (its call timed out and no lookup could say) is
    /// parked for reconciliation: the job is acked and the row left in `sending`.
    UnknownOutcomeAcked,
    /// A refund call the gateway refuses with a conflict (a call with the same key is in
    /// flight) is sent again under a new key.
    ConflictMintsNewKey,
    /// A row found in `sending` whose lookup found no refund is taken as never paid, and so
    /// never posted: the settlement ledger is not asked before the posting.
    LookupMissSkipsLedgerCheck,
    /// A refund call the gateway refused (it was down) is sent again under a new key, the
    /// refused key taken for spent.
    RefusalMintsNewKey,
    /// A batch given up because the gateway was down releases its lease with a plain
    /// `DEL`, the error path's own clean-up written apart from the normal release.
    OutageReleaseByDel,
    /// A process started again after a crash pays a row it finds in `sending`, whose
    /// lookup found no refund, as a new attempt under a key of its own (the attempts its
    /// previous life made died with it).
    RestartRecoveryMintsNewKey,
    /// A Redlock acquisition counts an instance that refused the `SET NX` (it was
    /// restarting) as granted: "it may have taken the key".
    RefusedInstanceCounted,
}

/// What the catalogue knows of one mutant.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub mutant: Mutant,
    pub name: &'static str,
    /// The one change that removes the bug, in the protocol's words: what a failing run's
    /// page suggests.
    pub fix: &'static str,
    /// The mechanism the bug is planted in: one whose code has the buggy line.
    pub baseline: Mechanism,
    /// The gateway the mutant is searched with. A claim whose row count is ignored lets a
    /// stale worker call the gateway for a row it does not own, and a timeout taken as a
    /// failure sends a paid call again; an idempotent gateway absorbs such a call (which is
    /// why the idempotency key exists), so those searches use one that pays.
    pub gateway: GatewayMode,
    /// Where the bug is planted: the port it wraps, or the statement it rewrites.
    pub planted_in: &'static str,
    /// The public report the bug is modelled on, by its title and where it was filed; none
    /// for the catalogue's own bugs.
    pub source: Option<&'static str>,
    /// Whether it is in the deep catalogue: a bug that breaks only when two or more rare
    /// conditions meet, searched under production rates (docs/deep-bugs.md).
    pub deep: bool,
}

/// The catalogue, one entry per mutant in declaration order (checked when it compiles).
pub const CATALOGUE: [Spec; Mutant::COUNT] = [
    Spec {
        mutant: Mutant::ClaimFenceAtMost,
        name: "claim-fence-at-most",
        fix: "claim only when the row's fence is lower than the token (`fence < :token`), so that a second claim with the same token is turned away",
        baseline: Mechanism::Fenced,
        gateway: GatewayMode::Idempotent,
        planted_in: "the store's claim statement",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::ConfirmFenceAtLeast,
        name: "confirm-fence-at-least",
        fix: "confirm only when the row's fence equals the token (`fence = :token`): a newer holder's claim must turn the older confirm away",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the store's confirm statement",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::ConfirmWithoutFence,
        name: "confirm-without-fence",
        fix: "put the fence back in the confirm (`AND fence = :token`), so that a holder whose row was claimed again since cannot mark it sent",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the store's confirm statement",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::ClaimRowCountIgnored,
        name: "claim-row-count-ignored",
        fix: "read the claim's row count: zero rows updated is a fence violation, and the batch stops before the gateway call",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::NonIdempotent,
        planted_in: "the refund store port",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::TokenPerJob,
        name: "token-per-job",
        fix: "take a fresh token with every lease acquired: a token kept from an earlier acquisition is older than the fence a later holder stored",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the token source port",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::TokenPerWorker,
        name: "token-per-worker",
        fix: "take a fresh token with every lease acquired, never one per process",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the token source port",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::ReleaseWithDel,
        name: "release-with-del",
        fix: "release with compare-and-delete (delete the key only if it still holds this worker's value), never a plain DEL",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the lease store port",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::SharedLockValue,
        name: "shared-lock-value",
        fix: "give every acquisition a value of its own (worker and attempt), so that a release or a renewal can tell its own lease from another's",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the lease store port",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::ExtendRecreates,
        name: "extend-recreates",
        fix: "let the renewal only extend a key that still holds this worker's value; a missing key means the lease is lost, and the batch stops",
        baseline: Mechanism::TtlRenewal,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's renewal script",
        source: Some("\"Lock extension via lock method allows extending expired locks\" (a Ruby Redlock client's issue 36)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::NoReseedAfterRestart,
        name: "no-reseed-after-restart",
        fix: "seed the counter from MAX(fence) when Redis starts, or take tokens from a database sequence",
        baseline: Mechanism::FencedSeeded,
        gateway: GatewayMode::Idempotent,
        planted_in: "the deployment's Redis start-up routine",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::KeyPerAttempt,
        name: "key-per-attempt",
        fix: "send the refund id as the idempotency key, the same on every attempt",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: Some("\"Idempotency key for /payments depends on volatile request fields\" (a payment connector's issue 1305)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::ClaimAcceptsSent,
        name: "claim-accepts-sent",
        fix: "claim only rows in pending or sending: a row already sent is done",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the store's claim statement",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::AckOnReceive,
        name: "ack-on-receive",
        fix: "ack the job only once its batch is completed",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the job queue port",
        source: Some("an ACH gateway's pull request 138, whose maintainer wrote \"We used to ack this early and it caused a bunch of issues\""),
        deep: false,
    },
    Spec {
        mutant: Mutant::ReleaseByGetThenDel,
        name: "release-by-get-then-del",
        fix: "release in one atomic step (a script that compares and deletes), not a GET and then a DEL",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's release script",
        source: Some("\"Fix race condition in redis.lock.Lock.release\" (a Python Redis client's pull request 1031)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::AcquireSetnxThenPexpire,
        name: "acquire-setnx-then-pexpire",
        fix: "take the lease and its TTL in one command (SET NX PX), so that no lock is ever left without an expiry",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's SET NX PX",
        source: Some("\"Dead lock in redis lock provider\" (a Java scheduler-lock library's issue 65)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::ExtendTtlAsSeconds,
        name: "extend-ttl-ms-as-seconds",
        fix: "pass the renewal's TTL in the unit the command expects (PEXPIRE takes milliseconds)",
        baseline: Mechanism::TtlRenewal,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's renewal script",
        source: Some("\"extend_life interprets TTL as seconds rather than milliseconds\" (a Ruby Redlock client's issue 44)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::FenceComparedAsText,
        name: "fence-compared-as-text",
        fix: "store and compare the fence as an integer, not as text",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the store's claim statement",
        source: Some("\"Zookeeper sequence node overflow causes perpetual re-election\" (a Python ZooKeeper client's issue 730: sequences compared as text, a signed 32-bit counter)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::TokenWrapsAt32Bits,
        name: "token-wraps-at-32-bits",
        fix: "keep the token in a 64-bit integer, as INCR returns it",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the token source port",
        source: Some("\"Zookeeper sequence node overflow causes perpetual re-election\" (a Python ZooKeeper client's issue 730: sequences compared as text, a signed 32-bit counter)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::RenewalIgnoresResult,
        name: "renewal-ignores-extend-result",
        fix: "read the renewal's answer: 0 means the lease is gone, and the batch stops",
        baseline: Mechanism::TtlRenewal,
        gateway: GatewayMode::Idempotent,
        planted_in: "the lease store port",
        source: Some("\"RedissonLock.renewExpiration will refresh forever\" (a Java Redis client's issue 2037)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::TimeoutTakenAsFailure,
        name: "timeout-taken-as-failure",
        fix: "treat a timeout as an unknown outcome: look the refund up before sending it again",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::NonIdempotent,
        planted_in: "the gateway port",
        source: Some("\"RefundReconciliationJob Auto-Fails Refunds Without Gateway Consultation — Risk of Double Refund\" (a payment platform's issue 222)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::FailureTakenAsRefunded,
        name: "failure-taken-as-refunded",
        fix: "confirm a row only after the gateway said it made the refund",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: Some("\"A refund that fails at the payment gateway can still set the Payment to Refunded\" (an e-commerce plugin's issue 9013)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::RetryMintsNewKey,
        name: "retry-mints-new-key",
        fix: "send every retry with the refund's own idempotency key",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: Some("\"CreatePayment tells the model the idempotency key must be 'unique for every request' — so a retried call mints a new key and charges the card twice\" (a payment platform's tool server, issue 31)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::ExpiryJudgedOnClientClock,
        name: "expiry-judged-on-client-clock",
        fix: "ask Redis whether the lease is still held; the worker's own clock does not know what a pause did",
        baseline: Mechanism::CheckBeforeWrite,
        gateway: GatewayMode::Idempotent,
        planted_in: "the lease store port",
        source: Some("\"Distributed lock will fail if clients aren't synchronized\" (a Python Redis toolkit's issue 18)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::SubsecondTtlTruncated,
        name: "subsecond-ttl-truncated",
        fix: "pass the TTL in milliseconds (PX), never rounded down to whole seconds",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's SET NX PX",
        source: Some("\"Bug: RedisTaskLock truncates sub-second TTL to zero causing immediate lock deletion\" (a Rust web framework's issue 2719)"),
        deep: false,
    },
    // Modelled on a common mistake, not one report: a second table added to a fenced batch
    // later (a reporting or accounting store) gets its write copied from the unfenced
    // version of the code, and the review checks only that the first table's fence stayed.
    Spec {
        mutant: Mutant::PostingWithoutFence,
        name: "posting-without-fence",
        fix: "put the fence predicate in the settlement ledger's posting too: every store the batch writes needs its own",
        baseline: Mechanism::Fenced,
        gateway: GatewayMode::Idempotent,
        planted_in: "the settlement ledger's posting statement",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::WaitAnswerIgnored,
        name: "wait-answer-ignored",
        fix: "compare WAIT's answer with the replicas asked for, and stop when it falls short; or take tokens from a database sequence",
        baseline: Mechanism::FencedWaitReplica,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's WAIT",
        source: None,
        deep: false,
    },
    Spec {
        mutant: Mutant::LookupMissMintsNewKey,
        name: "lookup-miss-mints-new-key",
        fix: "pay with the refund's own idempotency key even after a lookup found nothing: the gateway then replays instead of paying twice",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: Some("\"Prevent duplicate automatic transaction release requests\" (an e-commerce platform's issue 19812: candidates read from a lagging replica, and a new idempotency key for each run, so the gateway's own check cannot stop a second refund)"),
        deep: false,
    },
    Spec {
        mutant: Mutant::KeyPerStartGeneration,
        name: "key-per-start-generation",
        fix: "send the refund id alone as the idempotency key: a key that changes when a process starts again is a new refund to the gateway",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::UnknownOutcomeAcked,
        name: "unknown-outcome-acked",
        fix: "leave a job whose refund's outcome is unknown unacked: it comes back, and its row's lookup then says what happened",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway and job queue ports",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::ConflictMintsNewKey,
        name: "conflict-mints-new-key",
        fix: "wait and send the same key again after a conflict: the call in flight is this refund's",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::LookupMissSkipsLedgerCheck,
        name: "lookup-miss-skips-ledger-check",
        fix: "ask the settlement ledger about every row found in `sending`, whatever the gateway's lookup said: the lookup can lag behind a posting",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway and settlement ledger ports",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::RefusalMintsNewKey,
        name: "refusal-mints-new-key",
        fix: "send the refund's own key again after a refusal: a refused call moved no money, and a call under the same key elsewhere may have",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::OutageReleaseByDel,
        name: "outage-release-by-del",
        fix: "release with compare-and-delete on every path, the error paths too: the lease may have changed hands while the batch waited",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the lease store port, after the gateway port's refusals",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::RestartRecoveryMintsNewKey,
        name: "restart-recovery-mints-new-key",
        fix: "pay a row found in `sending` under the refund's own key, whichever process takes it up: a lookup can miss a call still to land, the key cannot",
        baseline: Mechanism::FencedDbSequence,
        gateway: GatewayMode::Idempotent,
        planted_in: "the gateway port",
        source: None,
        deep: true,
    },
    Spec {
        mutant: Mutant::RefusedInstanceCounted,
        name: "refused-instance-counted",
        fix: "count only the instances that answered with the key taken: one that did not answer granted nothing",
        baseline: Mechanism::RedlockFenced,
        gateway: GatewayMode::Idempotent,
        planted_in: "the Redis port's SET NX PX",
        source: None,
        deep: true,
    },
];

const _: () = {
    let mut i = 0;
    while i < CATALOGUE.len() {
        assert!(CATALOGUE[i].mutant as usize == i, "the catalogue lists the mutants in declaration order");
        i += 1;
    }
};

/// How many mutants are in the deep catalogue (`deep`) or the swarm's (`!deep`).
const fn counted(deep: bool) -> usize {
    let (mut at, mut count) = (0, 0);
    while at < CATALOGUE.len() {
        count += (CATALOGUE[at].deep == deep) as usize;
        at += 1;
    }
    count
}

/// The mutants of one catalogue, in the catalogue's order.
const fn chosen<const N: usize>(deep: bool) -> [Mutant; N] {
    let mut chosen = [Mutant::ClaimFenceAtMost; N];
    let (mut at, mut filled) = (0, 0);
    while at < CATALOGUE.len() {
        if CATALOGUE[at].deep == deep {
            chosen[filled] = CATALOGUE[at].mutant;
            filled += 1;
        }
        at += 1;
    }
    assert!(filled == N, "every mutant of the catalogue is chosen");
    chosen
}

impl Mutant {
    /// The swarm catalogue: the bugs `reports/detection.md` measures, each caught under the
    /// swarm's rates.
    pub const SWARM: [Mutant; counted(false)] = chosen(false);

    /// The deep catalogue: the bugs that break only when two rare conditions meet,
    /// measured under production rates in `reports/deep.md`.
    pub const DEEP: [Mutant; counted(true)] = chosen(true);

    /// Every mutant, in the catalogue's order.
    pub const ALL: [Mutant; Mutant::COUNT] = {
        let mut all = [Mutant::ClaimFenceAtMost; Mutant::COUNT];
        let mut i = 0;
        while i < all.len() {
            all[i] = CATALOGUE[i].mutant;
            i += 1;
        }
        all
    };

    pub fn spec(self) -> &'static Spec {
        &CATALOGUE[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn baseline(self) -> Mechanism {
        self.spec().baseline
    }

    pub fn gateway(self) -> GatewayMode {
        self.spec().gateway
    }

    pub fn source(self) -> Option<&'static str> {
        self.spec().source
    }

    pub fn fix(self) -> &'static str {
        self.spec().fix
    }

    pub fn planted_in(self) -> &'static str {
        self.spec().planted_in
    }
}

fencesim_model::named_enum!(Mutant, "mutant");
