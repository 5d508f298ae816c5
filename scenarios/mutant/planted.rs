//! Planting a mutant: a wiring of the worker's ports in which one port (or one statement,
//! or the Redis start-up routine) has the bug. Every other port is the model's own.

use super::ports::{
    PlantedGateway, PlantedLease, PlantedQueue, PlantedRedis, PlantedSettlement, PlantedStore, PlantedTokens,
    RawRedis, Told,
};
use super::Mutant;
use fencesim_model::{
    Clock, Gateway, JobQueue, LeaseClient, Mechanism, RefundStore, SettlementStatements, Statements,
    TokenClient, WorkerId,
};
use fencesim_sim::port::{ClockClient, StoreClient};
use fencesim_sim::{Connections, Wired, WiredOf, Wiring};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, LazyLock, Mutex};

/// The wiring with `0` planted.
pub struct Planted(pub Mutant);

/// The right statement with one predicate rewritten; the rewrite must change it.
fn rewrite(right: &'static str, from: &str, to: &str) -> String {
    assert!(right.contains(from), "the planted predicate `{from}` is in the statement");
    right.replace(from, to)
}

static CLAIM_FENCE_AT_MOST: LazyLock<String> =
    LazyLock::new(|| rewrite(Statements::SQLITE.claim_fenced, "fence < ?1", "fence <= ?1"));
static CLAIM_ACCEPTS_SENT: LazyLock<String> = LazyLock::new(|| {
    rewrite(Statements::SQLITE.claim_fenced, "('pending', 'sending')", "('pending', 'sending', 'sent')")
});
static FENCE_COMPARED_AS_TEXT: LazyLock<String> = LazyLock::new(|| {
    rewrite(Statements::SQLITE.claim_fenced, "fence < ?1", "CAST(fence AS TEXT) < CAST(?1 AS TEXT)")
});
static CONFIRM_FENCE_AT_LEAST: LazyLock<String> =
    LazyLock::new(|| rewrite(Statements::SQLITE.confirm_fenced, "fence = ?1", "fence >= ?1"));
static CONFIRM_WITHOUT_FENCE: LazyLock<String> =
    LazyLock::new(|| rewrite(Statements::SQLITE.confirm_fenced, "fence = ?1", "?1 = ?1"));
static POSTING_WITHOUT_FENCE: LazyLock<String> =
    LazyLock::new(|| rewrite(SettlementStatements::SQLITE.balance_fenced, "fence <= ?1", "?1 = ?1"));

impl Wiring for Planted {
    type Lease = PlantedLease<LeaseClient<PlantedRedis, ClockClient>>;
    type Tokens = PlantedTokens<TokenClient<PlantedRedis, StoreClient>>;
    type Store = PlantedStore;
    type Gateway = PlantedGateway;
    type Queue = PlantedQueue;
    type Settlement = PlantedSettlement;

    fn wire(&self, connections: Connections) -> WiredOf<Self> {
        let own = OwnPorts {
            mechanism: connections.mechanism,
            worker: connections.worker,
            incarnation: connections.incarnation,
            ttl_ms: connections.ttl_ms,
            redis: connections.redis,
            store: connections.store,
            gateway: connections.gateway,
            queue: connections.queue,
            clock: connections.clock,
        };
        let PlantedPorts { lease, tokens, store, gateway, queue, told } = self.plant(own);
        let settlement = PlantedSettlement { inner: connections.settlement, mutant: self.0, told };
        Wired { lease, tokens, store, gateway, queue, settlement }
    }

