//! The conductor of a controlled run: the run's clock, and who goes next. Every request a
//! copy of the program sends (to Redis, to the database, to the gateway, to the queue) is
//! held where it arrives, on a ticket with the story time it may go on at (its arrival
//! and the hop's latency, which the seed draws). While any copy is working (it has no
//! request held, or one of its requests is on its way to a server) nothing moves; once
//! every copy waits, the conductor moves the clock to the earliest ticket, ties broken by
//! the seed, and lets that one request go on. So the run's interleaving, its expiries and
//! its replies are the seed's, not the machine's.
//!
//! Redis and PostgreSQL read the run's clock from the file the conductor writes before each
//! move (libfaketime, `live::faketime`): a lease expires when the story's time passes it,
//! and `clock_timestamp()` is the story's. A pause is a copy whose tickets wait until the
//! pause is over; a crash cancels its tickets (the requests never go on).
//!
//! A copy that neither waits nor sends for `grace` of real time (it sleeps on its own
//! clock, or it hangs) is left out of the next choice, and the release order says so: its
//! next request then arrives at a moment the machine chose.

use crate::foreign::start_up::wait_until_still;
use crate::live::clock::RunClock;
use fencesim_model::WorkerId;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The story's start on the servers' clocks: 2030-01-01 00:00:00 UTC, in microseconds.
pub const EPOCH_US: u64 = 1_893_456_000_000_000;

/// What a ticket holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// A copy's request, until its turn to go on.
    Turn,
    /// A wait a server or service takes while it answers (a latency, a held reply): a
    /// crash of the copy does not cut it short, as a server does not know its client died.
    Sleep,
    /// A copy's request held on its way out (a delay the plan armed for it): a crash of
    /// the copy ends the wait and the request never goes on, as a simulated worker's
    /// request never leaves a process that crashed. Left standing, a killed copy's
    /// delayed request counted as its copy waiting, and the copy started again was not
    /// waited for while it started up (seed 2,135).
    Delay,
    /// A wait for what the caller waits on to change (the lock server's return), woken
    /// early by `changed`.
    Change,
    /// A wait for a job (a take): as `Change`, and over, with nothing, once `POLL_TURNS`
    /// other tickets have gone on since it began. Story time may stand still through many
    /// turns (hops of no latency), and a take held through them in real time outlasts the
    /// copy's HTTP timeout at a moment the machine chooses.
    Poll,
}

/// How many tickets may go on while a take waits for a job.
pub const POLL_TURNS: usize = 50;

#[derive(Debug)]
struct Ticket {
    /// The copy it holds a request of (`None`: a thread of the run's own, booked ahead).
    party: Option<WorkerId>,
    wake_us: u64,
    /// What it holds, in words: the tie-break and the release order's entry.
    name: String,
    kind: Held,
    fired: bool,
    cancelled: bool,
    /// How many tickets had gone on when it was booked.
    since: usize,
}

#[derive(Default)]
struct State {
    now_us: u64,
    begun: bool,
    next_ticket: u64,
    tickets: BTreeMap<u64, Ticket>,
    /// Each copy's requests inside the run (arrived, not yet answered).
    inside: BTreeMap<WorkerId, u32>,
    /// The copies the conductor waits for.
    live: BTreeSet<WorkerId>,
    paused_until: BTreeMap<WorkerId, u64>,
    /// Booked threads let go and not yet done.
    loose: u32,
    /// Every ticket let go, in order, with its story time: the history's spine.
    order: Vec<(u64, String)>,
    /// Copies left out of the choices since they last worked past the grace, until their
    /// next request arrives.
    idle: BTreeSet<WorkerId>,
    /// Copies a crash killed, with the story time each is due to start again.
    restarts: Vec<(WorkerId, u64)>,
    /// When a restart killed the lock server, until the driver has taken it up.
    redis_down_at: Option<u64>,
    /// Whether the lock server is away (killed, not yet started again).
    redis_away: bool,
    /// Copies killed and not started again: a request of theirs never goes on.
    dead: BTreeSet<WorkerId>,
    /// The run is over: nothing waits any more.
    finished: bool,
    /// When a copy last sent Redis or the database something before the story began, or
    /// last heard its answer.
    last_start_up: Option<Instant>,
    /// Start-up requests sent and not yet answered.
    start_up_open: u32,
    /// Copies started again after a crash and still starting up, each with when it last
    /// sent Redis or the database something: their requests go on as they come until
    /// they ask the queue for a job and have been still a while.
    starting: BTreeMap<WorkerId, Instant>,
    /// The time last written to the servers' clock file.
    written_us: u64,
}

