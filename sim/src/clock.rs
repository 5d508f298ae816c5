//! Simulated time in whole milliseconds since the start of a run.
//!
//! madsim adds 50-100 ns of jitter per poll and rounds sleeps up, so every component
//! schedules against absolute millisecond deadlines from the run's origin and reads the
//! time truncated to the millisecond: the times a run prints are exact.

use madsim::time::{sleep_until, Instant, TimeHandle};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The run's clock. It reads the runtime's time source directly: the same time as
/// `Instant::now()` inside the runtime, without the detour through the system call the
/// runtime intercepts (a run reads the time thousands of times).
#[derive(Clone)]
pub struct SimClock {
    origin: Instant,
    /// The time source's own count at `origin`.
    origin_elapsed: Duration,
    time: TimeHandle,
    /// How many times a task waited on the runtime's timer through this clock: what the
    /// bench prices, each wait costing the runtime a timer, a wake and a poll.
    sleeps: Arc<AtomicU64>,
}

impl fmt::Debug for SimClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimClock").field("now_ms", &self.now_ms()).finish()
    }
}

impl SimClock {
    /// Starts the run's clock at the present simulated instant (inside the runtime).
    pub fn start() -> SimClock {
        let time = TimeHandle::current();
        SimClock { origin: time.now_instant(), origin_elapsed: time.elapsed(), time, sleeps: Arc::default() }
    }

    /// Milliseconds since the run started.
    pub fn now_ms(&self) -> u64 {
        (self.time.elapsed() - self.origin_elapsed).as_millis() as u64
    }

    /// Sleeps until the run's clock reads `at_ms` (returns at once if it already does).
    pub async fn sleep_until_ms(&self, at_ms: u64) {
        if self.now_ms() < at_ms {
            self.sleeps.fetch_add(1, Ordering::Relaxed);
            sleep_until(self.instant_of(at_ms)).await;
        }
    }

    /// Sleeps for `ms` from the present millisecond.
    pub async fn sleep_ms(&self, ms: u64) {
        if ms > 0 {
            self.sleep_until_ms(self.now_ms() + ms).await;
        }
    }

    /// How many times a task has waited on the runtime's timer through this clock.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::Relaxed)
    }

    pub fn instant_of(&self, at_ms: u64) -> Instant {
        self.origin + Duration::from_millis(at_ms)
    }
}

/// A wall-clock time of day in milliseconds, printed `HH:MM:SS.mmm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WallMs(pub u64);

impl WallMs {
    /// A time of day from hours, minutes and seconds.
    pub const fn hms(h: u64, m: u64, s: u64) -> WallMs {
        WallMs(((h * 60 + m) * 60 + s) * 1000)
    }

    pub fn plus(self, ms: u64) -> WallMs {
        WallMs(self.0 + ms)
    }
}

impl fmt::Display for WallMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0 % 1000;
        let s = self.0 / 1000;
        write!(f, "{:02}:{:02}:{:02}.{:03}", (s / 3600) % 24, (s / 60) % 60, s % 60, ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_prints_hours_minutes_seconds_and_millis() {
        assert_eq!(WallMs::hms(10, 0, 0).to_string(), "10:00:00.000");
        assert_eq!(WallMs::hms(10, 0, 26).plus(7).to_string(), "10:00:26.007");
        assert_eq!(WallMs::hms(23, 59, 59).plus(1999).to_string(), "00:00:00.999");
    }

    #[test]
    fn the_clock_reads_whole_milliseconds_of_simulated_time() {
        let rt = madsim::runtime::Runtime::with_seed_and_config(7, madsim::Config::default());
        rt.block_on(async {
            let clock = SimClock::start();
            assert_eq!(clock.now_ms(), 0);
            clock.sleep_until_ms(30_000).await;
            assert_eq!(clock.now_ms(), 30_000);
            clock.sleep_ms(1_000).await;
            assert_eq!(clock.now_ms(), 31_000);
            clock.sleep_until_ms(10).await; // in the past: no wait
            assert_eq!(clock.now_ms(), 31_000);
        });
    }
}