    fn statements(&self, right: Statements) -> Statements {
        match self.0 {
            Mutant::ClaimFenceAtMost => Statements { claim_fenced: &CLAIM_FENCE_AT_MOST, ..right },
            Mutant::ClaimAcceptsSent => Statements { claim_fenced: &CLAIM_ACCEPTS_SENT, ..right },
            Mutant::FenceComparedAsText => Statements { claim_fenced: &FENCE_COMPARED_AS_TEXT, ..right },
            Mutant::ConfirmFenceAtLeast => Statements { confirm_fenced: &CONFIRM_FENCE_AT_LEAST, ..right },
            Mutant::ConfirmWithoutFence => Statements { confirm_fenced: &CONFIRM_WITHOUT_FENCE, ..right },
            Mutant::ClaimRowCountIgnored
            | Mutant::TokenPerJob
            | Mutant::TokenPerWorker
            | Mutant::ReleaseWithDel
            | Mutant::SharedLockValue
            | Mutant::ExtendRecreates
            | Mutant::NoReseedAfterRestart
            | Mutant::KeyPerAttempt
            | Mutant::AckOnReceive
            | Mutant::ReleaseByGetThenDel
            | Mutant::AcquireSetnxThenPexpire
            | Mutant::ExtendTtlAsSeconds
            | Mutant::TokenWrapsAt32Bits
            | Mutant::RenewalIgnoresResult
            | Mutant::TimeoutTakenAsFailure
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey
            | Mutant::ExpiryJudgedOnClientClock
            | Mutant::SubsecondTtlTruncated
            | Mutant::PostingWithoutFence
            | Mutant::WaitAnswerIgnored
            | Mutant::LookupMissMintsNewKey
            | Mutant::KeyPerStartGeneration
            | Mutant::UnknownOutcomeAcked
            | Mutant::ConflictMintsNewKey
            | Mutant::LookupMissSkipsLedgerCheck
            | Mutant::RefusalMintsNewKey
            | Mutant::OutageReleaseByDel
            | Mutant::RestartRecoveryMintsNewKey
            | Mutant::RefusedInstanceCounted => right,
        }
    }

    fn settlement_statements(&self) -> SettlementStatements {
        let right = SettlementStatements::SQLITE;
        match self.0 {
            Mutant::PostingWithoutFence => {
                SettlementStatements { balance_fenced: &POSTING_WITHOUT_FENCE, ..right }
            }
            Mutant::ClaimFenceAtMost
            | Mutant::ConfirmFenceAtLeast
            | Mutant::ConfirmWithoutFence
            | Mutant::ClaimRowCountIgnored
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
            | Mutant::TimeoutTakenAsFailure
            | Mutant::FailureTakenAsRefunded
            | Mutant::RetryMintsNewKey
            | Mutant::ExpiryJudgedOnClientClock
            | Mutant::SubsecondTtlTruncated
            | Mutant::WaitAnswerIgnored
            | Mutant::LookupMissMintsNewKey
            | Mutant::KeyPerStartGeneration
            | Mutant::UnknownOutcomeAcked
            | Mutant::ConflictMintsNewKey
            | Mutant::LookupMissSkipsLedgerCheck
            | Mutant::RefusalMintsNewKey
            | Mutant::OutageReleaseByDel
            | Mutant::RestartRecoveryMintsNewKey
            | Mutant::RefusedInstanceCounted => right,
        }
    }

    fn start_routine(&self) -> bool {
        self.0 != Mutant::NoReseedAfterRestart
    }
}

/// A worker's own ports, simulated or live, before a bug is planted in them.
pub struct OwnPorts<R, S, G, Q, C> {
    pub mechanism: Mechanism,
    pub worker: WorkerId,
    /// Which life of the worker's process this is (1, then one more after each crash).
    pub incarnation: u32,
    pub ttl_ms: u64,
    /// One connection per Redis instance the mechanism's lease lives on.
    pub redis: Vec<R>,
    pub store: S,
    pub gateway: G,
    pub queue: Q,
    pub clock: C,
}

/// The ports with the bug planted: the lease and the token source over the planted Redis.
pub struct PlantedPorts<R, S, G, Q, C> {
    pub lease: PlantedLease<LeaseClient<PlantedRedis<R>, C>, C>,
    pub tokens: PlantedTokens<TokenClient<PlantedRedis<R>, S>>,
    pub store: PlantedStore<S>,
    pub gateway: PlantedGateway<G>,
    pub queue: PlantedQueue<Q>,
    /// What the ports tell each other, for a port planted beside them (the ledger's).
    pub told: Arc<Told>,
}

