//! When the gateway service answers a worker's refund call, on the wall clock.
//!
//! The simulation gives a worker's own work no time: a row takes its gateway latency (and
//! whatever the worker slept on its other hops), and the worked example's A claims `r_815`
//! at 10:00:26, four story seconds before its lease ends. A real process spends real time
//! on each row, and on a busy machine now and then more than the latency. So a call is
//! answered when the simulation's pace would answer it, or at once if the worker arrives
//! later than that; and the lateness its own work made (not its sleeps, not a pause) is
//! owed and made up by the calls after it, which are answered that much sooner. Without
//! the making up a row lost all its work beyond the latency, and on a slowed machine the
//! live A claimed `r_815` after its lease had expired.
//!
//! What is owed is bounded (`CATCH_UP_MS`, `CATCH_UP_REAL`): a gap the worker cannot tell
//! from work (a freeze of its whole process that the coordinator made, shorter than a
//! pause; a freeze the worker makes itself it counts as slept) is shortened by that much
//! at most.

/// The shortest gap between a worker's calls, in the story, that is a pause rather than
/// the worker's own work: the call then takes its whole latency from its arrival.
pub const PAUSE_MS: u64 = 1_000;

/// The most of the story a worker may be behind its simulated pace and make up...
pub const CATCH_UP_MS: u64 = 100;

/// ...and the most of real time: the lateness a busy machine gives a row is real time,
/// and at a slow time scale a story bound alone would allow a second of it.
pub const CATCH_UP_REAL: std::time::Duration = std::time::Duration::from_millis(25);

/// What a worker says with a refund call, in wall-clock microseconds since it started: how
/// long it had slept on purpose in all, and what its batch's requests and waits stand for in
/// all by their nominal times (`live::clock::due`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Told {
    pub slept_us: u64,
    pub due_us: u64,
}

/// A worker's last refund call at the gateway, in wall-clock microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    /// When it was answered.
    pub answered_us: u64,
    /// When the simulation's pace would have answered it (at most `answered_us`).
    pub on_time_us: u64,
    /// What the worker said with the call.
    pub told: Told,
}

/// The bounds of a pace, in wall-clock microseconds.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub pause_us: u64,
    pub catch_up_us: u64,
}

/// The call that arrives at `arrived_us`, from a worker that said `told` with it, answered
/// `latency_us` after the simulation's pace: its answer and its pace. The simulation
/// answers a call its latency after the worker's previous answer and the nominal times of
/// what the worker did in between (a confirm, the next claim, a lookup), its own work free.
pub fn answer(last: Option<Pace>, arrived_us: u64, told: Told, latency_us: u64, bounds: Bounds) -> Pace {
    answer_and_lost(last, arrived_us, told, latency_us, bounds).0
}

/// `answer`, and how much of the call's lateness is not made up, in wall-clock
/// microseconds: how much later than the simulation's pace the worker's story goes on from
/// this call (0 when it is on time, or after a pause, where the pace starts afresh).
pub fn answer_and_lost(
    last: Option<Pace>,
    arrived_us: u64,
    told: Told,
    latency_us: u64,
    bounds: Bounds,
) -> (Pace, u64) {
    let fresh = Pace { answered_us: arrived_us + latency_us, on_time_us: arrived_us + latency_us, told };
    let Some(last) = last.filter(|l| arrived_us.saturating_sub(l.answered_us) < bounds.pause_us) else {
        return (fresh, 0);
    };
    let between = told.due_us.saturating_sub(last.told.due_us);
    let on_time_us = last.on_time_us + between + latency_us;
    if arrived_us <= on_time_us {
        return (Pace { answered_us: on_time_us, on_time_us, told }, 0);
    }
    // Late: answered at once. What was owed before, and the gap's work (the gap less what
    // the worker slept or its requests stood for in it), may be made up; what it slept may not.
    let gap = arrived_us - last.answered_us;
    let waited = told.slept_us.saturating_sub(last.told.slept_us).max(between);
    let worked = gap.saturating_sub(waited);
    let owed = (last.answered_us - last.on_time_us) + worked;
    let behind = (arrived_us - on_time_us).min(owed).min(bounds.catch_up_us);
    (
        Pace { answered_us: arrived_us, on_time_us: arrived_us - behind, told },
        arrived_us - on_time_us - behind,
    )
}

