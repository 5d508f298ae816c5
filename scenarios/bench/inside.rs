//! The SQL inside a run: the real time a simulated run spends in its statements
//! (`fencesim_sim::sql_watch`), against the same statements back to back on a bare
//! database (the floor). What is left of the run is the simulation's own path around
//! its requests, so the floor ratio splits into what the statements cost in a run and
//! what the path costs.
//!
//! Inside a run the runtime answers the process's clock with simulated time; the watch
//! reads the machine's clock through the C library's own function, found past the
//! runtime's, as the runtime itself does outside a run.

use std::sync::OnceLock;

type ClockGettime = unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int;

/// The C library's `clock_gettime`, past the one the runtime puts in front of it (none
/// when the library cannot be asked).
fn library_clock() -> Option<ClockGettime> {
    static CLOCK: OnceLock<Option<ClockGettime>> = OnceLock::new();
    *CLOCK.get_or_init(|| {
        // SAFETY: a lookup by a constant, nul-terminated name; a non-null answer is the
        // address of the C library's `clock_gettime`, whose signature is the one named.
        unsafe {
            let found = libc::dlsym(libc::RTLD_NEXT, c"clock_gettime".as_ptr());
            (!found.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, ClockGettime>(found))
        }
    })
}

/// The machine's monotonic clock in nanoseconds, inside a run or not (0 when it cannot
/// be read: the bench asks `can_watch` before it relies on it).
fn machine_ns() -> u64 {
    let Some(clock_gettime) = library_clock() else { return 0 };
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: the C library's own function, given a clock every platform has and a
    // timespec it may write.
    match unsafe { clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } {
        0 => now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64,
        _ => 0,
    }
}

/// Whether the machine's clock can be read inside a run.
pub fn can_watch() -> bool {
    library_clock().is_some() && machine_ns() > 0
}

/// Runs `f` with its SQL watched: what it gave, and the milliseconds its statements took.
pub fn watched<T>(f: impl FnOnce() -> T) -> (T, f64) {
    fencesim_sim::sql_watch::start(machine_ns);
    let out = f();
    let spent_ns = fencesim_sim::sql_watch::stop();
    (out, spent_ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{run, DEFAULT_SEED};
    use crate::scenario::worked_example;

    /// The machine's clock reads real time inside a run (where the process's own clock is
    /// the simulated one), a watched run's SQL takes part of the run's time, not none and
    /// not more than all of it, and the watched run is the same run: the same trace.
    #[test]
    fn a_watched_run_counts_some_of_its_own_time_as_sql() {
        assert!(can_watch(), "the machine's clock cannot be read past the runtime's");
        let scenario = worked_example();
        let clock = std::time::Instant::now();
        let (outcome, sql_ms) = watched(|| run(&scenario, DEFAULT_SEED).expect("the worked example runs"));
        let run_ms = clock.elapsed().as_secs_f64() * 1e3;
        assert!(outcome.record.events.len() > 100, "the run did not run");
        let unwatched = run(&scenario, DEFAULT_SEED).expect("the worked example runs");
        assert_eq!(outcome.trace_hash, unwatched.trace_hash, "watching the SQL changed the run");
        assert!(sql_ms > 0.0 && sql_ms < run_ms, "SQL {sql_ms} ms of a {run_ms} ms run");
        let (unwatched, nothing) = watched(|| 1);
        assert_eq!((unwatched, nothing), (1, 0.0), "nothing ran SQL, yet time was counted");
    }
}
