//! The simulated Redis held against a real redis-server: the same command scripts go
//! through both, and every answer must agree. A script's commands are the ones the model
//! sends (`SET NX PX`, `GET`, `DEL`, `INCR`, `PEXPIRE`, the release and renewal scripts) and
//! `PTTL` to read what they did. The simulated Redis answers at one instant; the real one a
//! few milliseconds apart, so a TTL read back may be that much lower there.
//!
//! A restart is held against a real server killed and started again under each persistence
//! mode. What is not held against one yet: a clock jump.

mod support;

use fencesim::live::server::Stop;
use fencesim::sim::redis::{Command, RedisCore, Reply, COMPARE_AND_DELETE_LUA, COMPARE_AND_EXTEND_LUA};
use fencesim::sim::Persistence;
use std::time::Duration;
use support::redis_answers::{agree, real, seen};
use support::redis_server::{self, RedisServer};

#[test]
fn the_commands_and_scripts_the_model_sends_answer_as_a_real_server_does() {
    let Some(server) = redis_server::start("conformance-commands") else { return };
    let lock = "lock:settle:m_4471";
    agree(
        &server,
        "a lease taken, refused, read and released by its holder only",
        &[
            Command::SetNxPx { key: lock, value: "A#1", ttl_ms: 30_000 },
            Command::SetNxPx { key: lock, value: "B#1", ttl_ms: 30_000 },
            Command::Get { key: lock },
            Command::PTtl { key: lock },
            Command::Eval { script: COMPARE_AND_DELETE_LUA, keys: &[lock], args: &["B#1"] },
            Command::Eval { script: COMPARE_AND_DELETE_LUA, keys: &[lock], args: &["A#1"] },
            Command::Get { key: lock },
            Command::Del { key: lock },
            Command::PTtl { key: lock },
        ],
    );
    agree(
        &server,
        "a lease renewed by its holder only, and not once it is gone",
        &[
            Command::SetNxPx { key: lock, value: "A#1", ttl_ms: 1_000 },
            Command::Eval { script: COMPARE_AND_EXTEND_LUA, keys: &[lock], args: &["B#1", "9000"] },
            Command::PTtl { key: lock },
            Command::Eval { script: COMPARE_AND_EXTEND_LUA, keys: &[lock], args: &["A#1", "9000"] },
            Command::PTtl { key: lock },
            Command::Del { key: lock },
            Command::Eval { script: COMPARE_AND_EXTEND_LUA, keys: &[lock], args: &["A#1", "9000"] },
            Command::Get { key: lock },
        ],
    );
    agree(
        &server,
        "a fence counter: from nothing, read as text, and its errors",
        &[
            Command::Incr { key: "fence:m" },
            Command::Incr { key: "fence:m" },
            Command::Get { key: "fence:m" },
            Command::PTtl { key: "fence:m" },
            Command::SetPx { key: "text", value: "abc", ttl_ms: 5_000 },
            Command::Incr { key: "text" },
            Command::SetPx { key: "top", value: "9223372036854775807", ttl_ms: 5_000 },
            Command::Incr { key: "top" },
            Command::SetPx { key: "kept", value: "41", ttl_ms: 5_000 },
            Command::Incr { key: "kept" },
            Command::PTtl { key: "kept" },
        ],
    );
    agree(
        &server,
        "an expiry set on a key that has none, and the TTLs a set refuses",
        &[
            Command::PExpire { key: "k", ttl_ms: 100 },
            Command::SetNx { key: "k", value: "v" },
            Command::PTtl { key: "k" },
            Command::PExpire { key: "k", ttl_ms: 3_000 },
            Command::PTtl { key: "k" },
            Command::SetNxPx { key: "k", value: "w", ttl_ms: 1_000 },
            Command::SetNxPx { key: "zero", value: "v", ttl_ms: 0 },
            Command::SetPx { key: "zero", value: "v", ttl_ms: 0 },
            Command::Get { key: "zero" },
            Command::PExpire { key: "k", ttl_ms: 0 },
            Command::Get { key: "k" },
        ],
    );
}