/// Whether a copy's processes (`None`: every copy's) sleep, and how long they have run.
type Sleeping = Box<dyn Fn(Option<WorkerId>) -> Option<u64> + Send + Sync>;

pub struct Conductor {
    state: Mutex<State>,
    moved: Condvar,
    seed: u64,
    /// The file Redis and PostgreSQL read their clock from.
    clock_file: PathBuf,
    /// How the end of a start-up is seen early (`foreign::start_up`).
    sleeping: std::sync::OnceLock<Sleeping>,
}

thread_local! {
    /// The copy (and its request, in words) the calling thread acts for.
    static ACTING: RefCell<Option<(WorkerId, String)>> = const { RefCell::new(None) };
}

/// The calling thread acts for `worker`'s request `name` from now on.
pub fn acting_for(worker: WorkerId, name: String) {
    ACTING.with(|acting| *acting.borrow_mut() = Some((worker, name)));
}

/// The calling thread acts for no copy's request in its turn (a copy's start-up).
pub fn acting_for_none() {
    ACTING.with(|acting| *acting.borrow_mut() = None);
}

fn acting() -> Option<(WorkerId, String)> {
    ACTING.with(|acting| acting.borrow().clone())
}

/// The seed's draw for `name`: a number that depends on nothing else.
pub fn draw(seed: u64, name: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (seed, name).hash(&mut hasher);
    hasher.finish()
}

