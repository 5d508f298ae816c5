//! The job queue as a worker reaches it: wait for a delivery, ack it.

use super::Link;
use crate::history::EventKind;
use fencesim_model::{Delivery, JobQueue};

#[derive(Clone)]
pub struct QueueClient(pub(crate) Link);

impl JobQueue for QueueClient {
    async fn receive(&self) -> Option<Delivery> {
        let Link { world, worker } = &self.0;
        loop {
            {
                let mut state = world.lock();
                if state.queue.is_closed() {
                    return None;
                }
                let now = world.clock.now_ms();
                let mut got = None;
                world.with_queue(&mut state, now, |queue, out| got = queue.receive(*worker, now, out));
                if got.is_some() {
                    return got;
                }
            }
            world.changed.notify_one();
            world.worker_wake[worker.0 as usize].notified().await;
        }
    }

    async fn ack(&self, delivery: Delivery) -> bool {
        let Link { world, worker } = &self.0;
        let mut state = world.lock();
        let now = world.clock.now_ms();
        let accepted = state.queue.ack(delivery);
        let job = delivery.job.id;
        state.record(now, EventKind::JobAcked { job, worker: *worker, receipt: delivery.receipt, accepted });
        world.changed.notify_one();
        accepted
    }
}
