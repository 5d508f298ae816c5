//! The worked example live: worker processes against a real redis-server, a real SQLite
//! file, a gateway service on loopback and a Redis stream, judged by the simulation's
//! checkers. The verdicts must be the simulation's; the story must be the article's (A
//! frozen right after it claims r_815 while its lease is live, its lease expiring during
//! the freeze, B taking over before A wakes). Without a redis-server these tests say
//! loudly that they skipped; with `CI` set they fail instead.

mod support;

use fencesim::live::postgres::postgres_program;
use fencesim::live::{run_live, LiveConfig, StoreChoice};
use fencesim::model::{Mechanism, RefundId, StepKind, WorkerId};
use fencesim::runner::{run, Outcome};
use fencesim::scenario::{self, FaultMask};
use fencesim::sim::{EventKind, GatewayMode, Trigger};
use fencesim::tell::story::{render_story, story};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use support::redis_server;
use support::slots::live_slot;

/// A time scale of 0.25, where the gateway's latency is 6 to 10 ms a row against about 1 ms
/// of a worker's work: the gateway makes up a row's lateness from the rows after it
/// (`live::pace`), and the more latency there is to make it up from, the less a slowed
/// machine moves A's freeze from 10:00:26. Before the making up, at 0.1 CI once froze A
/// at 10:00:36.9 on SQLite, and at 0.25 a slowed machine froze it at 10:00:27.9 to
/// 10:00:31.9 on PostgreSQL: the verdicts held, the story's order did not.
fn config(mechanism: Mechanism, gateway: GatewayMode, store: StoreChoice) -> LiveConfig {
    let time_scale = 0.25;
    LiveConfig {
        mechanism,
        gateway,
        time_scale,
        redis_url: None,
        store,
        gateway_port: 0,
        keep: None,
        program: PathBuf::from(env!("CARGO_BIN_EXE_fencesim")),
        replay: None,
        mutant: None,
    }
}

/// Whether the machine has what a live run on `store` needs; says loudly when it does not.
fn available(test: &str, store: &StoreChoice) -> bool {
    if !redis_server::available(test) {
        return false;
    }
    let needs_cluster = *store == StoreChoice::Postgres(None);
    if needs_cluster && (postgres_program("initdb").is_none() || postgres_program("postgres").is_none()) {
        assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no PostgreSQL was found");
        eprintln!("SKIPPED {test}: no PostgreSQL on this machine (install Debian's postgresql)");
        return false;
    }
    true
}

/// The live run and the simulated one of the same world.
fn both(
    test: &str,
    mechanism: Mechanism,
    gateway: GatewayMode,
    store: StoreChoice,
) -> Option<(Outcome, Outcome)> {
    let _slot = live_slot();
    if !available(test, &store) {
        return None;
    }
    let live = run_live(&config(mechanism, gateway, store)).unwrap_or_else(|e| panic!("{test}: {e}"));
    let world =
        scenario::build("worked-example", 1, mechanism, gateway, FaultMask::ALL).expect("the worked example");
    Some((live, run(&world, 1).expect("the simulated run")))
}

fn broken(outcome: &Outcome) -> BTreeSet<&'static str> {
    outcome.checks.iter().filter(|check| check.is_violation()).map(|check| check.invariant).collect()
}

fn told(outcome: &Outcome) -> String {
    render_story(outcome, &story(outcome), 80)
}

/// When A stopped itself, and when it was resumed, in the story's milliseconds.
fn freeze(outcome: &Outcome) -> (u64, u64) {
    let at = |wanted: fn(&EventKind) -> bool| {
        outcome
            .record
            .events
            .iter()
            .find(|e| wanted(&e.kind))
            .map(|e| e.at_ms)
            .expect("a freeze and a resume")
    };
    (at(|k| matches!(k, EventKind::FaultFired { .. })), at(|k| matches!(k, EventKind::Resumed { .. })))
}