/// A key set with a TTL, read again and again on the real server, each read paired in one
/// transaction with the server's own clock: it is there on every read well before its
/// deadline and gone on every read well after, as on the simulated Redis, which removes it
/// the millisecond after its deadline. Reads within 2 ms of the deadline are not judged: the
/// server reads its clock once for the transaction and once for the key.
#[test]
fn a_key_expires_at_its_deadline_on_the_server_clock() {
    let Some(server) = redis_server::start("conformance-expiry") else { return };
    let mut con = server.connect().expect("a connection");
    let ttl_ms: i64 = 150;
    let (time, _): (Vec<String>, redis::Value) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(ttl_ms)
        .query(&mut con)
        .expect("TIME and SET");
    let set_at_us = micros(&time);
    let mut reads = Vec::new();
    loop {
        let (time, value): (Vec<String>, Option<String>) =
            redis::pipe().atomic().cmd("TIME").cmd("GET").arg("k").query(&mut con).expect("TIME and GET");
        let elapsed_ms = (micros(&time) - set_at_us) / 1_000;
        reads.push((elapsed_ms, value.is_some()));
        if elapsed_ms > ttl_ms + 50 {
            break;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    let mut core = RedisCore::new();
    core.apply(Command::SetNxPx { key: "k", value: "v", ttl_ms: ttl_ms as u64 }, 0, &mut Vec::new());
    for &(elapsed_ms, present) in &reads {
        if (elapsed_ms - ttl_ms).abs() <= 2 {
            continue;
        }
        assert_eq!(present, elapsed_ms < ttl_ms, "real server, {elapsed_ms} ms after the set: {reads:?}");
        let simulated = core.clone().apply(Command::Get { key: "k" }, elapsed_ms as u64, &mut Vec::new());
        assert_eq!(simulated != Reply::Nil, present, "simulated Redis, {elapsed_ms} ms after the set");
    }
    assert!(
        reads.iter().any(|&(at, present)| present && at < ttl_ms - 2),
        "no read before the deadline: {reads:?}"
    );
    assert!(reads.iter().any(|&(at, present)| !present && at > ttl_ms + 2), "no read after it: {reads:?}");
}

/// `TIME`'s seconds and microseconds as microseconds.
fn micros(time: &[String]) -> i64 {
    let part = |i: usize| time[i].parse::<i64>().expect("TIME answers numbers");
    part(0) * 1_000_000 + part(1)
}

/// A real server started for each persistence mode the simulation offers.
fn real_persistence(mode: Persistence) -> &'static [&'static str] {
    match mode {
        Persistence::None => &["--appendonly", "no"],
        Persistence::AofEverySec => &["--appendonly", "yes", "--appendfsync", "everysec"],
        Persistence::AofAlways => &["--appendonly", "yes", "--appendfsync", "always"],
    }
}

/// The writes a restart is judged on: a lease, a fence counter at 3, a key with no TTL.
const WRITES: [Command<'static>; 5] = [
    Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 30_000 },
    Command::Incr { key: "fence" },
    Command::Incr { key: "fence" },
    Command::Incr { key: "fence" },
    Command::SetNx { key: "plain", value: "v" },
];

