//! Time in a live run: the machine's wall clock, read by every process alike, and the
//! scenario's milliseconds it stands for. At a time scale of 0.1 one real millisecond is
//! ten of the story's, so the worked example's two minutes pass in twelve seconds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// When this process last stopped waiting (heard an answer, or a sleep ended), on the wall
/// clock; 0 before it first did.
static WOKE_US: AtomicU64 = AtomicU64::new(0);

/// How long this process has slept on purpose in all (a hop's latency, a held request, a
/// wait of the model's), in real microseconds: the gateway service makes up a worker's
/// lateness only for the rest of the time between its calls (`live::pace`).
static SLEPT_US: AtomicU64 = AtomicU64::new(0);

/// How much of the story the worker's own requests and waits stand for in all, by their
/// nominal times (a hop's latency and hold-ups, a wait of the model's), in real
/// microseconds: the simulation spends exactly that between two refund calls, so the
/// gateway service paces a call from its previous one by it (`live::pace`). Only the
/// batch's own requests count: a renewal runs beside the batch, not between its calls.
static DUE_US: AtomicU64 = AtomicU64::new(0);

/// The batch's requests and waits stand for `real` more of the story.
pub fn due(real: Duration) {
    DUE_US.fetch_add(real.as_micros() as u64, Ordering::SeqCst);
}

/// What the batch's requests and waits stand for in all, in microseconds.
pub fn due_us() -> u64 {
    DUE_US.load(Ordering::SeqCst)
}

/// The process slept `real` on purpose.
pub fn slept(real: Duration) {
    SLEPT_US.fetch_add(real.as_micros() as u64, Ordering::SeqCst);
}

/// How long the process has slept on purpose in all, in microseconds.
pub fn slept_us() -> u64 {
    SLEPT_US.load(Ordering::SeqCst)
}

/// The process stopped waiting now.
pub fn woke() {
    WOKE_US.store(wall_us(), Ordering::SeqCst);
}

/// How long the process has worked since it last stopped waiting, if it ever waited.
pub fn since_woke() -> Option<Duration> {
    match WOKE_US.load(Ordering::SeqCst) {
        0 => None,
        at => Some(Duration::from_micros(wall_us().saturating_sub(at))),
    }
}

/// Microseconds since the Unix epoch on the machine's wall clock, or on the run's clock
/// while a controlled run has taken the machine's place (`take_over`).
pub fn wall_us() -> u64 {
    match run_clock() {
        Some(clock) => clock.now_us(),
        None => SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0),
    }
}

/// A clock that takes the machine's place in a controlled run (`foreign::controlled`): time
/// moves only when the run moves it, and a thread that waits for a time waits until the
/// run lets it go on, which it does one waiter at a time.
pub trait RunClock: Send + Sync {
    /// The run's time, in the wall clock's microseconds.
    fn now_us(&self) -> u64;
    /// Returns when the run lets the calling thread go on at `at_us` or later.
    fn sleep_until(&self, at_us: u64);
    /// As `sleep_until`, for a request held on its way out: `false` when its party was
    /// killed meanwhile, and the request should not go on.
    fn delay_until(&self, at_us: u64) -> bool {
        self.sleep_until(at_us);
        true
    }
    /// Books a wake at `at_us` for a thread yet to be started, so that the run counts it
    /// from now on; the thread waits for it with `wait_booked` and says when it is done.
    fn book(&self, at_us: u64) -> u64;
    fn wait_booked(&self, ticket: u64);
    fn done_booked(&self);
    /// Returns at `at_us` (`u64::MAX`: never by itself), or sooner when what the caller
    /// waits for has changed (`changed`): `true`; `false` when the caller's party is gone
    /// (a crash) or the run is over, and it should wait no more.
    fn wait_for_change(&self, at_us: u64) -> bool;
    /// As `wait_for_change`, for a wait for a job: the run may also end it (`false`) once
    /// it has lasted long enough in turns.
    fn poll_for_change(&self, at_us: u64) -> bool {
        self.wait_for_change(at_us)
    }
    /// Lets every caller of `wait_for_change` look again, now.
    fn changed(&self);
}

/// Whether a run's clock has taken the machine's place (read before the lock beside it).
static TAKEN: AtomicBool = AtomicBool::new(false);
static RUN_CLOCK: Mutex<Option<Arc<dyn RunClock>>> = Mutex::new(None);