impl Conductor {
    pub fn new(seed: u64, clock_file: PathBuf) -> Result<Conductor, String> {
        let sleeping = std::sync::OnceLock::new();
        let conductor =
            Conductor { state: Mutex::default(), moved: Condvar::new(), seed, clock_file, sleeping };
        conductor.write_clock(0)?;
        Ok(conductor)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The story's time, in microseconds from its start.
    pub fn story_us(&self) -> u64 {
        self.state().now_us
    }

    /// How to tell that a copy's processes sleep (`foreign::start_up::asleep`).
    pub fn tell_sleep_by(&self, sleeping: Sleeping) {
        let _ = self.sleeping.set(sleeping);
    }

    fn sleeping(&self, worker: Option<WorkerId>) -> Option<u64> {
        self.sleeping.get().and_then(|sleeping| sleeping(worker))
    }

    /// The story begins once the copies' start-up is over (`foreign::start_up`: a client
    /// that connects in the background is done), or after `at_most`: every request from
    /// then on waits for its turn.
    pub fn begin(&self, at_most: Duration) {
        let asked = Instant::now();
        let last = || {
            let state = self.state();
            // a start-up request under way is start-up going on
            Some(if state.start_up_open > 0 { Instant::now() } else { state.last_start_up.unwrap_or(asked) })
        };
        wait_until_still(last, || self.sleeping(None), at_most);
        self.state().begun = true;
    }

    /// `worker` sent Redis or the database something while starting up (before the story
    /// began, or after its restart).
    pub fn starting_up(&self, worker: WorkerId) {
        let mut state = self.state();
        state.start_up_open += 1;
        state.last_start_up = Some(Instant::now());
        if let Some(at) = state.starting.get_mut(&worker) {
            *at = Instant::now();
        }
    }

    /// The answer to a start-up request of `worker`'s went back.
    pub fn started_up_reply(&self, worker: WorkerId) {
        let mut state = self.state();
        state.start_up_open = state.start_up_open.saturating_sub(1);
        state.last_start_up = Some(Instant::now());
        if let Some(at) = state.starting.get_mut(&worker) {
            *at = Instant::now();
        }
    }

    /// Whether `worker`'s requests wait for their turns: the story has begun and the copy
    /// is not starting up.
    pub fn gated(&self, worker: WorkerId) -> bool {
        let state = self.state();
        state.begun && !state.starting.contains_key(&worker)
    }

    /// Whether `worker` is starting up again after a restart.
    pub fn restarting(&self, worker: WorkerId) -> bool {
        self.state().starting.contains_key(&worker)
    }

    /// `worker`, starting up again, asked the queue for a job: once its start-up is over
    /// (`foreign::start_up`) its requests wait for their turns again.
    pub fn started(&self, worker: WorkerId) {
        let last = || self.state().starting.get(&worker).copied();
        wait_until_still(last, || self.sleeping(Some(worker)), Duration::from_secs(5));
        self.state().starting.remove(&worker);
        self.moved.notify_all();
    }

    pub fn begun(&self) -> bool {
        self.state().begun
    }

    /// The copies to wait for.
    pub fn set_live(&self, live: BTreeSet<WorkerId>) {
        let mut state = self.state();
        if state.live != live {
            state.live = live;
            self.moved.notify_all();
        }
    }

    /// A request of `worker`'s arrived.
    pub fn arrive(&self, worker: WorkerId) {
        let mut state = self.state();
        *state.inside.entry(worker).or_default() += 1;
        state.idle.remove(&worker);
        self.moved.notify_all();
    }

    /// A request of `worker`'s was answered (or dropped).
    pub fn leave(&self, worker: WorkerId) {
        let mut state = self.state();
        let inside = state.inside.entry(worker).or_default();
        *inside = inside.saturating_sub(1);
        self.moved.notify_all();
    }

    /// Waits for `name`'s turn at `at_us` (story microseconds from the run's start on the
    /// wall clock's scale, as `now_us` gives them); `false` when a crash cancelled it.
    pub fn hold(&self, party: Option<WorkerId>, name: String, at_us: u64, kind: Held) -> bool {
        let mut state = self.state();
        let dead = party.is_some_and(|worker| state.dead.contains(&worker));
        if state.finished || (dead && kind != Held::Sleep) {
            return false;
        }
        let id = state.next_ticket;
        state.next_ticket += 1;
        let since = state.order.len();
        let ticket = Ticket { party, wake_us: at_us, name, kind, fired: false, cancelled: false, since };
        state.tickets.insert(id, ticket);
        self.moved.notify_all();
        self.wait_ticket(state, id)
    }

    fn wait_ticket(&self, mut state: MutexGuard<'_, State>, id: u64) -> bool {
        loop {
            let ticket = state.tickets.get(&id).expect("a ticket is removed only by its holder");
            if ticket.fired || ticket.cancelled {
                let ticket = state.tickets.remove(&id).expect("the ticket");
                self.moved.notify_all();
                return ticket.fired;
            }
            state = self.moved.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// `worker` is paused until story time `until_us`: its tickets wait until then.
    pub fn pause(&self, worker: WorkerId, until_us: u64) {
        let mut state = self.state();
        let until = state.paused_until.entry(worker).or_default();
        *until = (*until).max(until_us);
    }

    /// `worker`'s copy was killed, to start again at story time `restart_at`: its held
    /// requests never go on, and it is not waited for until it is started again.
    pub fn crashed(&self, worker: WorkerId, restart_at: u64) {
        let mut state = self.state();
        state.live.remove(&worker);
        state.paused_until.remove(&worker);
        state.restarts.push((worker, restart_at));
        state.dead.insert(worker);
        // what the servers are doing for it goes on at its time; what it sent and that has
        // not gone on, and what it waits for, never will
        let cut = |t: &Ticket| t.party == Some(worker) && !t.fired && t.kind != Held::Sleep;
        for ticket in state.tickets.values_mut().filter(|t| cut(t)) {
            ticket.cancelled = true;
        }
        self.moved.notify_all();
    }

    /// `worker`'s copy was started again: it starts up as it would, and the run waits
    /// until it asks the queue for a job.
    pub fn revived(&self, worker: WorkerId) {
        let mut state = self.state();
        state.dead.remove(&worker);
        state.starting.insert(worker, Instant::now());
    }

    /// The copies killed since last asked, each with when it is due to start again.
    pub fn take_restarts(&self) -> Vec<(WorkerId, u64)> {
        std::mem::take(&mut self.state().restarts)
    }

    /// A restart killed the lock server now.
    pub fn redis_killed(&self) {
        let mut state = self.state();
        state.redis_down_at = Some(state.now_us);
        state.redis_away = true;
    }

    /// When the lock server was killed, if it was since last asked.
    pub fn take_redis_down(&self) -> Option<u64> {
        self.state().redis_down_at.take()
    }

    /// The lock server answers again.
    pub fn redis_back(&self) {
        self.state().redis_away = false;
        self.changed();
    }

    pub fn redis_away(&self) -> bool {
        self.state().redis_away
    }

    /// Whether `worker` waits: a request of its inside the run, and every such request held.
    fn waiting(state: &State, worker: WorkerId) -> bool {
        let (inside, held) = Self::inside_and_held(state, worker);
        inside >= 1 && held >= inside
    }

    /// `worker`'s requests inside the run, and how many of its tickets are held.
    fn inside_and_held(state: &State, worker: WorkerId) -> (usize, usize) {
        // a ticket cancelled (a crash, a take waited out) holds nothing: its thread goes on
        let held =
            state.tickets.values().filter(|t| t.party == Some(worker) && !t.fired && !t.cancelled).count();
        (state.inside.get(&worker).copied().unwrap_or(0) as usize, held)
    }

    /// Who is working now: each live copy not waiting, each copy no longer live with a
    /// request still under way at a server (a crash does not stop the server's work), and
    /// `None` for the run's own threads.
    fn working(state: &State) -> Vec<Option<WorkerId>> {
        let under_way = |worker: &WorkerId| {
            let (inside, held) = Self::inside_and_held(state, *worker);
            inside > held
        };
        let live = state.live.iter().filter(|w| !state.idle.contains(w) && !Self::waiting(state, **w));
        let gone = state.inside.keys().filter(|w| !state.live.contains(w) && under_way(w));
        let mut copies: Vec<WorkerId> = live.chain(gone).copied().collect();
        copies.sort();
        copies.into_iter().map(Some).chain((state.loose > 0).then_some(None)).collect()
    }

    /// Waits up to `within` until every live copy waits and the run's own threads are
    /// done; otherwise says who is working.
    pub fn wait_quiet(&self, within: Duration) -> Result<(), Vec<Option<WorkerId>>> {
        let deadline = Instant::now() + within;
        let mut state = self.state();
        loop {
            let working = Self::working(&state);
            let left = deadline.saturating_duration_since(Instant::now());
            if working.is_empty() || left.is_zero() {
                return if working.is_empty() { Ok(()) } else { Err(working) };
            }
            state = self.moved.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// The copies `idle` worked past the grace: they are left out of the choices until
    /// their next request arrives, and the release order says so.
    pub fn leave_out(&self, idle: &[WorkerId]) {
        let mut state = self.state();
        let now = state.now_us;
        for worker in idle {
            state.idle.insert(*worker);
            state.order.push((now, format!("went on without {worker} (working past the grace)")));
        }
    }

    /// When the next ticket may go.
    pub fn next_wake(&self) -> Option<u64> {
        let state = self.state();
        Self::next(&state, self.seed).map(|(_, at)| at)
    }

    /// The next ticket and when it may go: the earliest, ties broken by the seed.
    fn next(state: &State, seed: u64) -> Option<(u64, u64)> {
        state
            .tickets
            .iter()
            .filter(|(_, t)| !t.fired && !t.cancelled && t.wake_us != u64::MAX)
            .map(|(id, t)| {
                let paused = t.party.and_then(|w| state.paused_until.get(&w)).copied().unwrap_or(0);
                (*id, t.wake_us.max(paused).max(state.now_us), draw(seed, &t.name))
            })
            .min_by_key(|(_, at, tie)| (*at, *tie))
            .map(|(id, at, _)| (id, at))
    }

    /// Moves the story's clock to `at_us` (never back), the servers' clock with it.
    pub fn advance_to(&self, at_us: u64) -> Result<(), String> {
        let now = {
            let mut state = self.state();
            state.now_us = state.now_us.max(at_us);
            if state.written_us == state.now_us {
                return Ok(());
            }
            state.written_us = state.now_us;
            state.now_us
        };
        self.write_clock(now)
    }

    /// Lets the next ticket go, its time now; what it was, or `None` when none waits for a time.
    pub fn fire_next(&self) -> Result<Option<(u64, String)>, String> {
        let Some((id, at)) = Self::next(&self.state(), self.seed) else { return Ok(None) };
        // no two requests go on at one microsecond: a row change is known to be the one
        // statement's in flight by its time alone
        let at = at.max(self.state().order.last().map_or(0, |(last, _)| last + 1));
        self.advance_to(at)?;
        let mut state = self.state();
        let ticket = state.tickets.get_mut(&id).expect("the next ticket");
        ticket.fired = true;
        let (name, party) = (ticket.name.clone(), ticket.party);
        if party.is_none() {
            state.loose += 1;
        }
        let now = state.now_us;
        state.order.push((now, name.clone()));
        let turns = state.order.len();
        let waited_out = |t: &Ticket| t.kind == Held::Poll && !t.fired && turns - t.since >= POLL_TURNS;
        for ticket in state.tickets.values_mut().filter(|t| waited_out(t)) {
            ticket.cancelled = true;
        }
        self.moved.notify_all();
        Ok(Some((now, name)))
    }

    /// The run is over: every ticket still held is cancelled (its request never goes on),
    /// and every wait from now on returns at once.
    pub fn finish(&self) {
        let mut state = self.state();
        state.finished = true;
        for ticket in state.tickets.values_mut().filter(|t| !t.fired) {
            ticket.cancelled = true;
        }
        self.moved.notify_all();
    }

    /// Notes `what` in the release order at the current time (a fault at a time, a copy
    /// left out of a choice).
    pub fn note(&self, what: String) {
        let mut state = self.state();
        let now = state.now_us;
        state.order.push((now, what));
    }

    /// Every ticket let go so far, in order, with its story time in microseconds.
    pub fn order(&self) -> Vec<(u64, String)> {
        self.state().order.clone()
    }

    fn write_clock(&self, story_us: u64) -> Result<(), String> {
        crate::live::faketime::freeze_at_us(&self.clock_file, EPOCH_US + story_us)
    }
}

impl RunClock for Conductor {
    fn now_us(&self) -> u64 {
        EPOCH_US + self.story_us()
    }

    /// A wait of a thread that acts for a copy's request in its turn is that request's
    /// ticket; any other thread (one relaying a copy's start-up, outside the turns) does
    /// not wait: a hold-up armed for such a request is not given.
    fn sleep_until(&self, at_us: u64) {
        let at = at_us.saturating_sub(EPOCH_US);
        if let Some((worker, name)) = acting() {
            let _ = self.hold(Some(worker), format!("{name} waits to {at}"), at, Held::Sleep);
        }
    }

    fn delay_until(&self, at_us: u64) -> bool {
        let at = at_us.saturating_sub(EPOCH_US);
        match acting() {
            Some((worker, name)) => self.hold(Some(worker), format!("{name} waits to {at}"), at, Held::Delay),
            None => true,
        }
    }

    fn book(&self, at_us: u64) -> u64 {
        let at = at_us.saturating_sub(EPOCH_US);
        let name = match acting() {
            Some((worker, name)) => format!("{name}: {worker}'s call lands at {at}"),
            None => format!("a call lands at {at}"),
        };
        let mut state = self.state();
        let id = state.next_ticket;
        state.next_ticket += 1;
        let cancelled = state.finished;
        let since = state.order.len();
        let ticket =
            Ticket { party: None, wake_us: at, name, kind: Held::Sleep, fired: false, cancelled, since };
        state.tickets.insert(id, ticket);
        id
    }

    fn wait_booked(&self, ticket: u64) {
        let _ = self.wait_ticket(self.state(), ticket);
    }

    fn done_booked(&self) {
        let mut state = self.state();
        state.loose = state.loose.saturating_sub(1);
        self.moved.notify_all();
    }

    fn wait_for_change(&self, at_us: u64) -> bool {
        self.wait_held(at_us, Held::Change)
    }

    fn poll_for_change(&self, at_us: u64) -> bool {
        self.wait_held(at_us, Held::Poll)
    }

    fn changed(&self) {
        let mut state = self.state();
        let now = state.now_us;
        let waits = |t: &Ticket| matches!(t.kind, Held::Change | Held::Poll) && !t.fired;
        for ticket in state.tickets.values_mut().filter(|t| waits(t)) {
            ticket.wake_us = now;
        }
        self.moved.notify_all();
    }
}

impl Conductor {
    /// A wait of the calling copy's request on the run's clock (`RunClock::wait_for_change`).
    fn wait_held(&self, at_us: u64, kind: Held) -> bool {
        let at = match at_us {
            u64::MAX => u64::MAX,
            at => at.saturating_sub(EPOCH_US),
        };
        match acting() {
            Some((worker, name)) => self.hold(Some(worker), format!("{name} waits for a change"), at, kind),
            // outside the turns (no copy's request in its turn): the caller asks again soon
            None => {
                std::thread::sleep(Duration::from_millis(1));
                !self.state().finished
            }
        }
    }
}

#[cfg(test)]
#[path = "conductor_tests.rs"]
mod tests;
