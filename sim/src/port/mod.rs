//! The adapters: one per port the model defines, each a worker's connection to one part of
//! the world. They wait out the simulated latency, apply the request to a pure core under
//! the world's lock, and record what really happened.

mod clock;
mod gateway;
mod probe;
mod queue;
mod redis;
mod settlement;
mod store;

use crate::fault::Hop;
use crate::world::World;
use fencesim_model::WorkerId;
use std::sync::Arc;

pub use clock::ClockClient;
pub use gateway::GatewayClient;
pub use probe::{recorded as step_recorded, ProbeClient};
pub use queue::QueueClient;
pub use redis::RedisClient;
pub use settlement::SettlementClient;
pub use store::StoreClient;

/// Who is connected: the world and the worker.
#[derive(Clone)]
pub(crate) struct Link {
    pub world: Arc<World>,
    pub worker: WorkerId,
}

impl Link {
    /// A request of this worker's reaches its component on `hop` now: kept in the run's
    /// order log, if it keeps one.
    pub fn arrived(&self, hop: Hop) {
        if let Some(log) = &self.world.order {
            let now = self.world.clock.now_ms();
            log.lock().unwrap_or_else(|p| p.into_inner()).request(now, self.worker, hop);
        }
    }

    /// A request is about to leave on `hop`: count it and fire the faults it triggers. A
    /// fault that stops this worker's own process takes hold right here, before it leaves.
    pub async fn request(&self, hop: Hop) {
        let counted = self.world.calls.count(self.worker, hop);
        if !counted.fires() {
            return;
        }
        let stops = {
            let mut state = self.world.lock();
            self.world.fire_call_triggers(&mut state, self.worker, hop, counted)
        };
        if stops {
            madsim::task::yield_now().await;
        }
    }
}