/// The longest gap between two of A's refund calls before it froze, in the story's ms, and
/// when it began: a machine that stalled shows here, beside a story whose order broke.
fn longest_gap(outcome: &Outcome) -> String {
    let (froze, _) = freeze(outcome);
    let calls: Vec<u64> = (outcome.record.events.iter())
        .filter(|e| e.at_ms < froze && matches!(e.kind, EventKind::RefundCalled { worker: WorkerId(0), .. }))
        .map(|e| e.at_ms)
        .collect();
    let (gap, from) = calls.windows(2).map(|w| (w[1] - w[0], w[0])).max().unwrap_or_default();
    format!("A's longest gap between two refund calls before it froze: {gap} ms of the story, from {from} ms")
}

/// The article's order of things: A holds epoch 1 and freezes while it is live, the lease
/// expires during the freeze, B's epoch 2 begins before A wakes.
fn assert_the_story(outcome: &Outcome) {
    let story = format!("{}\n{}", longest_gap(outcome), told(outcome));
    let epochs = &outcome.record.epochs;
    assert!(epochs.len() >= 2, "two leases:\n{story}");
    let (a, b) = (&epochs[0], &epochs[1]);
    assert_eq!(
        (a.worker, b.worker),
        (WorkerId(0), WorkerId(1)),
        "A holds the first lease, B the second:\n{story}"
    );
    let (froze, woke) = freeze(outcome);
    let expired = a.expired_at_ms.expect("A's lease expires");
    assert!(froze < expired && expired < woke, "A's lease expires while A is frozen:\n{story}");
    assert!(b.granted_at_ms > expired && b.granted_at_ms < woke, "B takes over before A wakes:\n{story}");
    let fired = outcome.record.events.iter().find_map(|e| match &e.kind {
        EventKind::FaultFired { trigger, .. } => Some(*trigger),
        _ => None,
    });
    let at_815 = Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: RefundId(815).0 };
    assert_eq!(fired, Some(at_815), "A stops itself right after it claims r_815");
}

fn fenced_with_an_idempotent_gateway(test: &str, store: StoreChoice) {
    let Some((live, simulated)) = both(test, Mechanism::Fenced, GatewayMode::Idempotent, store) else {
        return;
    };
    let story = told(&live);
    let tally = live.tally();
    let counts = (tally.refunds_sent, tally.gateway_refunds, tally.refunded_cents, tally.fence_rejections);
    assert_eq!(
        counts,
        (1200, 1200, 8_430_000, 1),
        "1,200 refunds, 84,300.00 EUR, one fence rejection:\n{story}"
    );
    assert!(live.passed(), "no invariant broken:\n{}{story}", live.breach_lines("", false));
    assert_eq!(broken(&live), broken(&simulated));
    assert_the_story(&live);
}

fn ttl_only_with_a_non_idempotent_gateway(test: &str, store: StoreChoice) {
    let Some((live, simulated)) = both(test, Mechanism::TtlOnly, GatewayMode::NonIdempotent, store) else {
        return;
    };
    let story = told(&live);
    let tally = live.tally();
    assert!(
        tally.double_refunds > 0 && tally.stale_confirms > 0,
        "double refunds and stale confirms:\n{story}"
    );
    assert_eq!(
        broken(&live),
        broken(&simulated),
        "the same invariants broken as in the simulation:\n{story}"
    );
    assert!(broken(&live).is_superset(&BTreeSet::from(["no-double-refund", "no-stale-confirm"])));
    assert_the_story(&live);
}

#[test]
fn fenced_live_on_sqlite_with_an_idempotent_gateway_gives_the_simulations_verdict() {
    fenced_with_an_idempotent_gateway("live-fenced-sqlite", StoreChoice::Sqlite(None));
}

#[test]
fn ttl_only_live_on_sqlite_with_a_non_idempotent_gateway_pays_twice_and_confirms_stale() {
    ttl_only_with_a_non_idempotent_gateway("live-ttl-only-sqlite", StoreChoice::Sqlite(None));
}

