//! The typed events every component records into one history, in the order they happen.

use crate::clock::WallMs;
use crate::fault::{FaultKind, Trigger};
use fencesim_model::{
    Cents, GatewayCall, JobId, MerchantId, RefundId, RowImage, Step, Token, WorkerId, WriteKind,
};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::hash::{Hash, Hasher};

/// What happened. Each variant is recorded by the component that did it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    JobEnqueued {
        job: JobId,
        merchant: MerchantId,
    },
    JobDelivered {
        job: JobId,
        worker: WorkerId,
        receipt: u32,
        delivery: u32,
    },
    /// The delivery was not acked in time: the job is visible again.
    VisibilityExpired {
        job: JobId,
        worker: WorkerId,
        receipt: u32,
    },
    JobAcked {
        job: JobId,
        worker: WorkerId,
        receipt: u32,
        accepted: bool,
    },

    /// A Redis instance granted `SET key value NX PX ttl`. `epoch` is set when this grant
    /// gave the worker the lease (a majority of the instances the lease lives on).
    LeaseGranted {
        worker: WorkerId,
        instance: u8,
        key: String,
        value: String,
        ttl_ms: u64,
        epoch: Option<u32>,
    },
    LeaseRefused {
        worker: WorkerId,
        instance: u8,
        key: String,
    },
    /// Redis removed the lease key because its TTL ran out (or a fault brought that forward).
    LeaseExpired {
        instance: u8,
        key: String,
        value: String,
        epoch: Option<u32>,
    },
    /// A compare-and-delete: `deleted` only if the key still held `value`.
    LeaseReleased {
        worker: WorkerId,
        instance: u8,
        key: String,
        value: String,
        deleted: bool,
    },
    /// A plain `DEL`: `holder` is the value it removed, whoever's it was.
    LeaseDeleted {
        worker: WorkerId,
        instance: u8,
        key: String,
        holder: Option<String>,
    },
    LeaseExtended {
        worker: WorkerId,
        instance: u8,
        key: String,
        extended: bool,
    },
    /// A plain `SET key value PX ttl`, without NX: the key is taken whoever held it.
    LeaseSet {
        worker: WorkerId,
        instance: u8,
        key: String,
        value: String,
        ttl_ms: u64,
    },
    /// A `GET` of the lease key: who holds it now.
    LeaseRead {
        worker: WorkerId,
        instance: u8,
        key: String,
        holder: Option<String>,
    },
    TokenIssued {
        worker: WorkerId,
        key: String,
        token: Token,
    },
    /// The counter was seeded from `MAX(fence)` when Redis started.
    CounterSeeded {
        instance: u8,
        key: String,
        value: i64,
    },

    /// A claim or a confirm, as SQLite executed it.
    Write {
        worker: WorkerId,
        epoch: Option<u32>,
        write: WriteKind,
        refund: RefundId,
        token: Option<Token>,
        rows: u64,
        after: Option<RowImage>,
    },

    Lookup {
        worker: WorkerId,
        refund: RefundId,
        found: Option<u32>,
    },
    /// A refund call reached the gateway. `Created` moved money (a ledger entry).
    RefundCalled {
        worker: WorkerId,
        epoch: Option<u32>,
        refund: RefundId,
        amount: Cents,
        outcome: CallOutcome,
        gateway_ref: u32,
        /// The gateway did the work but its answer never reached the worker.
        response_lost: bool,
    },

    /// The worker reached a step of its protocol.
    Step {
        worker: WorkerId,
        #[serde(flatten)]
        step: Step,
    },

    /// A fault of the plan fired.
    FaultFired {
        #[serde(flatten)]
        fault: FaultKind,
        trigger: Trigger,
    },
    Resumed {
        worker: WorkerId,
    },
    /// A crashed worker's new process started.
    Restarted {
        worker: WorkerId,
        incarnation: u32,
    },
    /// A Redis instance came back; `lost` keys were lost or rolled back.
    RedisRestarted {
        instance: u8,
        lost: u32,
    },
    /// A plain `PEXPIRE key ttl`: the key's expiry re-armed whoever holds it. `holder` is
    /// the value the key held when the command ran (none: there was no key).
    LeaseRearmed {
        worker: WorkerId,
        instance: u8,
        key: String,
        holder: Option<String>,
        ttl_ms: u64,
    },
    /// The gateway refused a request at once (an outage): nothing moved.
    GatewayRefused {
        worker: WorkerId,
        refund: RefundId,
        call: GatewayCall,
    },
    /// A refund call was held up on its way: the worker hears nothing when its answer is
    /// due, and the call reaches the gateway at `lands_at_ms` (a `RefundCalled` then).
    RefundTimedOut {
        worker: WorkerId,
        refund: RefundId,
        lands_at_ms: u64,
    },
    /// A command reached a Redis instance while it was restarting: the connection was
    /// refused and the command did nothing.
    RedisRefused {
        worker: WorkerId,
        instance: u8,
    },
    /// Refunds of a merchant arrived in the store, and `job` is queued to settle them.
    RefundsArrived {
        job: JobId,
        merchant: MerchantId,
        refunds: u32,
    },
    /// The holder took the merchant's fence on the second store (the settlement ledger)
    /// for its batch: `rows` 0 means the ledger's fence was newer than `token`.
    SettlementEnrolled {
        worker: WorkerId,
        epoch: Option<u32>,
        merchant: MerchantId,
        token: Token,
        rows: u64,
    },
    /// A posting to the settlement ledger, as SQLite executed it: with `rows` 1, one entry
    /// for `refund` and its amount added to the merchant's balance (`balance` after it).
    SettlementPosted {
        worker: WorkerId,
        epoch: Option<u32>,
        refund: RefundId,
        merchant: MerchantId,
        amount: Cents,
        token: Option<Token>,
        rows: u64,
        balance: Option<Cents>,
    },
    /// The worker asked the settlement ledger whether `refund` is posted already.
    SettlementLookup {
        worker: WorkerId,
        refund: RefundId,
        posted: bool,
    },
    /// The primary of `instance` stopped and its replica was promoted: `lost` changes had
    /// not reached it; `leases_lost` lease keys the primary held are not on it as they
    /// were, and `counters_back` counters stand lower on it than they did on the primary.
    RedisFailedOver {
        instance: u8,
        lost: u32,
        leases_lost: u32,
        counters_back: u32,
    },
    /// A `WAIT` for the deployment's replicas: `acked` says whether every replica had
    /// every write the primary had sent by the worker's last command, within the timeout.
    ReplicaWaited {
        worker: WorkerId,
        instance: u8,
        acked: bool,
    },
    /// A lookup answered from a copy `behind_ms` behind the ledger said there was no
    /// refund with this reference, though the ledger has one (`gateway_ref`, its money
    /// moved at `paid_at_ms`): the lookup lied. Recorded right after the `Lookup`.
    LookupBehind {
        worker: WorkerId,
        refund: RefundId,
        gateway_ref: u32,
        paid_at_ms: u64,
        behind_ms: u64,
    },
    /// A lease script (`script`: `release` or `renew`) that Redis answered with an error
    /// reply: `reply` is the error as Redis words it. The worker gets it as a failed
    /// command, as it would from a real server.
    ScriptFailed {
        worker: WorkerId,
        instance: u8,
        key: String,
        script: String,
        reply: String,
    },
    /// A statement the refund database refused (`statement`: its field in a mechanism
    /// file, e.g. `statements.confirm`): `message` is the database's own words. The worker
    /// gets it as a failed request.
    StatementFailed {
        worker: WorkerId,
        statement: String,
        message: String,
    },
    // New events go last: a trace's hash includes each event's variant position.
}

