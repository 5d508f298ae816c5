//! Faults given to a team's worker program from outside, at the moments the plan names by
//! what the proxies see. A fault at one of the worker's steps fires on the reply that shows
//! the step (the claim of `r_815` is the reply to the statement that set it `sending`; a
//! lease acquired is the reply `OK` to `SET NX`; a token taken is the reply to `INCR`),
//! before that reply goes back: a pause stops the program's process group there, so the
//! reply lands while it is stopped, as the worked example's worker stalls right after its
//! claim. A fault before the worker's n-th request on a hop holds that request: a pause
//! keeps it until the pause is over, a crash kills the program before it goes on.
//!
//! What the proxies cannot see is refused with its name (a step only the worker knows, such
//! as a lookup's result kept to itself): never run as something it is not.

use crate::foreign::conductor::Conductor;
use crate::foreign::history::housekeeping;
use crate::foreign::programs::Groups;
use crate::foreign::redis_seen::Keys;
use crate::foreign::rows_seen;
use crate::live::clock::LiveClock;
use crate::live::log::EventLog;
use crate::live::pgproxy::{PgHooks, PgObserved};
use crate::live::plan::Planned;
use crate::live::proxy::{Gate, Observed};
use fencesim_model::{StepKind, WorkerId, WriteKind};
use fencesim_sim::{Fault, FaultKind, Hop, Trigger, WorldConfig};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The steps the proxies and the queue see, and so the steps a fault may name for a worker
/// of a team's.
pub const SEEN_STEPS: [StepKind; 5] = [
    StepKind::JobReceived,
    StepKind::LeaseAcquired,
    StepKind::TokenTaken,
    StepKind::AfterClaim,
    StepKind::AfterConfirm,
];

/// The plan split by who takes each fault: the proxies (at steps and requests) or the
/// supervisor (at times); refused, naming the fault, when neither can.
pub struct OutsidePlan {
    pub on_the_wire: Vec<Planned>,
    pub at_times: Vec<(u64, Planned)>,
}

pub fn outside_plan(world: &WorldConfig) -> Result<OutsidePlan, String> {
    let mut plan = OutsidePlan { on_the_wire: Vec::new(), at_times: Vec::new() };
    for (index, fault) in world.faults.faults.iter().enumerate() {
        match given(fault) {
            Ok(Given::OnTheWire) => plan.on_the_wire.push((index, fault.clone())),
            Ok(Given::At(at_ms)) => plan.at_times.push((at_ms, (index, fault.clone()))),
            Err(why) => return Err(why),
        }
    }
    plan.at_times.sort_by_key(|(at, _)| *at);
    Ok(plan)
}

/// Who gives a fault to a team's program.
enum Given {
    /// A proxy, at a request or a reply.
    OnTheWire,
    /// The supervisor, at this story time.
    At(u64),
}

/// Whether a team's program can be given `fault` from outside.
pub fn givable(fault: &Fault) -> bool {
    given(fault).is_ok()
}

fn given(fault: &Fault) -> Result<Given, String> {
    let seen = match fault.trigger {
        Trigger::Step { step, .. } => SEEN_STEPS.contains(&step),
        Trigger::Call { hop, .. } => hop != Hop::Settlement,
        _ => false,
    };
    match (fault.kind, fault.trigger) {
        (kind, _) if seen && acts_on_the_wire(kind) => Ok(Given::OnTheWire),
        (kind, Trigger::At { at_ms }) if at_a_time(kind) => Ok(Given::At(at_ms)),
        (kind, trigger) => Err(format!(
            "the plan's fault {} {}: a team's worker program is not given it yet (the proxies see \
                     the steps {}, and requests to Redis, the database and the gateway)",
            kind.name(),
            trigger.describe(),
            SEEN_STEPS.map(<&str>::from).join(", "),
        )),
    }
}