/// A worker's first refund call since it was handed a job (`delivered`: when, in wall-clock
/// microseconds, and how long it had been frozen in all by then): how late it is, less what
/// it was frozen for in between. The simulation's worker reaches its first call in the
/// nominal times of a few statements, which this leaves in. A gap as long as a pause is not
/// counted, as `answer` does not count it: the worker may have slept on purpose. `None` for
/// any later call, or a worker never handed a job.
pub fn started_late(
    delivered: Option<(u64, u64)>,
    last: Option<Pace>,
    arrived_us: u64,
    frozen_us: u64,
    bounds: Bounds,
) -> Option<u64> {
    let (delivered_us, frozen_then) = delivered?;
    if last.is_some_and(|last| last.answered_us >= delivered_us) {
        return None;
    }
    let frozen_between = frozen_us.saturating_sub(frozen_then);
    let gap = arrived_us.saturating_sub(delivered_us).saturating_sub(frozen_between);
    Some(if gap < bounds.pause_us { gap } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds { pause_us: 250_000, catch_up_us: 25_000 };

    fn pace(answered_us: u64, on_time_us: u64, slept_us: u64) -> Pace {
        Pace { answered_us, on_time_us, told: slept(slept_us) }
    }

    fn slept(slept_us: u64) -> Told {
        Told { slept_us, due_us: 0 }
    }

    #[test]
    fn work_within_the_latency_is_part_of_it() {
        let first = answer(None, 1_000, slept(0), 8_000, BOUNDS);
        assert_eq!(first, pace(9_000, 9_000, 0));
        assert_eq!(answer(Some(first), 10_500, slept(0), 8_000, BOUNDS), pace(17_000, 17_000, 0));
    }

    #[test]
    fn work_beyond_the_latency_is_made_up_by_the_calls_after_it() {
        let last = pace(9_000, 9_000, 0);
        // 12 ms of work against an 8 ms latency: answered at once, 4 ms behind
        let late = answer(Some(last), 21_000, slept(0), 8_000, BOUNDS);
        assert_eq!(late, pace(21_000, 17_000, 0));
        // the next call, after 1 ms of work, is answered 4 ms sooner than its latency
        assert_eq!(answer(Some(late), 22_000, slept(0), 8_000, BOUNDS), pace(25_000, 25_000, 0));
    }

    #[test]
    fn what_the_worker_slept_is_not_made_up() {
        let last = pace(9_000, 9_000, 0);
        // 100 ms slept (a held statement) and 2 ms of work: only the work is owed
        let late = answer(Some(last), 111_000, slept(100_000), 8_000, BOUNDS);
        assert_eq!(late, pace(111_000, 109_000, 100_000));
    }

    #[test]
    fn the_statements_between_two_calls_take_their_nominal_time() {
        let last = Pace { answered_us: 9_000, on_time_us: 9_000, told: Told { slept_us: 0, due_us: 0 } };
        // a confirm and the next claim, 2 ms each, slept in 3.5 ms: the call is answered
        // its 8 ms latency after them, as the simulation answers it
        let told = Told { slept_us: 3_500, due_us: 4_000 };
        assert_eq!(answer(Some(last), 13_500, told, 8_000, BOUNDS).answered_us, 21_000);
        // late by 1 ms beyond them: answered at once, the 1 ms owed
        let late = answer(Some(last), 22_000, told, 8_000, BOUNDS);
        assert_eq!((late.answered_us, late.on_time_us), (22_000, 21_000));
    }

    #[test]
    fn what_is_owed_is_bounded() {
        let last = pace(9_000, 9_000, 0);
        let late = answer(Some(last), 69_000, slept(0), 8_000, BOUNDS);
        assert_eq!(late, pace(69_000, 44_000, 0), "25 ms of the 52 owed");
    }

    #[test]
    fn a_first_call_is_late_by_the_work_since_the_job_was_handed_out() {
        let delivered = Some((100_000, 5_000));
        // the first call: 60 ms of work after the delivery, 20 of them frozen
        assert_eq!(started_late(delivered, None, 160_000, 25_000, BOUNDS), Some(40_000));
        // a gap as long as a pause is not work
        assert_eq!(started_late(delivered, None, 400_000, 5_000, BOUNDS), Some(0));
        // a call after one answered since the delivery is not the first
        assert_eq!(started_late(delivered, Some(pace(120_000, 120_000, 0)), 160_000, 5_000, BOUNDS), None);
        // one answered before the delivery (the last batch's) does not count
        assert_eq!(
            started_late(delivered, Some(pace(90_000, 90_000, 0)), 160_000, 5_000, BOUNDS),
            Some(60_000)
        );
        assert_eq!(started_late(None, None, 160_000, 0, BOUNDS), None);
    }

    #[test]
    fn what_is_not_made_up_is_counted_as_lost() {
        let last = pace(9_000, 9_000, 0);
        // on time, and late within what may be made up: nothing lost
        assert_eq!(answer_and_lost(Some(last), 12_000, slept(0), 8_000, BOUNDS).1, 0);
        assert_eq!(answer_and_lost(Some(last), 21_000, slept(0), 8_000, BOUNDS).1, 0);
        // 52 ms late, 25 of them may be made up: the story goes on 27 ms behind the pace
        assert_eq!(answer_and_lost(Some(last), 69_000, slept(0), 8_000, BOUNDS).1, 27_000);
        // after a pause the pace starts afresh: nothing is counted
        assert_eq!(answer_and_lost(Some(last), 400_000, slept(0), 8_000, BOUNDS).1, 0);
    }

    #[test]
    fn a_pause_takes_the_whole_latency_from_the_arrival() {
        let last = pace(9_000, 5_000, 0);
        assert_eq!(answer(Some(last), 300_000, slept(0), 8_000, BOUNDS), pace(308_000, 308_000, 0));
    }
}