/// A write's statement, as a mechanism file names its field.
pub fn statement_field(write: WriteKind) -> &'static str {
    match write {
        WriteKind::Claim => "statements.claim",
        WriteKind::Confirm => "statements.confirm",
    }
}

/// How a refund call was answered: what the gateway replies and a `RefundCalled` event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// Money moved; this is a new ledger entry.
    Created,
    /// The key was seen before: the earlier refund is returned and no money moves.
    Replayed,
    /// Another call with the key was in flight and the gateway refused this one.
    Conflict,
}

/// Who an event belongs to, as a trace shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    Worker(WorkerId),
    Redis,
    Store,
    Gateway,
    Queue,
    Faults,
    /// The second store, the settlement ledger.
    Settlement,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Worker(w) => write!(f, "{w}"),
            Actor::Redis => f.write_str("redis"),
            Actor::Store => f.write_str("store"),
            Actor::Gateway => f.write_str("gateway"),
            Actor::Queue => f.write_str("queue"),
            Actor::Faults => f.write_str("faults"),
            Actor::Settlement => f.write_str("settlement"),
        }
    }
}

impl EventKind {
    pub fn actor(&self) -> Actor {
        use EventKind::*;
        match self {
            JobEnqueued { .. } | JobDelivered { .. } | VisibilityExpired { .. } | JobAcked { .. } => {
                Actor::Queue
            }
            LeaseGranted { .. }
            | LeaseRefused { .. }
            | LeaseExpired { .. }
            | LeaseReleased { .. }
            | LeaseDeleted { .. }
            | LeaseExtended { .. }
            | LeaseRearmed { .. }
            | LeaseSet { .. }
            | LeaseRead { .. }
            | ScriptFailed { .. }
            | TokenIssued { .. }
            | CounterSeeded { .. }
            | RedisRestarted { .. }
            | RedisFailedOver { .. }
            | ReplicaWaited { .. }
            | RedisRefused { .. } => Actor::Redis,
            Write { .. } | RefundsArrived { .. } | StatementFailed { .. } => Actor::Store,
            Lookup { .. }
            | LookupBehind { .. }
            | RefundCalled { .. }
            | GatewayRefused { .. }
            | RefundTimedOut { .. } => Actor::Gateway,
            Step { worker, .. } => Actor::Worker(*worker),
            FaultFired { .. } | Resumed { .. } | Restarted { .. } => Actor::Faults,
            SettlementEnrolled { .. } | SettlementPosted { .. } | SettlementLookup { .. } => {
                Actor::Settlement
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// Milliseconds since the run started.
    pub at_ms: u64,
    pub kind: EventKind,
}

/// One line of a trace: the event with its wall-clock time and actor.
#[derive(Serialize)]
struct TraceLine<'a> {
    at: String,
    actor: String,
    #[serde(flatten)]
    kind: &'a EventKind,
}

/// Writes the history as JSON Lines, one event a line.
pub fn write_trace(events: &[Event], base: WallMs, out: &mut impl std::io::Write) -> std::io::Result<()> {
    for e in events {
        let line = TraceLine {
            at: base.plus(e.at_ms).to_string(),
            actor: e.kind.actor().to_string(),
            kind: &e.kind,
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The trace's fingerprint: a 64-bit hash of every event in order. Same seed, same build,
/// same hash.
pub fn trace_hash(events: &[Event]) -> u64 {
    let mut h = Gathered { pending: Vec::with_capacity(GATHER), hash: twox_hash::XxHash64::with_seed(0) };
    events.len().hash(&mut h);
    for e in events {
        e.hash(&mut h);
    }
    h.finish()
}

/// How many bytes are gathered before they are hashed: small enough to stay in cache,
/// large enough that the hash runs over long stretches.
const GATHER: usize = 64 * 1024;

/// A hasher that gathers the bytes it is fed and hashes them a stretch at a time: the
/// same value as feeding them to the hash piece by piece (a streaming hash does not depend
/// on how its input is cut), without a call into it for every field of every event, and
/// without holding a long history's bytes all at once.
struct Gathered {
    pending: Vec<u8>,
    hash: twox_hash::XxHash64,
}

impl Hasher for Gathered {
    fn write(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= GATHER {
            self.hash.write(&self.pending);
            self.pending.clear();
        }
    }

    fn finish(&self) -> u64 {
        let mut hash = self.hash.clone();
        hash.write(&self.pending);
        hash.finish()
    }
}