/// The kinds a proxy or the gateway fires where the program's traffic shows the trigger.
fn acts_on_the_wire(kind: FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::Pause { .. }
            | FaultKind::Crash { .. }
            | FaultKind::RedisRestart { .. }
            | FaultKind::RedisDelay { .. }
            | FaultKind::DbDelay { .. }
            | FaultKind::RedisReplyDelay { .. }
            | FaultKind::DbReplyDelay { .. }
            | FaultKind::GatewayLatency { .. }
            | FaultKind::LostResponse { .. }
            | FaultKind::GatewayTimeout { .. }
            | FaultKind::GatewayOutage { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::LookupLag { .. }
    )
}

/// The kinds the supervisor fires at a story time.
fn at_a_time(kind: FaultKind) -> bool {
    acts_on_the_wire(kind)
        || matches!(
            kind,
            FaultKind::ExpireLease { .. } | FaultKind::Redeliver { .. } | FaultKind::DuplicateDelivery { .. }
        )
}

/// The faults the proxies fire, with what each worker has done so far.
pub struct Outside {
    faults: Vec<Planned>,
    fired: Mutex<Vec<bool>>,
    /// How many times each worker reached each step, and how many requests it sent on each hop.
    counts: Mutex<BTreeMap<(WorkerId, Counted), u32>>,
    groups: Groups,
    log: Arc<EventLog>,
    clock: Mutex<LiveClock>,
    keys: Keys,
    /// Hold-ups armed for each worker's next request, and its answer, on a hop.
    armed: Mutex<BTreeMap<(WorkerId, Hop), Armed>>,
    /// The lock server (its process id and address) a restart kills, and the gateway
    /// service a gateway fault is sent to.
    servers: Mutex<Serving>,
    /// A controlled run's conductor: a pause is then a copy not let go, a crash cancels
    /// what it holds, and their times are the run's.
    conducted: Mutex<Option<Arc<Conductor>>>,
}

/// The servers the faults act on.
#[derive(Clone, Debug, Default)]
pub struct Serving {
    pub redis_pid: Option<i32>,
    pub redis_url: String,
    pub gateway_url: String,
}

/// Hold-ups armed for a worker's next request on a hop and for its answer.
#[derive(Clone, Copy, Debug, Default)]
struct Armed {
    request: Duration,
    reply: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Counted {
    Step(StepKind),
    Request(Hop),
}

impl Outside {
    pub fn new(
        faults: Vec<Planned>,
        groups: Groups,
        log: Arc<EventLog>,
        clock: LiveClock,
        keys: Keys,
    ) -> Outside {
        let fired = Mutex::new(vec![false; faults.len()]);
        // nothing is counted until the story begins (`begin` sets its start)
        let clock = LiveClock { start_us: u64::MAX, ..clock };
        Outside {
            faults,
            fired,
            counts: Mutex::default(),
            groups,
            log,
            clock: Mutex::new(clock),
            keys,
            armed: Mutex::default(),
            servers: Mutex::default(),
            conducted: Mutex::default(),
        }
    }

    /// The faults act on a controlled run's copies through `conductor`.
    pub fn conduct(&self, conductor: Arc<Conductor>) {
        *self.conducted.lock().unwrap_or_else(|p| p.into_inner()) = Some(conductor);
    }

