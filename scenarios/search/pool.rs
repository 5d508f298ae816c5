//! The one parallel pool: a function over an ordered range of work items, on `jobs`
//! threads, with what the caller sees independent of how many threads ran it.
//!
//! Each result is shown to `on_arrival` on the calling thread as it arrives (progress, or
//! writing a failure out at once), then handed to `in_order` in item order, without gaps.
//! When a result `stops` the run, no item after it reaches `in_order`, and the threads
//! stop taking items past it. Only the results that arrive ahead of their turn are held,
//! so memory stays flat however many items run. Setting `interrupted` (Ctrl-C) stops the
//! threads taking new items; what already ran is still delivered.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

/// How many threads, and the flag that interrupts them.
pub struct Pool<'a> {
    pub jobs: usize,
    pub interrupted: &'a AtomicBool,
}

/// What the threads share: the next item to take, the last one worth taking.
struct Shared<'a> {
    items: Range<u64>,
    next: AtomicU64,
    stop_above: AtomicU64,
    interrupted: &'a AtomicBool,
    failed: AtomicBool,
}

impl Shared<'_> {
    /// The next item for a thread, or none when the run is over for it.
    fn take(&self) -> Option<u64> {
        // never past the end: a counter that wrapped would start the range over
        let end = self.items.end;
        let item = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < end).then(|| n + 1))
            .ok()?;
        let over = item > self.stop_above.load(Ordering::Relaxed)
            || self.interrupted.load(Ordering::Relaxed)
            || self.failed.load(Ordering::Relaxed);
        (!over).then_some(item)
    }
}

/// Delivers results in item order as they arrive out of order.
struct InOrder<T> {
    waiting: BTreeMap<u64, T>,
    expected: u64,
    done: bool,
}

impl<T> InOrder<T> {
    fn deliver(
        &mut self,
        item: u64,
        result: T,
        stops: &impl Fn(&T) -> bool,
        in_order: &mut impl FnMut(u64, T),
    ) {
        self.waiting.insert(item, result);
        while !self.done {
            let Some(result) = self.waiting.remove(&self.expected) else { break };
            self.done = stops(&result);
            in_order(self.expected, result);
            self.expected += 1;
        }
    }
}

impl Pool<'_> {
    /// Runs `work` over `items`; returns how many items `in_order` received, or the error
    /// of the lowest item that failed (no new item starts after an error).
    pub fn run<T: Send>(
        &self,
        items: Range<u64>,
        stops: impl Fn(&T) -> bool + Sync,
        work: impl Fn(u64) -> Result<T, String> + Sync,
        mut on_arrival: impl FnMut(u64, &mut T),
        mut in_order: impl FnMut(u64, T),
    ) -> Result<u64, String> {
        let shared = Shared {
            items: items.clone(),
            next: AtomicU64::new(items.start),
            stop_above: AtomicU64::new(u64::MAX),
            interrupted: self.interrupted,
            failed: AtomicBool::new(false),
        };
        let (sender, receiver) = mpsc::channel::<(u64, Result<T, String>)>();
        let mut order = InOrder { waiting: BTreeMap::new(), expected: items.start, done: false };
        let mut error: Option<(u64, String)> = None;
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.max(1) {
                let sender = sender.clone();
                let (shared, work, stops) = (&shared, &work, &stops);
                scope.spawn(move || {
                    while let Some(item) = shared.take() {
                        let result = work(item);
                        if result.as_ref().is_ok_and(stops) {
                            shared.stop_above.fetch_min(item, Ordering::Relaxed);
                        }
                        if sender.send((item, result)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(sender);
            for (item, result) in receiver {
                match result {
                    Ok(mut result) => {
                        on_arrival(item, &mut result);
                        order.deliver(item, result, &stops, &mut in_order);
                    }
                    Err(message) => {
                        shared.failed.store(true, Ordering::Relaxed);
                        if error.as_ref().is_none_or(|(first, _)| item < *first) {
                            error = Some((item, message));
                        }
                    }
                }
            }
        });
        match error {
            Some((_, message)) => Err(message),
            None => Ok(order.expected - items.start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squares(jobs: usize, stop_at: Option<u64>) -> (u64, Vec<(u64, u64)>) {
        let never = AtomicBool::new(false);
        let mut seen = Vec::new();
        let ran = Pool { jobs, interrupted: &never }
            .run(
                0..200,
                |square: &u64| stop_at.is_some_and(|at| *square == at * at),
                |item| Ok(item * item),
                |_, _| {},
                |item, square| seen.push((item, square)),
            )
            .unwrap();
        (ran, seen)
    }

    #[test]
    fn what_the_caller_sees_does_not_depend_on_the_threads() {
        for stop_at in [None, Some(57)] {
            let one = squares(1, stop_at);
            for jobs in [2, 3, 8] {
                assert_eq!(squares(jobs, stop_at), one);
            }
            assert_eq!(one.0, stop_at.map_or(200, |at| at + 1));
            assert!(one
                .1
                .iter()
                .enumerate()
                .all(|(i, (item, square))| *item == i as u64 && *square == item * item));
        }
    }

    #[test]
    fn an_error_is_the_lowest_failing_item() {
        let never = AtomicBool::new(false);
        let pool = Pool { jobs: 2, interrupted: &never };
        let failed = pool.run(
            0..50,
            |_: &u64| false,
            |item| if item % 10 == 7 { Err(format!("item {item}")) } else { Ok(item) },
            |_, _| {},
            |_, _| {},
        );
        assert_eq!(failed, Err("item 7".to_owned()));
    }

    #[test]
    fn a_range_that_ends_at_the_top_of_the_counter_ends() {
        let never = AtomicBool::new(false);
        let mut seen = Vec::new();
        let top = u64::MAX - 3..u64::MAX;
        let ran = Pool { jobs: 3, interrupted: &never }
            .run(top.clone(), |_: &u64| false, Ok, |_, _| {}, |item, _| seen.push(item))
            .unwrap();
        assert_eq!((ran, seen), (3, top.collect::<Vec<u64>>()));
    }
}
