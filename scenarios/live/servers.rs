//! The live run's Redis servers: the lock server, which holds the leases and the token
//! counters, and the queue's own server, so that a restart of the lock server loses what
//! the simulated Redis loses and the queue (which the simulation keeps apart) keeps its
//! jobs. A restart of the plan is a kill (`SIGKILL`) of the lock server by whoever fires
//! it, and a start on the same port and directory under the same persistence mode once
//! the deployment's down time has passed; then the deployment's start-up routine runs.

use crate::live::faketime::FakeClock;
use crate::live::log::EventLog;
use crate::live::redis::{connect, Admin};
use crate::live::server::RedisServer;
use crate::live::store::Refunds;
use fencesim_sim::{EventKind, FaultKind, Persistence, WorldConfig};
use std::time::{Duration, Instant};

/// The run's servers: its own, or the one at a URL (which holds the queue too, and is
/// never restarted).
pub struct Servers {
    lock: Option<RedisServer>,
    /// The lock server's clock, when the plan jumps it.
    clock: Option<FakeClock>,
    _queue: Option<RedisServer>,
    pub lock_url: String,
    /// The queue's server: its own, or the lock server's when the run keeps its queue
    /// elsewhere (a program's run has the queue service, `foreign::queue`).
    pub queue_url: String,
    /// When the lock server that went down is to start again.
    back_at: Option<Instant>,
}

/// Whether the plan jumps the lock server's clock.
pub fn jumps(world: &WorldConfig) -> bool {
    world.faults.faults.iter().any(|fault| matches!(fault.kind, FaultKind::RedisClockJump { .. }))
}

/// How the plan restarts the lock server, if it does; refused when its restarts ask for
/// two persistence modes (a live server runs under one).
pub fn restart_mode(world: &WorldConfig) -> Result<Option<Persistence>, String> {
    let mut modes = world.faults.faults.iter().filter_map(|fault| match fault.kind {
        FaultKind::RedisRestart { persistence, .. } => Some(persistence),
        _ => None,
    });
    let first = modes.next();
    match modes.find(|mode| Some(*mode) != first) {
        Some(other) => Err(format!(
            "the plan restarts Redis under two persistence modes ({first:?} and {other:?}); a live server runs under one"
        )),
        None => Ok(first),
    }
}

/// The server's arguments for a persistence mode: what a restart keeps is then what the
/// real server keeps after a kill.
fn persistence_args(mode: Option<Persistence>) -> &'static [&'static str] {
    match mode {
        None | Some(Persistence::None) => &["--appendonly", "no"],
        Some(Persistence::AofEverySec) => &["--appendonly", "yes", "--appendfsync", "everysec"],
        Some(Persistence::AofAlways) => &["--appendonly", "yes", "--appendfsync", "always"],
    }
}

/// The server refuses a database with keys in it, and must tell the run its expiries.
fn check_empty(url: &str) -> Result<(), String> {
    let mut con = connect(url)?;
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).map_err(|e| format!("Redis at {url}: {e}"))?;
    if keys > 0 {
        return Err(format!(
            "the Redis database at {url} holds {keys} key(s); the live run needs an empty one (it writes lock, counter and queue keys)"
        ));
    }
    redis::cmd("CONFIG").arg("SET").arg("notify-keyspace-events").arg("Ex").query::<()>(&mut con).map_err(
        |e| {
            format!(
                "Redis at {url} refuses keyspace notifications, which show the live run its expiries: {e}"
            )
        },
    )
}

impl Servers {
    /// The servers for a plan that restarts the lock server under `restarts`, and jumps
    /// its clock if `jumps`.
    pub fn start(url: Option<&str>, restarts: Option<Persistence>, jumps: bool) -> Result<Servers, String> {
        let servers = match url {
            Some(_) if restarts.is_some() || jumps => {
                return Err("the plan restarts Redis or jumps its clock, and the live run does that only to a server it started itself: leave out --redis".into())
            }
            Some(url) => Servers {
                lock: None,
                clock: None,
                _queue: None,
                lock_url: url.to_owned(),
                queue_url: url.to_owned(),
                back_at: None,
            },
            None => {
                let clock = match jumps {
                    true => Some(FakeClock::new("live").map_err(|why| {
                        format!("the plan jumps Redis's clock, which the live run does with libfaketime: {why}")
                    })?),
                    false => None,
                };
                return Servers::start_own(restarts, clock, true);
            }
        };
        check_empty(&servers.lock_url)?;
        Ok(servers)
    }