impl Planted {
    /// `own` with the bug planted: the same wrappers whether the ports are the simulated
    /// world's or a live run's, so that a live worker process runs the very bug `replay`
    /// plants.
    pub fn plant<R, S, G, Q, C>(&self, own: OwnPorts<R, S, G, Q, C>) -> PlantedPorts<R, S, G, Q, C>
    where
        R: RawRedis + Clone + Sync,
        S: RefundStore + Clone + Sync,
        G: Gateway + Sync,
        Q: JobQueue + Sync,
        C: Clock + Clone + Sync,
    {
        let mutant = self.0;
        let acquisitions = Arc::new(AtomicU32::new(0));
        let told = Arc::new(Told::default());

        let counter = PlantedRedis { inner: own.redis[0].clone(), mutant };
        let redis = own.redis.into_iter().map(|inner| PlantedRedis { inner, mutant }).collect();
        let lease = PlantedLease {
            inner: LeaseClient::new(own.mechanism, redis, own.clock.clone()),
            mutant,
            acquisitions: acquisitions.clone(),
            clock: own.clock,
            deadlines: Mutex::new(BTreeMap::new()),
            told: Arc::clone(&told),
        };
        let tokens = TokenClient::new(own.mechanism, own.worker, counter, own.store.clone(), own.ttl_ms);
        let tokens = PlantedTokens { inner: tokens, mutant, kept: Mutex::new(BTreeMap::new()) };
        let store =
            PlantedStore { inner: own.store, ignore_row_count: mutant == Mutant::ClaimRowCountIgnored };
        let gateway = PlantedGateway {
            inner: own.gateway,
            mutant,
            worker: own.worker,
            acquisitions,
            calls: Mutex::new(BTreeMap::new()),
            missed: Mutex::new(BTreeSet::new()),
            generation: own.incarnation,
            timed_out: Mutex::new(BTreeMap::new()),
            told: Arc::clone(&told),
        };
        let queue =
            PlantedQueue { inner: own.queue, mutant, told: Arc::clone(&told), last: Mutex::new(None) };
        PlantedPorts { lease, tokens, store, gateway, queue, told }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::{Cents, MerchantId, RefundId, Token, WriteGuard};
    use fencesim_model::{RefundRow, RefundState, SqliteRefunds, WriteKind};

    fn store_with(state: RefundState, fence: i64, statements: Statements) -> SqliteRefunds {
        let store = SqliteRefunds::open_in_memory().unwrap().with_statements(statements);
        let row =
            RefundRow { id: RefundId(815), merchant: MerchantId(4471), amount: Cents(7025), state, fence };
        store.insert(&[row]).unwrap();
        store
    }

    #[test]
    fn each_planted_statement_lets_through_exactly_what_the_right_one_refuses() {
        let stale = WriteGuard::Fence(Token(33));
        let cases = [
            // (mutant, state, fence, write): refused by the right statement, accepted by the mutant's
            (Mutant::ConfirmFenceAtLeast, RefundState::Sending, 34, WriteKind::Confirm),
            (Mutant::ConfirmWithoutFence, RefundState::Sending, 34, WriteKind::Confirm),
            (Mutant::ClaimFenceAtMost, RefundState::Sending, 33, WriteKind::Claim),
            (Mutant::ClaimAcceptsSent, RefundState::Sent, 3, WriteKind::Claim),
            // '100' < '33' as text
            (Mutant::FenceComparedAsText, RefundState::Sending, 100, WriteKind::Claim),
        ];
        for (mutant, state, fence, write) in cases {
            let right = store_with(state, fence, Statements::SQLITE);
            assert_eq!(right.write(write, RefundId(815), stale).unwrap().rows_updated, 0, "{mutant}");
            let wrong = store_with(state, fence, Planted(mutant).statements(Statements::SQLITE));
            assert_eq!(wrong.write(write, RefundId(815), stale).unwrap().rows_updated, 1, "{mutant}");
        }
    }

    #[test]
    fn only_the_sql_mutants_change_the_statements() {
        for mutant in Mutant::ALL {
            let changed = Planted(mutant).statements(Statements::SQLITE) != Statements::SQLITE
                || Planted(mutant).settlement_statements() != SettlementStatements::SQLITE;
            assert_eq!(changed, mutant.planted_in().contains("statement"), "{mutant}");
        }
    }

    /// The ledger's posting without its fence takes a posting whose token is older than
    /// the ledger's fence; the right statement turns it away.
    #[test]
    fn the_posting_without_its_fence_takes_a_stale_posting() {
        use fencesim_model::{Posting, SqliteSettlement};
        let posting = Posting { refund: RefundId(815), merchant: MerchantId(4471), amount: Cents(7025) };
        for (statements, rows) in [
            (SettlementStatements::SQLITE, 0),
            (Planted(Mutant::PostingWithoutFence).settlement_statements(), 1),
        ] {
            let ledger = SqliteSettlement::open_in_memory().unwrap().with_statements(statements);
            ledger.enroll(MerchantId(4471), Token(34)).unwrap();
            assert_eq!(ledger.post(posting, WriteGuard::Fence(Token(33))).unwrap().rows_updated, rows);
        }
    }
}
