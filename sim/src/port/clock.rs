//! The worker's own clock, for validity times and the renewal timer.

use super::Link;
use fencesim_model::Clock;

#[derive(Clone)]
pub struct ClockClient(pub(crate) Link);

impl Clock for ClockClient {
    fn now_ms(&self) -> u64 {
        self.0.world.clock.now_ms()
    }

    async fn sleep_ms(&self, ms: u64) {
        self.0.world.clock.sleep_ms(ms).await
    }
}
