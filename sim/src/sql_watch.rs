//! The real time a run spends in its SQL, for `fencesim bench`: how much the statements
//! cost inside a run, where the simulation's own work runs between them, against what the
//! same statements cost back to back on a bare database (the SQL floor). Off unless the
//! bench turns it on for its thread; when on, a clock is read before and after each
//! statement and nothing else changes: no event, no draw, no simulated time.
//!
//! The clock is the caller's: inside a run the runtime answers the process's clock with
//! simulated time, so the bench hands in one that reads the machine's.

use std::cell::Cell;

#[derive(Clone, Copy)]
struct Watch {
    clock: fn() -> u64,
    spent_ns: u64,
}

thread_local! {
    static WATCH: Cell<Option<Watch>> = const { Cell::new(None) };
}

/// Starts counting, on this thread, the time spent in SQL, read with `clock` (nanoseconds
/// from any fixed instant).
pub fn start(clock: fn() -> u64) {
    WATCH.set(Some(Watch { clock, spent_ns: 0 }));
}

/// Stops counting: the nanoseconds spent in SQL since `start` (none when it was not
/// started).
pub fn stop() -> u64 {
    WATCH.take().map_or(0, |watch| watch.spent_ns)
}

/// Runs `sql`, counting its time when the bench watches this thread.
pub(crate) fn timed<T>(sql: impl FnOnce() -> T) -> T {
    let Some(watch) = WATCH.get() else { return sql() };
    let started = (watch.clock)();
    let out = sql();
    let spent = (watch.clock)().saturating_sub(started);
    if let Some(mut watch) = WATCH.get() {
        watch.spent_ns += spent;
        WATCH.set(Some(watch));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks() -> u64 {
        thread_local! { static NOW: Cell<u64> = const { Cell::new(0) }; }
        NOW.set(NOW.get() + 7);
        NOW.get()
    }

    /// Unwatched, a statement runs and nothing is counted; watched, each call adds the
    /// clock's advance around it, and stopping hands the sum back once.
    #[test]
    fn only_a_watched_thread_counts_and_each_call_counts_its_own_time() {
        assert_eq!(timed(|| 5), 5);
        assert_eq!(stop(), 0);
        start(ticks);
        assert_eq!(timed(|| 1) + timed(|| 2), 3);
        assert_eq!(stop(), 14, "two calls, each read 7 ns apart");
        assert_eq!(stop(), 0);
    }
}