#[test]
fn fenced_live_on_postgres_with_an_idempotent_gateway_gives_the_simulations_verdict() {
    fenced_with_an_idempotent_gateway("live-fenced-postgres", StoreChoice::Postgres(None));
}

#[test]
fn ttl_only_live_on_postgres_with_a_non_idempotent_gateway_pays_twice_and_confirms_stale() {
    ttl_only_with_a_non_idempotent_gateway("live-ttl-only-postgres", StoreChoice::Postgres(None));
}

/// The processes running now that a live run may start: its workers and redis-servers
/// (whose process title does not show their arguments), by pid.
fn running() -> BTreeSet<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return BTreeSet::new() };
    let read = |pid: u32, file: &str| std::fs::read(format!("/proc/{pid}/{file}")).ok();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = String::from_utf8_lossy(&read(pid, "cmdline")?).replace('\0', " ");
            let comm = String::from_utf8_lossy(&read(pid, "comm")?).trim().to_owned();
            (cmdline.contains("live-worker") || comm == "redis-server").then_some((pid, cmdline))
        })
        .collect()
}

/// `fencesim live ARGS` must exit 2 with a message naming `said`, and leave nothing running.
fn refused(args: &[&str], said: &str) {
    let before = running();
    let out =
        Command::new(env!("CARGO_BIN_EXE_fencesim")).arg("live").args(args).output().expect("fencesim runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: exit 2, got {:?}: {stderr}", out.status);
    assert!(stderr.contains(said), "{args:?}: the message names '{said}': {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: no panic: {stderr}");
    let left: Vec<_> = running().difference(&before).cloned().collect();
    assert!(left.is_empty(), "{args:?}: nothing left running: {left:?}");
}

