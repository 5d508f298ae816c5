//! The system under test: refund-settlement workers that hold a lease with a TTL and,
//! depending on the mechanism, carry a fencing token into every write.
//!
//! This crate is written as production code would be. It defines the traits it needs
//! (a lease store, a token source, a refund store, a payment gateway, a job queue and a
//! probe that marks protocol steps) and never mentions simulation: the `fencesim-sim`
//! crate implements the traits over simulated components, and a real backend would
//! implement the same ones.

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim`. The repository's .cargo/config.toml sets it \
     for every cargo command run inside it (`cargo build`, `cargo test`, `cargo install --locked --path .`); \
     a RUSTFLAGS variable replaces that setting, and `cargo install --git` never reads it. \
     Run instead: RUSTFLAGS=\"--cfg madsim\" cargo install --locked --git <the repository's URL> fencesim"
);

pub mod deploy;
pub mod ids;
pub mod job;
pub mod lease;
pub mod mechanism;
pub mod named;
pub mod payment;
pub mod ports;
pub mod refund;
pub mod settlement;
pub mod step;
pub mod store;
pub mod worker;

pub use deploy::{CounterAdmin, SequenceAdmin};
pub use ids::{group_thousands, Cents, GatewayRef, JobId, MerchantId, RefundId, Token, WorkerId};
pub use job::{Delivery, Job};
pub use lease::{LeaseClient, TokenClient};
pub use mechanism::{Mechanism, Safety};
pub use payment::{Retry, RETRY};
pub use ports::{
    BackendError, Clock, Gateway, IdempotencyKey, JobQueue, LeaseStore, Probe, RedisInstance, RefundStore,
    SettlementStore, TokenSource,
};
pub use refund::{
    FenceViolation, GatewayCall, GatewayError, Receipt, RefundRow, RefundState, RowImage, WriteGuard,
    WriteKind, WriteOutcome,
};
pub use settlement::{
    Posting, SettlementEntry, SettlementOutcome, SettlementStatements, SettlementViolation, SettlementWrite,
    SqliteSettlement,
};
pub use step::{AbandonReason, Step, StepKind};
pub use store::{SqliteRefunds, Statements};
pub use worker::{BatchOutcome, Ports, Worker, WorkerConfig};