/// From now on this process's time is `clock`'s (`None`: the machine's again).
pub fn take_over(clock: Option<Arc<dyn RunClock>>) {
    let mut held = RUN_CLOCK.lock().unwrap_or_else(|p| p.into_inner());
    TAKEN.store(clock.is_some(), Ordering::SeqCst);
    *held = clock;
}

fn run_clock() -> Option<Arc<dyn RunClock>> {
    if !TAKEN.load(Ordering::Relaxed) {
        return None;
    }
    RUN_CLOCK.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Whether a run's clock has taken the machine's place.
pub fn controlled() -> bool {
    TAKEN.load(Ordering::Relaxed)
}

/// Waits `real` on the machine's clock, or on the run's.
pub fn sleep(real: Duration) {
    if real.is_zero() {
        return;
    }
    match run_clock() {
        Some(clock) => clock.sleep_until(clock.now_us() + real.as_micros() as u64),
        None => std::thread::sleep(real),
    }
}

/// Holds the calling request `real` on its way out, on the machine's clock or the run's:
/// `false` when the run's clock saw its copy killed meanwhile (the machine's cannot tell).
pub fn delay(real: Duration) -> bool {
    if real.is_zero() {
        return true;
    }
    match run_clock() {
        Some(clock) => clock.delay_until(clock.now_us() + real.as_micros() as u64),
        None => {
            std::thread::sleep(real);
            true
        }
    }
}

/// Waits until `at_us` on the wall clock, or on the run's.
pub fn sleep_until_us(at_us: u64) {
    match run_clock() {
        Some(clock) => clock.sleep_until(at_us),
        None => std::thread::sleep(Duration::from_micros(at_us.saturating_sub(wall_us()))),
    }
}

/// On a run's clock: returns at `at_us`, or sooner when `changed` is called; `false` when
/// the caller should wait no more (its party is gone, the run is over). On the machine's
/// clock it returns at once (its callers ask again).
pub fn wait_for_change(at_us: u64) -> bool {
    run_clock().is_none_or(|clock| clock.wait_for_change(at_us))
}

/// As `wait_for_change`, for a take waiting for a job (`RunClock::poll_for_change`).
pub fn poll_for_change(at_us: u64) -> bool {
    run_clock().is_none_or(|clock| clock.poll_for_change(at_us))
}

/// On a run's clock: what a caller of `wait_for_change` waits for has changed.
pub fn changed() {
    if let Some(clock) = run_clock() {
        clock.changed();
    }
}

/// Runs `then` on a thread of its own at `at_us`, on the wall clock or the run's (booked
/// before this returns, so that the run waits for it).
pub fn at_time(at_us: u64, then: impl FnOnce() + Send + 'static) {
    match run_clock() {
        Some(clock) => {
            let ticket = clock.book(at_us);
            std::thread::spawn(move || {
                clock.wait_booked(ticket);
                then();
                clock.done_booked();
            });
        }
        None => {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_micros(at_us.saturating_sub(wall_us())));
                then();
            });
        }
    }
}

/// The run's clock: when it started on the wall clock, and how fast its story runs.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct LiveClock {
    pub start_us: u64,
    /// Real time per story time: 0.1 runs the story ten times faster than written.
    pub scale: f64,
}

impl LiveClock {
    /// The story's milliseconds at wall-clock microsecond `at_us`.
    pub fn story_ms(&self, at_us: u64) -> u64 {
        (at_us.saturating_sub(self.start_us) as f64 / 1000.0 / self.scale) as u64
    }

    /// How long `story_ms` of the story lasts in real time.
    pub fn real(&self, story_ms: u64) -> Duration {
        Duration::from_secs_f64(story_ms as f64 / 1000.0 * self.scale)
    }
}

impl fencesim_model::Clock for LiveClock {
    fn now_ms(&self) -> u64 {
        self.story_ms(wall_us())
    }

    /// Sleeps on a thread of the blocking pool, to the tens of microseconds: the runtime's
    /// timer keeps only whole milliseconds, late by up to one each time, and a renewal that
    /// sleeps thirty times a story second fell 4 story ms behind the simulated one in two
    /// story seconds, where a fresh failure turned on a renewal 1 ms before a claim.
    async fn sleep_ms(&self, ms: u64) {
        let started = std::time::Instant::now();
        let real = self.real(ms);
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(real)).await;
        slept(started.elapsed());
        woke();
    }
}