#[test]
fn bad_input_to_a_live_run_exits_2_and_leaves_nothing_running() {
    let _slot = live_slot();
    let free =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port();
    let unreachable = format!("redis://127.0.0.1:{free}/");
    refused(&["--redis", &unreachable], &format!("cannot reach Redis at {unreachable}"));
    refused(&["--redis", "http://127.0.0.1/"], "is not a Redis URL");
    refused(&["--time-scale", "-1"], "--time-scale -1: expected a number above 0");
    refused(&["--mechanism", "redlock"], "holds its lease on 5 Redis instances");
    refused(&["--strategy", "sometimes"], "unknown mechanism 'sometimes'");
    let dir = std::env::temp_dir().join(format!("fencesim-live-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let not_a_store = dir.join("notes.db");
    std::fs::write(&not_a_store, "these are notes, not a database").expect("a file");
    refused(&["--db", not_a_store.to_str().expect("a path")], "is not a refund store");
    refused(&["--database", "postgres", "--db", "x.db"], "--db goes with sqlite");
    let unreachable_db = format!("host=127.0.0.1 port={free} user=postgres");
    refused(&["--database", "postgres", "--postgres", &unreachable_db], "cannot reach PostgreSQL at");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_busy_port_or_a_redis_in_use_exits_2_and_leaves_nothing_running() {
    let test = "bad-servers";
    let _slot = live_slot();
    let Some(server) = redis_server::start(test) else { return };
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = busy.local_addr().expect("its address").port().to_string();
    refused(&["--gateway-port", &port], &format!("the gateway cannot listen on 127.0.0.1:{port}"));
    let mut con = server.connect().expect("a connection");
    redis::cmd("SET").arg("someone-else").arg("1").query::<()>(&mut con).expect("a key");
    refused(&["--redis", &server.url()], "holds 1 key(s); the live run needs an empty one");
}

/// A small world of the property suite, with one store and no replica, as a live run
/// takes it: `workers` workers, `rows` rows, a TTL of `ttl_ms`, and `faults`.
fn small_live_world(
    workers: u32,
    rows: u32,
    ttl_ms: u64,
    faults: Vec<fencesim::sim::Fault>,
) -> fencesim::scenario::Scenario {
    use fencesim::scenario::small::SmallWorld;
    let small = SmallWorld { workers, rows, ttl_ms, latency_ms: 20, faults };
    let mut scenario = small.scenario(Mechanism::Fenced, GatewayMode::Idempotent);
    scenario.world.settlement = None;
    scenario.world.replica = None;
    scenario
}

/// The world played live at real time (a time scale of 1), as `live --replay` plays a file.
fn replayed_live(test: &str, scenario: fencesim::scenario::Scenario) -> Option<Outcome> {
    let _slot = live_slot();
    if !available(test, &StoreChoice::Sqlite(None)) {
        return None;
    }
    let mut config = config(Mechanism::Fenced, GatewayMode::Idempotent, StoreChoice::Sqlite(None));
    config.time_scale = 1.0;
    config.replay = Some((scenario, 1));
    Some(run_live(&config).unwrap_or_else(|e| panic!("{test}: {e}")))
}

fn position(outcome: &Outcome, wanted: impl Fn(&EventKind) -> bool) -> Option<usize> {
    outcome.record.events.iter().position(|event| wanted(&event.kind))
}

/// A crash at a worker's own step kills its process there; a new process for the worker
/// starts when the restart is due, takes the lease as the worker's second incarnation once
/// the first one's has run out (the world's one worker), and the job is done: every row
/// sent, every invariant kept.
#[test]
fn a_crash_at_a_step_kills_the_worker_process_and_a_new_one_takes_over() {
    use fencesim::sim::{Fault, FaultKind};
    let crash = Fault {
        kind: FaultKind::Crash { worker: WorkerId(0), restart_after_ms: 100 },
        trigger: Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: 1 },
    };
    let Some(live) = replayed_live("live-replay-crash", small_live_world(1, 3, 400, vec![crash])) else {
        return;
    };
    let story = told(&live);
    let fired =
        position(&live, |k| matches!(k, EventKind::FaultFired { fault: FaultKind::Crash { .. }, .. }));
    let restarted =
        position(&live, |k| matches!(k, EventKind::Restarted { worker: WorkerId(0), incarnation: 2 }));
    assert!(fired.is_some() && restarted > fired, "the crash fired, then A started again:\n{story}");
    let second = |k: &EventKind| matches!(k, EventKind::LeaseGranted { worker: WorkerId(0), value, .. } if value.starts_with("A.2#"));
    assert!(position(&live, second).is_some(), "A's second process took the lease:\n{story}");
    assert_eq!(live.tally().refunds_sent, 3, "every row sent:\n{story}");
    assert!(live.passed(), "{}{story}", live.breach_lines("", false));
}

/// An early lease expiry before a worker's n-th Redis command is set on the real server by
/// the worker itself: the key expires right there, and the fence keeps every invariant.
#[test]
fn an_early_expiry_before_a_workers_redis_command_ends_the_lease_on_the_real_server() {
    use fencesim::sim::{Fault, FaultKind, Hop};
    let expire = Fault {
        kind: FaultKind::ExpireLease { instance: 0, merchant: fencesim::model::MerchantId(7) },
        trigger: Trigger::Call { worker: WorkerId(0), hop: Hop::Redis, nth: 3 },
    };
    let Some(live) = replayed_live("live-replay-expiry", small_live_world(2, 3, 2_000, vec![expire])) else {
        return;
    };
    let story = told(&live);
    let fired =
        position(&live, |k| matches!(k, EventKind::FaultFired { fault: FaultKind::ExpireLease { .. }, .. }))
            .expect("the expiry fired");
    let expired =
        live.record.events[fired..].iter().find(|e| matches!(e.kind, EventKind::LeaseExpired { .. }));
    let gap = expired.map(|e| e.at_ms - live.record.events[fired].at_ms);
    assert!(gap.is_some_and(|ms| ms <= 20), "the lease ended right after the fault ({gap:?} ms):\n{story}");
    assert!(live.passed(), "{}{story}", live.breach_lines("", false));
}

/// A pause at a time is the coordinator's: it stops the worker's process when the story
/// reaches it and resumes it when the pause is over.
#[test]
fn a_pause_at_a_time_stops_the_worker_process_and_resumes_it() {
    use fencesim::sim::{Fault, FaultKind};
    let pause = Fault {
        kind: FaultKind::Pause { worker: WorkerId(0), duration_ms: 300 },
        trigger: Trigger::At { at_ms: 30 },
    };
    let Some(live) = replayed_live("live-replay-pause", small_live_world(2, 3, 2_000, vec![pause])) else {
        return;
    };
    let story = told(&live);
    let fired = position(&live, |k| matches!(k, EventKind::FaultFired { .. })).expect("the pause fired");
    let resumed =
        position(&live, |k| matches!(k, EventKind::Resumed { worker: WorkerId(0) })).expect("a resume");
    let held = live.record.events[resumed].at_ms - live.record.events[fired].at_ms;
    assert!((290..=340).contains(&held), "A was stopped for the pause's 300 ms ({held} ms):\n{story}");
    assert!(live.passed(), "{}{story}", live.breach_lines("", false));
}

/// The worked example written as a replay file (`run --save-replay`) and played with
/// `live --replay` gets the simulation's verdicts, as `live` does.
#[test]
fn the_worked_example_as_a_replay_file_gets_the_simulations_verdict_live() {
    let test = "live-replay-worked-example";
    let _slot = live_slot();
    if !available(test, &StoreChoice::Sqlite(None)) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fencesim-live-replay-{}", std::process::id()));
    let run_args = ["run", "--mechanism", "ttl-only", "--gateway", "non-idempotent", "--save-replay"];
    let saved = Command::new(env!("CARGO_BIN_EXE_fencesim")).args(run_args).arg(&dir).output().unwrap();
    assert_eq!(saved.status.code(), Some(1), "{}", String::from_utf8_lossy(&saved.stderr));
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["live", "--time-scale", "0.25", "--json", "--replay"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let broken: BTreeSet<String> = json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|violation| violation["invariant"].as_str().unwrap().to_owned())
        .collect();
    let world =
        scenario::build("worked-example", 1, Mechanism::TtlOnly, GatewayMode::NonIdempotent, FaultMask::ALL);
    let simulated = run(&world.unwrap(), 1).unwrap();
    let expected: BTreeSet<String> = broken_names(&simulated);
    assert_eq!(broken, expected, "{json}");
}

fn broken_names(outcome: &Outcome) -> BTreeSet<String> {
    broken(outcome).into_iter().map(str::to_owned).collect()
}

/// What `live --replay` cannot do is refused with exit 2 and named, never run as
/// something else, and nothing is left running: five Redis instances, the second store, a
/// server under two persistence modes, a worker's fault at another worker's trigger.
#[test]
fn a_replay_file_the_live_run_cannot_play_is_refused_with_what_it_lacks() {
    use fencesim::sim::{Fault, FaultKind, Hop, Persistence};
    let _slot = live_slot();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let redlock = root.join("reports/shrunk/redlock-idempotent.json");
    refused(&["--replay", redlock.to_str().unwrap()], "holds its lease on 5 Redis instances");
    let two_stores = root.join("reports/second-store/fenced-one-store-none.json");
    refused(&["--replay", two_stores.to_str().unwrap()], "the world has the second store");
    let dir = std::env::temp_dir().join(format!("fencesim-live-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = fencesim::files::replay_file::ReplayFile::load(
        &root.join("reports/shrunk/fenced-non-idempotent.json"),
    )
    .unwrap();
    let restart = |persistence| Fault {
        kind: FaultKind::RedisRestart { instance: 0, persistence },
        trigger: Trigger::At { at_ms: 10 },
    };
    let plans = [
        (vec![restart(Persistence::None), restart(Persistence::AofAlways)], "under two persistence modes"),
        (
            vec![Fault {
                kind: FaultKind::DbDelay { worker: WorkerId(1), delay_ms: 50 },
                trigger: Trigger::Call { worker: WorkerId(0), hop: Hop::Database, nth: 1 },
            }],
            "it is about another worker than A",
        ),
    ];
    for (faults, said) in plans {
        file.fault_plan.faults = faults;
        let path = dir.join("refused.json");
        file.write_as(&path).unwrap();
        refused(&["--replay", path.to_str().unwrap()], said);
    }
    let path = dir.join("refused.json");
    refused(&["--replay", path.to_str().unwrap(), "--mechanism", "fenced"], "cannot be used with");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A jump of the lock server's clock past a lease's TTL (libfaketime moves the server's
/// clock alone): the server expires the lease at once, as the simulated jump does.
#[test]
fn a_clock_jump_replayed_live_expires_the_lease_on_the_real_server() {
    use fencesim::sim::{Fault, FaultKind};
    let test = "live-replay-clock-jump";
    if let Err(why) = fencesim::live::faketime::FakeClock::new(test) {
        assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and {why}");
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let jump = Fault {
        kind: FaultKind::RedisClockJump { instance: 0, by_ms: 5_000 },
        trigger: Trigger::At { at_ms: 30 },
    };
    let world = small_live_world(2, 3, 2_000, vec![jump]);
    let simulated = run(&world, 1).unwrap();
    let Some(live) = replayed_live(test, world) else { return };
    let story = told(&live);
    let fired = position(&live, |k| matches!(k, EventKind::FaultFired { .. })).expect("the jump fired");
    let expired =
        live.record.events[fired..].iter().find(|e| matches!(e.kind, EventKind::LeaseExpired { .. }));
    let gap = expired.map(|e| e.at_ms - live.record.events[fired].at_ms);
    assert!(gap.is_some_and(|ms| ms <= 30), "the lease expired right after the jump ({gap:?} ms):\n{story}");
    assert_eq!(broken(&live), broken(&simulated), "the live verdict is the simulation's:\n{story}");
}

/// `fencesim live --replay FILE --runs N --json` on a committed file: every invariant the
/// simulation breaks breaks in every live run, and none that it keeps.
fn same_verdict_live(test: &str, file: &str, runs: u64) {
    let _slot = live_slot();
    if !available(test, &StoreChoice::Sqlite(None)) {
        return;
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["live", "--runs", &runs.to_string(), "--json", "--replay"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{file}: a violation, exit 1: {stderr}");
    assert!(stderr.contains("time scale"), "{file}: the chosen time scale is printed: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if runs == 1 {
        // one run tells its own outcome; the simulation of the same file, run here
        let replay = fencesim::files::replay_file::ReplayFile::load(&path).unwrap();
        let simulated = fencesim::runner::run_with(&replay.scenario().unwrap(), replay.seed, replay.mutant);
        let simulated = broken(&simulated.unwrap());
        let live: BTreeSet<&str> =
            json["violations"].as_array().unwrap().iter().map(|v| v["invariant"].as_str().unwrap()).collect();
        assert!(!simulated.is_empty(), "{file}: the simulation breaks one");
        assert_eq!(live, simulated, "{file}: the live run breaks what the simulation breaks: {json}");
        return;
    }
    let invariants = json["invariants"].as_array().unwrap();
    assert!(invariants.iter().any(|i| i["simulated_broken"] == true), "{file}: the simulation breaks one");
    for invariant in invariants {
        let (sim, live) = (invariant["simulated_broken"] == true, invariant["live_runs_broken"].as_u64());
        assert_eq!(live, Some(if sim { runs } else { 0 }), "{file}: {invariant} in {json}");
    }
}

/// A Redis restart without persistence, at a time: the live run kills its own server and
/// starts it again empty; the counter starts over and the tokens go back, as simulated. One
/// run: the story rests on a millisecond, so it is played ten times slower, 30 s a run.
#[test]
fn a_redis_restart_replayed_live_resets_the_counter_as_in_the_simulation() {
    same_verdict_live("live-replay-redis-restart", "reports/shrunk/fenced-renewal-idempotent.json", 1);
}

/// A lost answer from the gateway (the money moved, nobody heard): the worker's retry pays
/// again on a gateway without idempotency, live as in the simulation.
#[test]
fn a_lost_gateway_answer_replayed_live_pays_twice_as_in_the_simulation() {
    same_verdict_live("live-replay-lost-answer", "reports/shrunk/fenced-renewal-non-idempotent.json", 2);
}

/// A planted bug is planted in the worker processes: the lease released with a plain
/// `DEL` frees another worker's lease on the real server.
#[test]
fn a_mutants_file_replayed_live_plants_the_bug_in_the_worker_processes() {
    same_verdict_live("live-replay-mutant", "reports/mutants/release-with-del.json", 2);
}

/// A refund call held up on its way (a gateway timeout at the worker's own step): the
/// worker hears nothing, retries, and the late call lands after; without idempotency the
/// refund is paid twice, live as in the simulation.
#[test]
fn a_gateway_timeout_replayed_live_lands_late_and_pays_twice_as_in_the_simulation() {
    use fencesim::sim::{Fault, FaultKind};
    let timeout = Fault {
        kind: FaultKind::GatewayTimeout { worker: WorkerId(0), late_ms: 400 },
        trigger: Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: 1 },
    };
    let mut world = small_live_world(1, 2, 2_000, vec![timeout]);
    world.world.gateway_mode = GatewayMode::NonIdempotent;
    let simulated = run(&world, 1).unwrap();
    let Some(live) = replayed_live("live-replay-gateway-timeout", world) else { return };
    let story = told(&live);
    assert!(broken(&simulated).contains("no-double-refund"), "the simulation pays twice");
    assert_eq!(broken(&live), broken(&simulated), "the live verdict is the simulation's:\n{story}");
    let timed_out = position(&live, |k| matches!(k, EventKind::RefundTimedOut { .. })).expect("a timeout");
    let landed =
        live.record.events[timed_out..].iter().filter(|e| matches!(e.kind, EventKind::RefundCalled { .. }));
    assert!(landed.count() >= 2, "the retry and the late call both landed:\n{story}");
}

/// A held-up answer from the database, armed before a worker's own request, is slept by
/// the worker after the answer arrives: A's claim's answer comes back after its lease has
/// run out and B has taken the job over, and A's confirm is turned away by B's fence, live
/// as in the simulation.
#[test]
fn a_held_up_database_answer_stalls_the_worker_past_its_lease_and_the_fence_turns_it_away() {
    use fencesim::sim::{Fault, FaultKind, Hop};
    let held = Fault {
        kind: FaultKind::DbReplyDelay { worker: WorkerId(0), delay_ms: 600 },
        trigger: Trigger::Call { worker: WorkerId(0), hop: Hop::Database, nth: 2 },
    };
    let world = small_live_world(2, 2, 200, vec![held]);
    let simulated = run(&world, 1).unwrap();
    let Some(live) = replayed_live("live-replay-held-reply", world) else { return };
    let story = told(&live);
    assert!(simulated.tally().fence_rejections >= 1, "the simulation's fence turns A away");
    assert!(live.tally().fence_rejections >= 1, "the fence turned A away:\n{story}");
    let claimed = position(&live, |k| {
        matches!(k, EventKind::Write { worker: WorkerId(0), write: fencesim::model::WriteKind::Claim, .. })
    })
    .expect("A claims");
    let by_a = |kind: &EventKind| match kind {
        EventKind::Step { worker, .. }
        | EventKind::Write { worker, .. }
        | EventKind::RefundCalled { worker, .. } => *worker == WorkerId(0),
        _ => false,
    };
    let next = live.record.events[claimed + 1..].iter().find(|e| by_a(&e.kind));
    let held_ms = next.map(|e| e.at_ms - live.record.events[claimed].at_ms);
    assert!(
        held_ms.is_some_and(|ms| ms >= 600),
        "A heard its claim's answer 600 ms late ({held_ms:?}):\n{story}"
    );
    assert!(live.passed(), "{}{story}", live.breach_lines("", false));
}