/// What is left of `WRITES` after a restart: the lease's holder, the counter, the plain key.
fn left(mut answer: impl FnMut(Command<'static>) -> Reply) -> [Reply; 3] {
    ["lock", "fence", "plain"].map(|key| answer(Command::Get { key }))
}

/// What is left after the first `n` of `WRITES` and nothing later, read from the model.
fn left_after(n: usize) -> [Reply; 3] {
    let mut core = RedisCore::new();
    for command in &WRITES[..n] {
        core.apply(*command, 0, &mut Vec::new());
    }
    left(|command| core.apply(command, 0, &mut Vec::new()))
}

/// The writes, a stop (`how`) right after them, within the same second, and a restart
/// on the same directory under `mode`: what the real server and the simulated Redis kept.
fn restarted(mode: Persistence, how: Stop) -> Option<([Reply; 3], [Reply; 3])> {
    let test = format!("conformance-restart-{mode:?}-{how:?}").to_lowercase();
    let mut server = redis_server::start_with(&test, real_persistence(mode))?;
    let mut con = server.connect().expect("a connection");
    let mut core = RedisCore::new();
    for command in WRITES {
        core.apply(command, 0, &mut Vec::new());
        seen(real(&command).query::<redis::Value>(&mut con)).expect("a write");
    }
    core.restart(mode, 10);
    let (while_down, downtime) = server.stop_and_restart(how).expect("the server starts again");
    eprintln!(
        "{mode:?}, {how:?}: the real server answered again {} ms after it stopped",
        downtime.as_millis()
    );
    assert!(
        while_down.is_err(),
        "{mode:?}, {how:?}: a command while the server is down fails: {while_down:?}"
    );
    let mut con = server.connect().expect("a connection after the restart");
    let real_left = left(|command| seen(real(&command).query::<redis::Value>(&mut con)).expect("a read"));
    Some((real_left, left(|command| core.apply(command, 10, &mut Vec::new()))))
}

/// Killed (`SIGKILL`) right after the writes: with no persistence everything is gone and
/// with the append-only file flushed on every write everything is kept, on both. With the
/// file flushed every second the two part, and this test names how: the real server keeps
/// a prefix of the writes, usually all of them (it writes the file before it answers and
/// only defers the flush to disk), but while a flush is still running it holds later
/// writes back for up to two seconds and a killed process loses them (seen: the lease
/// kept, the four writes after it lost). The simulated Redis loses exactly the last second
/// on any restart. While the server is down a client gets an error; the simulated restart
/// is instant.
#[test]
fn a_killed_server_keeps_what_its_persistence_mode_keeps() {
    let (kept, lost) = (left_after(WRITES.len()), left_after(0));
    for mode in Persistence::ALL {
        let Some((real_left, simulated_left)) = restarted(mode, Stop::Kill) else { return };
        let prefixes: Vec<[Reply; 3]> = (0..=WRITES.len()).map(left_after).collect();
        let (real_allowed, simulated_expected) = match mode {
            Persistence::None => (vec![lost.clone()], &lost),
            Persistence::AofAlways => (vec![kept.clone()], &kept),
            Persistence::AofEverySec => (prefixes, &lost),
        };
        assert!(
            real_allowed.contains(&real_left),
            "{mode:?}: the real server kept {real_left:?}, not one of {real_allowed:?}"
        );
        assert_eq!(&simulated_left, simulated_expected, "{mode:?}: the simulated Redis");
    }
}

/// Stopped by `SHUTDOWN NOSAVE` right after the writes: no snapshot is written, and the
/// append-only file is flushed on the way out, so a server flushing it every second keeps
/// everything too. The simulated Redis loses the last second on any restart (it does not
/// tell a clean stop from a crash): the harsher side, named here.
#[test]
fn a_server_shut_down_without_saving_keeps_what_its_append_only_file_holds() {
    let (kept, lost) = (left_after(WRITES.len()), left_after(0));
    for mode in Persistence::ALL {
        let Some((real_left, simulated_left)) = restarted(mode, Stop::ShutdownNoSave) else { return };
        let (real_expected, simulated_expected) = match mode {
            Persistence::None => (&lost, &lost),
            Persistence::AofAlways => (&kept, &kept),
            Persistence::AofEverySec => (&kept, &lost),
        };
        assert_eq!(&real_left, real_expected, "{mode:?}: the real server");
        assert_eq!(&simulated_left, simulated_expected, "{mode:?}: the simulated Redis");
    }
}

/// Leases of 10, 25, 45 and 90 seconds, and a counter with no TTL.
const BEFORE_THE_JUMP: [Command<'static>; 5] = [
    Command::SetNxPx { key: "lock:a", value: "A#1", ttl_ms: 10_000 },
    Command::SetNxPx { key: "lock:b", value: "B#1", ttl_ms: 25_000 },
    Command::SetNxPx { key: "lock:c", value: "C#1", ttl_ms: 45_000 },
    Command::SetNxPx { key: "lock:d", value: "D#1", ttl_ms: 90_000 },
    Command::Incr { key: "fence" },
];

/// The server's clock jumps 30 s forward (libfaketime, the offset read on every time
/// call); the simulated Redis's `redis-clock-jump` jumps its own by as much. The same keys
/// must be gone on both (the leases of 10 and 25 s), the others kept with 30 s less to
/// live, and a lease taken again where one expired.
#[test]
fn a_clock_jump_on_the_server_expires_what_the_simulated_jump_expires() {
    let test = "conformance-clock-jump";
    let Some(clock) = support::faketime::FakeClock::new(test) else { return };
    if !redis_server::available(test) {
        return;
    }
    let server = RedisServer::start_in(test, &["--appendonly", "no"], &clock.env)
        .expect("redis-server under libfaketime");
    let mut con = server.connect().expect("a connection");
    let mut core = RedisCore::new();
    for command in BEFORE_THE_JUMP {
        core.apply(command, 0, &mut Vec::new());
        seen(real(&command).query::<redis::Value>(&mut con)).expect("a write");
    }
    clock.set_offset_s(30);
    core.jump_clock(30_000, 1);
    let mut expired = Vec::new();
    core.expire_due(1, &mut expired);
    let gone: Vec<&str> = expired.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(gone, ["lock:a", "lock:b"], "the simulated jump expires the leases of 10 and 25 s");
    for key in ["lock:a", "lock:b", "lock:c", "lock:d", "fence"] {
        let real_value = seen(real(&Command::Get { key }).query(&mut con)).expect("a read");
        assert_eq!(real_value, core.apply(Command::Get { key }, 1, &mut Vec::new()), "{key} after the jump");
    }
    for (key, left_ms) in [("lock:c", 15_000), ("lock:d", 60_000)] {
        let Ok(Reply::Int(real_left)) = seen(real(&Command::PTtl { key }).query(&mut con)) else {
            panic!("PTTL {key}")
        };
        let simulated = core.apply(Command::PTtl { key }, 0, &mut Vec::new());
        assert_eq!(simulated, Reply::Int(left_ms), "{key}: the simulation's time left");
        assert!(
            (left_ms - 2_000..=left_ms).contains(&real_left),
            "{key}: {real_left} ms left on the server, not about {left_ms}"
        );
    }
    let again = Command::SetNxPx { key: "lock:a", value: "B#2", ttl_ms: 30_000 };
    let real_again = seen(real(&again).query(&mut con)).expect("a write");
    assert_eq!(real_again, core.apply(again, 1, &mut Vec::new()), "a lease taken again where one expired");
}

/// The server's clock frozen on a whole second: leases of 999, 1,000 and 1,001 ms are
/// taken, and the clock moved on by exactly one second. 1 ms after its deadline a lease is
/// gone, and 1 ms before it and at the very millisecond of its deadline it is there: a key
/// expires once the clock is past its deadline, on the real server and on the simulated one.
#[test]
fn a_lease_read_at_its_deadline_and_a_millisecond_either_side() {
    let test = "conformance-expiry-to-the-millisecond";
    let Some(clock) = support::faketime::FakeClock::new(test) else { return };
    if !redis_server::available(test) {
        return;
    }
    clock.freeze_at_s(10);
    let server = RedisServer::start_in(test, &["--appendonly", "no"], &clock.env)
        .expect("redis-server under libfaketime");
    let mut con = server.connect().expect("a connection");
    let mut core = RedisCore::new();
    let leases = [("lock:after", 999), ("lock:at", 1_000), ("lock:before", 1_001)];
    for (key, ttl_ms) in leases {
        let command = Command::SetNxPx { key, value: "A#1", ttl_ms };
        core.apply(command, 0, &mut Vec::new());
        seen(real(&command).query::<redis::Value>(&mut con)).expect("a write");
    }
    clock.freeze_at_s(11);
    let read =
        |con: &mut redis::Connection, key| seen(real(&Command::Get { key }).query(con)).expect("a read");
    let held = Reply::Bulk("A#1".into());
    let real_reads: Vec<Reply> = leases.iter().map(|(key, _)| read(&mut con, key)).collect();
    let simulated: Vec<Reply> =
        leases.iter().map(|(key, _)| core.apply(Command::Get { key }, 1_000, &mut Vec::new())).collect();
    assert_eq!(
        real_reads,
        [Reply::Nil, held.clone(), held.clone()],
        "the real server, 1 ms after, at, and 1 ms before"
    );
    assert_eq!(simulated, real_reads, "the simulated Redis, 1 ms after, at, and 1 ms before");
}

/// The replica's `INFO replication` says its link to the primary is up and in step.
fn wait_until_replicating(replica: &mut redis::Connection) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let info: String = redis::cmd("INFO").arg("replication").query(replica).expect("INFO");
        if info.contains("master_link_status:up") && !info.contains("master_sync_in_progress:1") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the replica did not reach its primary within 10 s");
}

