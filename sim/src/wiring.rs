//! How a worker's ports are put together. The plain wiring is the model as written: the
//! lease and token clients the mechanism asks for, over the world's adapters. A harness may
//! wire a worker differently (wrap a port to plant a bug, say) without the model or the
//! world knowing: it gets the same connections and hands back the ports the worker uses.

use crate::port::{ClockClient, GatewayClient, QueueClient, RedisClient, SettlementClient, StoreClient};
use fencesim_model::{
    Gateway, JobQueue, LeaseClient, LeaseStore, Mechanism, RefundStore, SettlementStatements,
    SettlementStore, Statements, TokenClient, TokenSource, WorkerId,
};

/// A worker's connections to the world, before any wiring.
pub struct Connections {
    pub mechanism: Mechanism,
    pub worker: WorkerId,
    /// Which life of the worker's process this is: 1, then one more after each crash.
    pub incarnation: u32,
    /// The lease's TTL, which a wait for the replicas is scaled to.
    pub ttl_ms: u64,
    /// One connection per Redis instance the mechanism's lease lives on.
    pub redis: Vec<RedisClient>,
    pub store: StoreClient,
    pub settlement: SettlementClient,
    pub gateway: GatewayClient,
    pub queue: QueueClient,
    pub clock: ClockClient,
}

impl Connections {
    /// The lease client the mechanism uses, over these instances.
    pub fn lease_over<I>(&self, instances: Vec<I>) -> LeaseClient<I, ClockClient> {
        LeaseClient::new(self.mechanism, instances, self.clock.clone())
    }

    /// The token source the mechanism uses, over these connections.
    pub fn tokens_over<I, S>(&self, redis: I, store: S) -> TokenClient<I, S> {
        TokenClient::new(self.mechanism, self.worker, redis, store, self.ttl_ms)
    }
}

/// The ports a wiring hands to a worker (the probe and the clock are always the world's own).
pub struct Wired<L, T, S, G, Q, D> {
    pub lease: L,
    pub tokens: T,
    pub store: S,
    pub gateway: G,
    pub queue: Q,
    pub settlement: D,
}

/// The wired ports of a wiring `W`.
pub type WiredOf<W> = Wired<
    <W as Wiring>::Lease,
    <W as Wiring>::Tokens,
    <W as Wiring>::Store,
    <W as Wiring>::Gateway,
    <W as Wiring>::Queue,
    <W as Wiring>::Settlement,
>;

pub trait Wiring: Send + Sync + 'static {
    type Lease: LeaseStore + Send + Sync + 'static;
    type Tokens: TokenSource + Send + Sync + 'static;
    type Store: RefundStore + Send + Sync + 'static;
    type Gateway: Gateway + Send + Sync + 'static;
    type Queue: JobQueue + Send + Sync + 'static;
    type Settlement: SettlementStore + Send + Sync + 'static;

    /// The ports of one worker process (called again for each new process after a crash).
    fn wire(&self, connections: Connections) -> WiredOf<Self>;

    /// The SQL text the refund store runs, given the mechanism's own.
    fn statements(&self, mechanism: Statements) -> Statements {
        mechanism
    }

    /// The SQL text the settlement ledger writes with.
    fn settlement_statements(&self) -> SettlementStatements {
        SettlementStatements::SQLITE
    }

    /// `Some`: every run opens its databases anew, the refund store with this schema,
    /// instead of taking the ones the thread's last run emptied (the same tables, their
    /// statements already prepared).
    fn fresh_schema(&self) -> Option<&'static str> {
        None
    }

    /// Whether a restarted Redis runs the deployment's start-up routine.
    fn start_routine(&self) -> bool {
        true
    }
}

/// The model as written.
pub struct Plain;

impl Wiring for Plain {
    type Lease = LeaseClient<RedisClient, ClockClient>;
    type Tokens = TokenClient<RedisClient, StoreClient>;
    type Store = StoreClient;
    type Gateway = GatewayClient;
    type Queue = QueueClient;
    type Settlement = SettlementClient;

    fn wire(&self, connections: Connections) -> WiredOf<Self> {
        let lease = connections.lease_over(connections.redis.clone());
        let tokens = connections.tokens_over(connections.redis[0].clone(), connections.store.clone());
        let Connections { store, gateway, queue, settlement, .. } = connections;
        Wired { lease, tokens, store, gateway, queue, settlement }
    }
}
