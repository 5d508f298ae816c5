//! The adapters: one per port the model defines, each a worker's connection to one part of
//! the world. They wait out the simulated latency, apply the request to a pure core under
//! the world's lock, and record what really happened.

mod clock;
mod gateway;
mod probe;
mod queue;
mod redis;
mod store;

use crate::world::World;
use fencesim_model::WorkerId;
use std::sync::Arc;

pub use clock::ClockClient;
pub use gateway::GatewayClient;
pub use probe::ProbeClient;
pub use queue::QueueClient;
pub use redis::RedisClient;
pub use store::StoreClient;

/// Who is connected: the world and the worker.
#[derive(Clone)]
pub(crate) struct Link {
    pub world: Arc<World>,
    pub worker: WorkerId,
}