    /// Servers of the run's own, the lock server on `clock` if one is given; the queue's
    /// own server only if `queue` (a program's run keeps its queue in a service and does
    /// not pay for a second server's start).
    pub fn start_own(
        restarts: Option<Persistence>,
        clock: Option<FakeClock>,
        queue: bool,
    ) -> Result<Servers, String> {
        let mut args = vec!["--hz", "100", "--notify-keyspace-events", "Ex"];
        args.extend_from_slice(persistence_args(restarts));
        let env = clock.as_ref().map_or(Vec::new(), |clock| clock.env.clone());
        let lock = RedisServer::start_in("live", &args, &env)?;
        let queue = queue.then(|| RedisServer::start("live-queue", &["--appendonly", "no"])).transpose()?;
        let lock_url = lock.url();
        let queue_url = queue.as_ref().map_or_else(|| lock_url.clone(), RedisServer::url);
        let servers = Servers { lock: Some(lock), clock, _queue: queue, lock_url, queue_url, back_at: None };
        check_empty(&servers.lock_url)?;
        Ok(servers)
    }

    /// Whether the lock server's process has ended (a restart killed it).
    pub fn lock_exited(&mut self) -> bool {
        self.lock.as_mut().is_some_and(RedisServer::exited)
    }

    /// Starts the lock server again now, with what its files kept.
    pub fn lock_start_again(&mut self) -> Result<(), String> {
        self.lock.as_mut().map_or(Ok(()), RedisServer::start_again)
    }

    /// The file the lock server's clock offset is read from, when the plan jumps it.
    pub fn clock_file(&self) -> Option<std::path::PathBuf> {
        self.clock.as_ref().map(|clock| clock.offset.clone())
    }

    /// The lock server's process id, for a worker that restarts it at its own trigger.
    pub fn lock_pid(&self) -> Option<i32> {
        self.lock.as_ref().map(RedisServer::pid)
    }

    /// Starts the lock server again once it has been down for `down`; `true` when it just
    /// started (and the start-up routine is due).
    pub fn watch(&mut self, down: Duration) -> Result<bool, String> {
        let Some(lock) = self.lock.as_mut() else { return Ok(false) };
        match self.back_at {
            None if lock.exited() => {
                self.back_at = Some(Instant::now() + down);
                Ok(false)
            }
            Some(at) if Instant::now() >= at => {
                self.back_at = None;
                lock.start_again()?;
                Ok(true)
            }
            None | Some(_) => Ok(false),
        }
    }
}

/// The lock server restarts now: what it loses is counted first (every key without
/// persistence; a killed server under an append-only file loses nothing the machine has
/// been given), then the process is killed.
pub fn restart_now(con: Option<&mut redis::Connection>, pid: i32, persistence: Persistence, log: &EventLog) {
    let lost = match (persistence, con) {
        (Persistence::None, Some(con)) => redis::cmd("DBSIZE").query::<u32>(con).unwrap_or(0),
        (Persistence::None, None) | (Persistence::AofEverySec | Persistence::AofAlways, _) => 0,
    };
    log.record(EventKind::RedisRestarted { instance: 0, lost });
    // SAFETY: a signal to the run's own redis-server, whose process id the run holds.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// The deployment's start-up routine after a restart, as the simulated Redis runs it: a
/// counter the server lost is seeded from the highest fence the database holds. Each
/// seeded counter is recorded.
pub fn start_routine(
    world: &WorldConfig,
    url: &str,
    store: &dyn Refunds,
    log: &EventLog,
) -> Result<(), String> {
    let rows = store.all_rows().map_err(|e| format!("the refund store: {e}"))?;
    let max_fence = |merchant| rows.iter().filter(|row| row.merchant == merchant).map(|row| row.fence).max();
    let merchants: std::collections::BTreeSet<_> = world.all_jobs().map(|job| job.merchant).collect();
    let mut con = connect(url)?;
    let mut admin = Admin::new(&mut con);
    let seeded = world.mechanism.on_redis_start(0, merchants, world.workers, &mut admin, max_fence);
    if let Some(failed) = admin.failed() {
        return Err(format!("the start-up routine: {failed}"));
    }
    for (key, value) in seeded {
        log.record(EventKind::CounterSeeded { instance: 0, key, value });
    }
    Ok(())
}