/// What a promoted replica is judged on: the two leases' holders, the first one's TTL,
/// the counter, and whether the key that expired while the primary was down is gone.
fn kept(mut answer: impl FnMut(Command<'static>) -> Reply) -> [Reply; 4] {
    [
        answer(Command::Get { key: "lock:settle:m_1" }),
        answer(Command::Get { key: "lock:settle:m_2" }),
        answer(Command::Get { key: "fence:settle:m_1" }),
        answer(Command::Get { key: "lock:short" }),
    ]
}

/// A real primary and replica (two servers on loopback, the second started with
/// `--replicaof`), failed over as an operator does it: the primary is killed and
/// `REPLICAOF NO ONE` promotes the replica. The first writes reach the replica (`WAIT 1`
/// says so); the last ones are made inside a transaction that then holds the primary's
/// event loop (`DEBUG SLEEP`), so that nothing they wrote is sent to the replica before the
/// primary is killed. The promoted replica keeps the first lease with the deadline the
/// primary gave it (a replica receives `SET ... PX` as an absolute `PXAT`), the counter
/// as the first writes left it, not the second lease; and a key whose deadline passed
/// while it was a replica, which it kept (a replica does not expire keys itself), is gone
/// once it is promoted. The simulated replica, lagging by 100 ms and failed over 10 ms
/// after the last writes, keeps the same.
#[test]
fn a_promoted_replica_keeps_what_reached_it_with_the_primarys_deadline_and_loses_the_rest() {
    let test = "conformance-failover";
    if !redis_server::available(test) {
        return;
    }
    let primary_args = ["--appendonly", "no", "--enable-debug-command", "yes"];
    let primary = RedisServer::start(&format!("{test}-primary"), &primary_args).expect("a primary");
    let port = primary.port.to_string();
    let replica_args = ["--appendonly", "no", "--replicaof", "127.0.0.1", port.as_str()];
    let replica = RedisServer::start(&format!("{test}-replica"), &replica_args).expect("a replica");
    let (mut p, mut r) = (primary.connect().expect("the primary"), replica.connect().expect("the replica"));
    wait_until_replicating(&mut r);

    let first: [Command<'static>; 5] = [
        Command::SetNxPx { key: "lock:settle:m_1", value: "A#1", ttl_ms: 30_000 },
        Command::Incr { key: "fence:settle:m_1" },
        Command::Incr { key: "fence:settle:m_1" },
        Command::Incr { key: "fence:settle:m_1" },
        Command::SetNxPx { key: "lock:short", value: "C#1", ttl_ms: 100 },
    ];
    let set_at = std::time::Instant::now();
    for command in &first {
        seen(real(command).query::<redis::Value>(&mut p)).expect("a write on the primary");
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5_000).query(&mut p).expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged the first writes");
    let last = [
        Command::SetNxPx { key: "lock:settle:m_2", value: "B#1", ttl_ms: 30_000 },
        Command::Incr { key: "fence:settle:m_1" },
    ];
    let mut held = primary.connect().expect("a second connection to the primary");
    let transaction = std::thread::spawn(move || {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for command in &last {
            pipe.add_command(real(command));
        }
        pipe.add_command(redis::cmd("DEBUG").arg("SLEEP").arg(3).clone());
        // the primary is killed while it sleeps: no answer comes back
        let _ = pipe.query::<redis::Value>(&mut held);
    });
    std::thread::sleep(Duration::from_millis(1_500));
    let keys_while_replica: i64 = redis::cmd("DBSIZE").query(&mut r).expect("DBSIZE");
    drop(primary); // SIGKILL
    let _ = transaction.join();
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut r).expect("REPLICAOF NO ONE");
    let real_ttl: i64 = redis::cmd("PTTL").arg("lock:settle:m_1").query(&mut r).expect("PTTL");
    let since_set = set_at.elapsed().as_millis() as i64;
    let real_kept = kept(|command| seen(real(&command).query(&mut r)).expect("a read"));

    let mut core = RedisCore::new();
    core.preset("fence:settle:m_1", fencesim::sim::redis::Value::Int(0));
    let mut link = fencesim::sim::replica::ReplicaLink::new(&core, 100, 1);
    for command in first {
        link.apply(&mut core, command, 0, &mut Vec::new());
    }
    for command in last {
        link.apply(&mut core, command, 1_500, &mut Vec::new());
    }
    let mut promoted = link.fail_over(1_510).core;
    let simulated_ttl = promoted.apply(Command::PTtl { key: "lock:settle:m_1" }, 1_510, &mut Vec::new());
    let simulated_kept = kept(|command| promoted.apply(command, 1_510, &mut Vec::new()));

    assert_eq!(
        keys_while_replica, 3,
        "while a replica it kept the expired key: it never expires keys itself"
    );
    let expected = [Reply::Bulk("A#1".into()), Reply::Nil, Reply::Bulk("3".into()), Reply::Nil];
    assert_eq!(real_kept, expected, "the real promoted replica");
    assert_eq!(simulated_kept, expected, "the simulated promoted replica");
    // The promotion came at least 1.5 s after the SET (the sleep above): a TTL run from the
    // promotion would have more than 29 s left, one run from the SET less than 28.5 s. The
    // bounds leave a machine's scheduling delays out of the verdict, and 2 ms for the two
    // clocks' rounding to whole milliseconds (seen: 28,497 ms left 1,502 ms after the SET).
    assert!(
        (30_000 - since_set - 2..=28_500).contains(&real_ttl),
        "the real TTL runs from the primary's SET, not from the promotion: {real_ttl} ms left {since_set} ms after it"
    );
    assert_eq!(simulated_ttl, Reply::Int(30_000 - 1_510), "the simulated TTL runs from the primary's SET");
}
