//! What the runtime will do next, known to the run: how many of the run's tasks are ready
//! (woken and not yet polled) and when each timer the run has set falls due. With both, a
//! wait the runtime would hand straight back (no other task ready, no timer due before it)
//! is answered in place: the same two draws from the runtime's random stream and the same
//! clock, without the timer, the return of pending up the worker's chain of futures and
//! its poll back down (docs/request-path.md).
//!
//! Every task of a run is spawned through `Counted` and every timer set through
//! `Tracked`, so both counts are exact; a task or a timer the run did not make would make
//! them wrong, so the run makes none that way.

use madsim::rand::Rng;
use madsim::time::{Duration, Instant, Sleep, TimeHandle};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// How far past a timer's instant the runtime moves its clock when it fires it (its
/// `advance_to_next_event`), so that the clock reads at least the instant.
const FIRED_PAST: Duration = Duration::from_nanos(50);

thread_local! {
    /// Whether waits may be answered in place in the runs made on this thread (on unless
    /// a test or the bench turns it off: a run is made on the thread that asks for it).
    static IN_PLACE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Turns answering waits in place on or off for the runs this thread makes from now on.
pub fn set_in_place(on: bool) {
    IN_PLACE.with(|cell| cell.set(on));
}

/// Whether waits are answered in place in the runs this thread makes.
pub fn in_place() -> bool {
    IN_PLACE.with(std::cell::Cell::get)
}

/// The run's tasks that are ready, and the timers it has set that have not fired.
#[derive(Debug, Default)]
pub struct Readiness {
    ready: AtomicUsize,
    /// Each timer's instant, as often as one was set for it (the runtime sets one each
    /// time a pending sleep is polled, and keeps it after the sleep is dropped), earliest
    /// first; those at or before the clock have fired.
    timers: Mutex<BinaryHeap<Reverse<Instant>>>,
    /// Waits answered in place so far.
    answered: AtomicU64,
}

impl Readiness {
    /// Waits answered in place so far in this run.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    fn timer_set(&self, at: Instant) {
        self.timers.lock().unwrap_or_else(|p| p.into_inner()).push(Reverse(at));
    }

    /// The wait of `sleep`, answered in place when the runtime would do nothing else
    /// before it ends: no task of the run ready and no other timer due by the instant the
    /// runtime would move its clock to. Then its timer is set and fired as the runtime sets
    /// and fires it (its timers are a heap whose ties come out in an order its history
    /// decides, so the heap must see the same pushes and pops), its draws are made as it
    /// makes them (the clock's step after a poll, the pick among the one ready task) and its
    /// clock moved as it moves it; true if so.
    pub fn answer_in_place(&self, time: &TimeHandle, sleep: &mut Sleep) -> bool {
        if !in_place() || self.ready.load(Ordering::SeqCst) != 0 || sleep.is_elapsed() {
            return false;
        }
        let now = time.now_instant();
        let fires_at = sleep.deadline() + FIRED_PAST;
        {
            let mut timers = self.timers.lock().unwrap_or_else(|p| p.into_inner());
            while timers.peek().is_some_and(|&Reverse(first)| first <= now) {
                timers.pop();
            }
            if timers.peek().is_some_and(|&Reverse(first)| first <= fires_at) {
                return false;
            }
        }
        // the timer set, as a poll of the pending sleep sets it (nobody to wake when it fires)
        let _ = Pin::new(sleep).poll(&mut Context::from_waker(Waker::noop()));
        let mut rng = madsim::rand::thread_rng();
        let step: u64 = rng.gen_range(50..100);
        time.advance(Duration::from_nanos(step));
        let _only: usize = rng.gen_range(0..1);
        time.advance(fires_at - time.now_instant());
        self.answered.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// A sleep whose timers are counted: each poll that finds it pending sets one.
pub struct Tracked {
    sleep: Sleep,
    readiness: Arc<Readiness>,
}

impl Tracked {
    pub fn new(sleep: Sleep, readiness: Arc<Readiness>) -> Tracked {
        Tracked { sleep, readiness }
    }
}

impl Future for Tracked {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.sleep.is_elapsed() {
            let at = self.sleep.deadline();
            self.readiness.timer_set(at);
        }
        Pin::new(&mut self.sleep).poll(cx)
    }
}

const IDLE: u8 = 0;
const READY: u8 = 1;
const DONE: u8 = 2;

/// A task's standing: ready (woken, not yet polled), idle or done, and the runtime's
/// own waker for it.
struct Standing {
    state: AtomicU8,
    readiness: Arc<Readiness>,
    runtime: Mutex<Option<Waker>>,
}

impl Standing {
    fn woken(&self) {
        if self.state.compare_exchange(IDLE, READY, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            self.readiness.ready.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, state: u8) {
        if self.state.swap(state, Ordering::SeqCst) == READY {
            self.readiness.ready.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Wake for Standing {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken();
        if let Some(waker) = self.runtime.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            waker.wake_by_ref();
        }
    }
}

/// A task of the run, counted as ready from when it is made or woken until it is polled.
pub struct Counted<F> {
    future: Pin<Box<F>>,
    standing: Arc<Standing>,
    waker: Waker,
}

impl<F: Future> Counted<F> {
    /// The task, counted as ready: the runtime runs a task it was given.
    pub fn new(future: F, readiness: Arc<Readiness>) -> Counted<F> {
        readiness.ready.fetch_add(1, Ordering::SeqCst);
        let standing =
            Arc::new(Standing { state: AtomicU8::new(READY), readiness, runtime: Mutex::new(None) });
        let waker = Waker::from(standing.clone());
        Counted { future: Box::pin(future), standing, waker }
    }
}

/// A task's mark: what the run calls when the runtime wakes the task without its waker
/// (killing its node wakes each of the node's tasks with the runtime's own).
#[derive(Clone)]
pub struct Mark(Arc<Standing>);

impl Mark {
    /// The runtime woke the task: it is ready until polled (or dropped).
    pub fn woken(&self) {
        self.0.woken();
    }
}

impl<F> Counted<F> {
    pub fn mark(&self) -> Mark {
        Mark(self.standing.clone())
    }
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        {
            let mut runtime = this.standing.runtime.lock().unwrap_or_else(|p| p.into_inner());
            if !runtime.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                *runtime = Some(cx.waker().clone());
            }
        }
        this.standing.leave(IDLE);
        let mut counted = Context::from_waker(&this.waker);
        let polled = this.future.as_mut().poll(&mut counted);
        if polled.is_ready() {
            this.standing.leave(DONE);
        }
        polled
    }
}

impl<F> Drop for Counted<F> {
    fn drop(&mut self) {
        self.standing.leave(DONE);
    }
}