    fn conducted(&self) -> Option<Arc<Conductor>> {
        self.conducted.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The servers the faults act on.
    pub fn serving(&self, servers: Serving) {
        *self.servers.lock().unwrap_or_else(|p| p.into_inner()) = servers;
    }

    /// The lock server started again after a restart, as process `pid`.
    pub fn redis_started(&self, pid: Option<i32>) {
        self.servers.lock().unwrap_or_else(|p| p.into_inner()).redis_pid = pid;
    }

    /// The process groups the faults signal.
    pub fn groups(&self) -> Groups {
        self.groups.clone()
    }

    /// The story starts on `clock`.
    pub fn begin(&self, clock: LiveClock) {
        *self.clock.lock().unwrap_or_else(|p| p.into_inner()) = clock;
    }

    /// Whether the story has started: what a program sends before it (its start-up's
    /// queries) is not counted, as the simulated worker's count starts with the story.
    fn in_the_story(&self) -> bool {
        let start_us = self.clock.lock().unwrap_or_else(|p| p.into_inner()).start_us;
        crate::live::clock::wall_us() >= start_us
    }

    /// Counts one more of `counted` for `worker`, and fires what waits for it; returns what
    /// becomes of a request there: held for a pause's time, or never sent (a crash).
    fn reached(&self, worker: WorkerId, counted: Counted) -> Fired {
        if !self.in_the_story() {
            return Fired::default();
        }
        let nth = {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            let n = counts.entry((worker, counted)).or_default();
            *n += 1;
            *n
        };
        let mut fired = Fired::default();
        for (place, (_, fault)) in self.faults.iter().enumerate() {
            let names = match fault.trigger {
                Trigger::Step { worker: w, step, nth: n } => {
                    (w, Counted::Step(step), n) == (worker, counted, nth)
                }
                Trigger::Call { worker: w, hop, nth: n } => {
                    (w, Counted::Request(hop), n) == (worker, counted, nth)
                }
                _ => false,
            };
            let first = names
                && !std::mem::replace(&mut self.fired.lock().unwrap_or_else(|p| p.into_inner())[place], true);
            if first {
                fired = fired.and(self.fire(fault));
            }
        }
        fired
    }

    fn fire(&self, fault: &Fault) -> Fired {
        self.log.record(fencesim_sim::EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
        self.act(fault.kind)
    }

    /// Does what `kind` does, now (the supervisor records a fault it fires at a time).
    pub fn act(&self, kind: FaultKind) -> Fired {
        let clock = *self.clock.lock().unwrap_or_else(|p| p.into_inner());
        let arm = |worker, hop, armed: fn(&mut Armed) -> &mut Duration, ms| {
            let mut all = self.armed.lock().unwrap_or_else(|p| p.into_inner());
            *armed(all.entry((worker, hop)).or_default()) += clock.real(ms);
        };
        if let Some(fired) = self.conducted().and_then(|conductor| conducted(&conductor, &self.groups, kind))
        {
            return fired;
        }
        match kind {
            FaultKind::Pause { worker, duration_ms } => {
                let real = clock.real(duration_ms);
                self.groups.stop(worker, Instant::now() + real);
                return Fired { held: real, killed: false };
            }
            FaultKind::Crash { worker, restart_after_ms } => {
                self.groups.kill(worker, Instant::now() + clock.real(restart_after_ms));
                return Fired { held: Duration::ZERO, killed: true };
            }
            FaultKind::RedisDelay { worker, delay_ms } => {
                arm(worker, Hop::Redis, |a| &mut a.request, delay_ms)
            }
            FaultKind::DbDelay { worker, delay_ms } => {
                arm(worker, Hop::Database, |a| &mut a.request, delay_ms)
            }
            FaultKind::RedisReplyDelay { worker, delay_ms } => {
                arm(worker, Hop::Redis, |a| &mut a.reply, delay_ms)
            }
            FaultKind::DbReplyDelay { worker, delay_ms } => {
                arm(worker, Hop::Database, |a| &mut a.reply, delay_ms)
            }
            FaultKind::RedisRestart { persistence, .. } => {
                let servers = self.servers.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(pid) = servers.redis_pid {
                    let mut con = crate::live::redis::connect(&servers.redis_url).ok();
                    crate::live::servers::restart_now(con.as_mut(), pid, persistence, &self.log);
                    if let Some(conductor) = self.conducted() {
                        conductor.redis_killed();
                    }
                }
            }
            FaultKind::GatewayLatency { .. }
            | FaultKind::LostResponse { .. }
            | FaultKind::GatewayTimeout { .. }
            | FaultKind::GatewayOutage { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::LookupLag { .. } => {
                let url = self.servers.lock().unwrap_or_else(|p| p.into_inner()).gateway_url.clone();
                let _ = crate::live::gateway::send_fault(&url, kind);
            }
            _ => {}
        }
        Fired::default()
    }

    /// What is armed for `worker`'s next request on `hop`, taken.
    fn take_armed(&self, worker: WorkerId, hop: Hop) -> Armed {
        self.armed.lock().unwrap_or_else(|p| p.into_inner()).remove(&(worker, hop)).unwrap_or_default()
    }

    /// A proxy's gate for `worker` on `hop`.
    pub fn gate(self: &Arc<Self>, worker: WorkerId, hop: Hop) -> Arc<WireGate> {
        Arc::new(WireGate { outside: self.clone(), worker, hop, reply: Mutex::default() })
    }
}

impl Outside {
    /// The queue handed `worker` a job: the step `JobReceived` is reached, before the answer
    /// goes back (a pause stops the program then, and the answer lands while it is stopped).
    pub fn job_received(&self, worker: WorkerId) {
        self.reached(worker, Counted::Step(StepKind::JobReceived));
    }
}

/// The gateway service asks before it answers a worker's call: the worker's n-th call on
/// the gateway hop, where a pause holds it and a crash drops it.
impl crate::live::gateway::CallGate for Outside {
    fn pass(&self, worker: WorkerId) -> bool {
        let fired = self.reached(worker, Counted::Request(Hop::Gateway));
        crate::live::clock::sleep(fired.held);
        !fired.killed
    }
}

/// A pause or a crash on a controlled run: the copy's requests wait until the pause is
/// over (its process runs on, and its next request is held); a crash kills it, cancels
/// what it holds and is due to start again on the run's clock. `None` for other kinds.
fn conducted(conductor: &Conductor, groups: &Groups, kind: FaultKind) -> Option<Fired> {
    let now_us = conductor.story_us();
    match kind {
        FaultKind::Pause { worker, duration_ms } => {
            conductor.pause(worker, now_us + duration_ms * 1_000);
            Some(Fired::default())
        }
        FaultKind::Crash { worker, restart_after_ms } => {
            // started again by the run's driver, at its time on the run's clock
            groups.kill(worker, Instant::now() + Duration::from_secs(365 * 86_400));
            conductor.crashed(worker, now_us + restart_after_ms * 1_000);
            Some(Fired { held: Duration::ZERO, killed: true })
        }
        _ => None,
    }
}

/// What the faults fired at a request do to it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fired {
    /// How long it waits (the process is stopped meanwhile).
    held: Duration,
    /// The process was killed: the request never goes on.
    killed: bool,
}

impl Fired {
    fn and(self, other: Fired) -> Fired {
        Fired { held: self.held.max(other.held), killed: self.killed || other.killed }
    }
}

/// Where a worker's requests on one hop meet the faults.
pub struct WireGate {
    outside: Arc<Outside>,
    worker: WorkerId,
    hop: Hop,
    /// How long the answer to the request on its way is held, as armed when it left.
    reply: Mutex<Duration>,
}

impl WireGate {
    /// Before the worker's request goes on: a pause fired here holds it until it is over; a
    /// crash fired here, or while a delay holds it, means it never goes on (`false`), as the
    /// simulated worker's request never leaves a process that crashed before it.
    pub fn before_request(&self) -> bool {
        let fired = self.outside.reached(self.worker, Counted::Request(self.hop));
        let armed = self.outside.take_armed(self.worker, self.hop);
        *self.reply.lock().unwrap_or_else(|p| p.into_inner()) = armed.reply;
        let held = fired.held + armed.request;
        // the copy that sent it, to tell whether a crash killed it meanwhile
        let sender = (!held.is_zero()).then(|| self.outside.groups.of(Some(self.worker)));
        let delayed = crate::live::clock::delay(held);
        let alive = sender.is_none_or(|sender| sender == self.outside.groups.of(Some(self.worker)));
        !fired.killed && delayed && alive
    }

    /// Before a reply goes back: the step it shows, if any, is reached; then the answer
    /// waits what was armed for it.
    pub fn before_reply(&self, step: Option<StepKind>) {
        if let Some(step) = step {
            self.outside.reached(self.worker, Counted::Step(step));
        }
        // armed when the request left: a fault fired at this reply's step holds the next one
        let held = std::mem::take(&mut *self.reply.lock().unwrap_or_else(|p| p.into_inner()));
        crate::live::clock::sleep(held);
    }
}

/// The step a Redis reply shows: a lease granted, a token taken.
fn redis_step(observed: &Observed, keys: &Keys) -> Option<StepKind> {
    let command = observed.args.first()?.to_ascii_uppercase();
    let key = observed.args.get(1)?;
    let nx = observed.args.iter().skip(3).any(|o| o.eq_ignore_ascii_case("NX"));
    match command.as_str() {
        "SET" if nx && observed.reply == "OK" && keys.lease(key).is_some() => Some(StepKind::LeaseAcquired),
        "INCR" | "INCRBY" if keys.counter(key) && observed.reply.parse::<i64>().is_ok() => {
            Some(StepKind::TokenTaken)
        }
        _ => None,
    }
}

/// The step a database reply shows: a claim or a confirm that changed its row.
fn database_step(observed: &PgObserved) -> Option<StepKind> {
    match (rows_seen::kind_of(&observed.sql), rows_seen::count_of(observed.tag.as_deref())) {
        (Some(WriteKind::Claim), 1..) => Some(StepKind::AfterClaim),
        (Some(WriteKind::Confirm), 1..) => Some(StepKind::AfterConfirm),
        _ => None,
    }
}

/// A client library's own Redis command (a handshake's `CLIENT SETINFO`, a ready check's
/// `INFO`) is not one of the program's calls: it counts toward no trigger and takes no
/// fault armed for the next call. Counted, a trigger such as "A's third Redis call" fell
/// on a handshake command whenever the client connected after the story began, at a
/// moment the machine chose.
impl Gate for WireGate {
    fn pass(&self, _party: &str, _nth: u64, request: &str) -> bool {
        housekeeping(request) || self.before_request()
    }

    fn replied(&self, observed: &Observed) {
        if !housekeeping(&observed.request) {
            self.before_reply(redis_step(observed, &self.outside.keys));
        }
    }
}

impl PgHooks for WireGate {
    fn before_send(&self, _party: &str, _nth: u64, _sql: &str, _params: &[Option<String>]) -> bool {
        self.before_request()
    }

    fn before_reply(&self, observed: &PgObserved) {
        WireGate::before_reply(self, database_step(observed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(kind: FaultKind, trigger: Trigger) -> Fault {
        Fault { kind, trigger }
    }

    /// Faults with no plan over the worked example's world, begun at time 0, their log in
    /// a scratch directory of `test`'s (returned, to be removed).
    fn no_plan(test: &str, groups: Groups) -> (std::path::PathBuf, Arc<Outside>) {
        let dir = std::env::temp_dir().join(format!("fencesim-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let log = Arc::new(EventLog::create(&dir.join("events.jsonl")).expect("a log"));
        let world = crate::scenario::worked_example::worked_example().world;
        let clock = LiveClock { start_us: 0, scale: 1.0 };
        let outside = Arc::new(Outside::new(Vec::new(), groups, log, clock, Keys::of(&world)));
        outside.begin(clock);
        (dir, outside)
    }

    /// A client library's own commands (a handshake, a ready check) are not the program's
    /// calls: a plan's "A's first Redis call" falls on the first command the program sent.
    #[test]
    fn a_client_librarys_own_commands_count_toward_no_trigger() {
        let (dir, outside) = no_plan("own-commands", Groups::default());
        let a = WorkerId(0);
        let gate = outside.gate(a, Hop::Redis);
        let calls =
            || outside.counts.lock().expect("counts").get(&(a, Counted::Request(Hop::Redis))).copied();
        for (nth, own) in ["CLIENT SETINFO LIB-NAME ioredis", "info", "PING"].into_iter().enumerate() {
            assert!(Gate::pass(&*gate, "A", nth as u64 + 1, own), "{own} goes on");
        }
        assert_eq!(calls(), None, "no call counted for the library's own commands");
        assert!(Gate::pass(&*gate, "A", 4, "SET lock:settle:m_4471 v PX 10000 NX"));
        assert_eq!(calls(), Some(1), "the program's SET is its first call");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A request a delay holds at the proxy never goes on when its copy is killed
    /// meanwhile (a crash the plan gives at a time): the simulated worker's delayed call
    /// dies with its process. The same delay with the copy alive lets it go on.
    #[test]
    fn a_request_delayed_while_its_copy_is_killed_never_goes_on() {
        use std::os::unix::process::CommandExt;
        let groups = Groups::default();
        let (dir, outside) = no_plan("delayed-kill", groups.clone());
        let a = WorkerId(0);
        let mut copy = std::process::Command::new("sleep").arg("30").process_group(0).spawn().expect("sleep");
        groups.set(a, Some(copy.id() as libc::pid_t));
        let gate = outside.gate(a, Hop::Database);
        outside.act(FaultKind::DbDelay { worker: a, delay_ms: 50 });
        assert!(gate.before_request(), "delayed, its copy alive: it goes on");
        outside.act(FaultKind::DbDelay { worker: a, delay_ms: 400 });
        let held = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.before_request())
        };
        std::thread::sleep(Duration::from_millis(100));
        groups.kill(a, Instant::now());
        assert!(!held.join().expect("the request's thread"), "its copy killed meanwhile: it never goes on");
        let _ = copy.wait();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What a team's program can be given, and where: each kind at the moments the run sees.
    #[test]
    fn a_fault_is_given_where_the_run_sees_its_moment() {
        let a = WorkerId(0);
        let step = |step| Trigger::Step { worker: a, step, nth: 1 };
        let call = |hop| Trigger::Call { worker: a, hop, nth: 2 };
        let at = Trigger::At { at_ms: 5 };
        let pause = FaultKind::Pause { worker: a, duration_ms: 10 };
        let restart = FaultKind::RedisRestart { instance: 0, persistence: fencesim_sim::Persistence::None };
        let late = FaultKind::DbReplyDelay { worker: a, delay_ms: 3 };
        let expire = FaultKind::ExpireLease { instance: 0, merchant: fencesim_model::MerchantId(1) };
        for (kind, trigger) in [
            (pause, step(StepKind::JobReceived)),
            (pause, call(Hop::Gateway)),
            (restart, step(StepKind::TokenTaken)),
            (restart, at),
            (late, step(StepKind::AfterClaim)),
            (FaultKind::LostResponse { worker: a }, call(Hop::Database)),
            (expire, at),
        ] {
            assert!(givable(&fault(kind, trigger)), "{kind:?} at {trigger:?}");
        }
        for (kind, trigger) in [
            (pause, step(StepKind::AfterLookup)),
            (pause, call(Hop::Settlement)),
            (pause, Trigger::Within { worker: a, hop: Hop::Redis, nth: 1 }),
            (expire, step(StepKind::LeaseAcquired)),
            (FaultKind::RedisFailover { instance: 0 }, at),
        ] {
            let refused = given(&fault(kind, trigger)).err().expect("refused");
            assert!(refused.contains(kind.name()), "the refusal names the fault: {refused}");
        }
    }
}
