use super::*;

fn run(core: &mut RedisCore, cmd: Command<'_>, now: u64) -> (Reply, Vec<Expired>) {
    let mut expired = Vec::new();
    let reply = core.apply(cmd, now, &mut expired);
    (reply, expired)
}

fn eval(core: &mut RedisCore, script: &str, keys: &[&str], args: &[&str], now: u64) -> Reply {
    run(core, Command::Eval { script, keys, args }, now).0
}

/// The error a script gives, without the digest and line a server adds.
fn error_of(reply: Reply) -> String {
    match reply {
        Reply::Error(message) => message.split(" script: ").next().unwrap_or_default().to_owned(),
        other => panic!("an error, not {other:?}"),
    }
}

#[test]
fn set_nx_px_grants_once_and_the_key_is_there_at_its_deadline_and_gone_a_millisecond_later() {
    let mut r = RedisCore::new();
    let set = |v| Command::SetNxPx { key: "lock:settle:m_4471", value: v, ttl_ms: 30_000 };
    assert_eq!(run(&mut r, set("A#1"), 0).0, Reply::Ok);
    assert_eq!(run(&mut r, set("B#1"), 29_999).0, Reply::Nil);
    assert_eq!(run(&mut r, set("B#1"), 30_000), (Reply::Nil, vec![]), "still there at its deadline");
    assert_eq!(r.next_expiry(), Some(30_001));
    let (reply, expired) = run(&mut r, set("B#1"), 30_001);
    assert_eq!(reply, Reply::Ok);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].at_ms, 30_001);
    assert_eq!(expired[0].value, Value::Str("A#1".into()));
}

#[test]
fn incr_counts_from_a_preset_value_and_refuses_a_non_integer() {
    let mut r = RedisCore::new();
    r.preset("fence:settle:m_4471", Value::Int(32));
    assert_eq!(run(&mut r, Command::Incr { key: "fence:settle:m_4471" }, 0).0, Reply::Int(33));
    assert_eq!(run(&mut r, Command::Incr { key: "fence:settle:m_4471" }, 5).0, Reply::Int(34));
    assert_eq!(run(&mut r, Command::Incr { key: "fresh" }, 5).0, Reply::Int(1));
    r.preset("text", Value::Str("abc".into()));
    assert!(matches!(run(&mut r, Command::Incr { key: "text" }, 5).0, Reply::Error(_)));
}

#[test]
fn compare_and_delete_only_deletes_its_own_value() {
    let mut r = RedisCore::new();
    run(&mut r, Command::SetNxPx { key: "k", value: "B#1", ttl_ms: 100 }, 0);
    assert_eq!(eval(&mut r, COMPARE_AND_DELETE_LUA, &["k"], &["A#1"], 1), Reply::Int(0));
    assert_eq!(r.value_of("k"), Some(&Value::Str("B#1".into())));
    assert_eq!(eval(&mut r, COMPARE_AND_DELETE_LUA, &["k"], &["B#1"], 2), Reply::Int(1));
    assert_eq!(run(&mut r, Command::Get { key: "k" }, 3).0, Reply::Nil);
}

#[test]
fn extend_and_pexpire_move_the_deadline() {
    let mut r = RedisCore::new();
    run(&mut r, Command::SetNxPx { key: "k", value: "A#1", ttl_ms: 100 }, 0);
    assert_eq!(eval(&mut r, COMPARE_AND_EXTEND_LUA, &["k"], &["B#1", "100"], 50), Reply::Int(0));
    assert_eq!(eval(&mut r, COMPARE_AND_EXTEND_LUA, &["k"], &["A#1", "100"], 50), Reply::Int(1));
    assert_eq!(r.next_expiry(), Some(151));
    assert_eq!(run(&mut r, Command::PExpire { key: "k", ttl_ms: 10 }, 60).0, Reply::Int(1));
    let mut expired = Vec::new();
    r.expire_due(70, &mut expired);
    assert!(expired.is_empty(), "there at its deadline");
    r.expire_due(71, &mut expired);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].at_ms, 71);
    assert_eq!(run(&mut r, Command::Del { key: "k" }, 72).0, Reply::Int(0));
}

/// An expiry of 0 ms is already past, as on a real server: the key is gone to the next
/// command in the same millisecond, and PTTL reads 0 at a deadline's own millisecond.
#[test]
fn pexpire_0_removes_the_key_at_once_and_pttl_reads_0_at_the_deadline() {
    let mut r = RedisCore::new();
    run(&mut r, Command::SetNxPx { key: "k", value: "A#1", ttl_ms: 100 }, 0);
    assert_eq!(run(&mut r, Command::PTtl { key: "k" }, 100).0, Reply::Int(0));
    assert_eq!(run(&mut r, Command::PExpire { key: "k", ttl_ms: 0 }, 50).0, Reply::Int(1));
    let (reply, expired) = run(&mut r, Command::Get { key: "k" }, 50);
    assert_eq!((reply, expired.len(), expired[0].at_ms), (Reply::Nil, 1, 50));
}

#[test]
fn a_restart_keeps_or_loses_keys_by_persistence_mode() {
    let fill = |r: &mut RedisCore| {
        r.preset("fence:settle:m_1", Value::Int(32));
        run(r, Command::Incr { key: "fence:settle:m_1" }, 5_000);
        run(r, Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 30_000 }, 5_500);
    };
    let mut none = RedisCore::new();
    fill(&mut none);
    assert_eq!(none.restart(Persistence::None, 5_800), 2);
    assert_eq!(run(&mut none, Command::Incr { key: "fence:settle:m_1" }, 5_801).0, Reply::Int(1));

    let mut every_sec = RedisCore::new();
    fill(&mut every_sec);
    // the INCR at 5,000 is older than a second at 6,200; the SET at 5,500 is not
    assert_eq!(every_sec.restart(Persistence::AofEverySec, 6_200), 1);
    assert_eq!(every_sec.value_of("fence:settle:m_1"), Some(&Value::Int(33)));
    assert_eq!(every_sec.value_of("lock"), None);

    let mut always = RedisCore::new();
    fill(&mut always);
    assert_eq!(always.restart(Persistence::AofAlways, 5_800), 0);
    assert_eq!(always.value_of("lock"), Some(&Value::Str("A#1".into())));
}

/// A refused `SET NX` is logged with the key it found; if that key expires before a
/// restart that rolls the `SET NX` back, the file brings it back past its deadline, and the
/// server drops it as it loads: it does not expire a second time, stamped before the restart.
#[test]
fn a_restart_does_not_bring_back_a_key_whose_deadline_has_passed() {
    let mut r = RedisCore::new();
    let set = |value| Command::SetNxPx { key: "lock", value, ttl_ms: 1_000 };
    assert_eq!(run(&mut r, set("worker"), 0).0, Reply::Ok);
    assert_eq!(run(&mut r, set("worker"), 900).0, Reply::Nil, "refused: the key is live");
    let (reply, expired) = run(&mut r, set("worker"), 1_500);
    assert_eq!((reply, expired.len()), (Reply::Ok, 1), "the first expired, the third is granted");
    assert_eq!(r.restart(Persistence::AofEverySec, 1_600), 2, "both writes of the last second undone");
    assert_eq!(r.value_of("lock"), None);
    assert_eq!(
        run(&mut r, Command::Get { key: "lock" }, 1_601),
        (Reply::Nil, vec![]),
        "nothing expires again"
    );

    // a key rolled back to one still live comes back
    let mut live = RedisCore::new();
    run(&mut live, Command::SetPx { key: "lock", value: "A", ttl_ms: 5_000 }, 0);
    run(&mut live, Command::SetPx { key: "lock", value: "B", ttl_ms: 5_000 }, 1_500);
    assert_eq!(live.restart(Persistence::AofEverySec, 1_600), 1);
    assert_eq!(live.value_of("lock"), Some(&Value::Str("A".into())));
}

#[test]
fn a_clock_jump_brings_expiry_forward() {
    let mut r = RedisCore::new();
    run(&mut r, Command::SetNxPx { key: "k", value: "A#1", ttl_ms: 30_000 }, 0);
    r.jump_clock(20_000, 5);
    assert_eq!(r.next_expiry(), Some(10_001));
    let expired = r.expire_now("k", 11).unwrap();
    assert_eq!(expired.at_ms, 11);
}

/// A jump past a key's deadline expires it at the jump: taken back through the jumped
/// clock, its deadline would date the expiry before the key was set.
#[test]
fn a_key_a_clock_jump_expires_is_dated_at_the_jump() {
    let mut r = RedisCore::new();
    run(&mut r, Command::SetNxPx { key: "early", value: "A#1", ttl_ms: 200 }, 1_000);
    run(&mut r, Command::SetNxPx { key: "late", value: "B#1", ttl_ms: 5_000 }, 1_000);
    r.jump_clock(1_000, 1_050);
    let mut expired = Vec::new();
    r.expire_due(1_050, &mut expired);
    let dated: Vec<(&str, u64)> = expired.iter().map(|e| (e.key.as_str(), e.at_ms)).collect();
    assert_eq!(dated, [("early", 1_050)], "dated at the jump, not at 200 ms");
    // a key the jump did not reach expires just past its deadline on the jumped clock
    r.expire_due(5_000, &mut expired);
    assert_eq!(expired.len(), 1, "there at its deadline");
    r.expire_due(5_001, &mut expired);
    assert_eq!(expired.last().map(|e| (e.key.as_str(), e.at_ms)), Some(("late", 5_001)));
}

#[test]
fn a_zero_ttl_is_an_error_as_in_redis() {
    let mut r = RedisCore::new();
    assert!(matches!(
        run(&mut r, Command::SetNxPx { key: "k", value: "v", ttl_ms: 0 }, 0).0,
        Reply::Error(_)
    ));
}

#[test]
fn a_script_sends_commands_and_its_answer_becomes_a_reply_by_redis_rules() {
    let mut r = RedisCore::new();
    let script = "redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', 500) \
                  return {redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]), \
                  redis.call('get', 'missing'), redis.call('exists', KEYS[1])}";
    let reply = eval(&mut r, script, &["k"], &["v"], 10);
    let expected = [Reply::Bulk("v".into()), Reply::Int(500), Reply::Nil, Reply::Int(1)];
    assert_eq!(reply, Reply::Array(expected.to_vec()), "a missing key is false, and nil in an array");
    assert_eq!(eval(&mut r, "return redis.status_reply('FINE')", &[], &[], 11), Reply::Status("FINE".into()));
    assert_eq!(eval(&mut r, "return redis.call('set', 'a', 'b')", &[], &[], 11), Reply::Ok);
    assert_eq!(eval(&mut r, "return 3.7", &[], &[], 11), Reply::Int(3));
    assert_eq!(eval(&mut r, "return true", &[], &[], 11), Reply::Int(1));
    assert_eq!(eval(&mut r, "return false", &[], &[], 11), Reply::Nil);
    assert_eq!(eval(&mut r, "return redis.call('del', 'a', 'k', 'none')", &[], &[], 11), Reply::Int(2));
    let sha1 = eval(&mut r, "return redis.sha1hex('')", &[], &[], 11);
    assert_eq!(sha1, Reply::Bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709".into()));
}

#[test]
fn script_errors_are_worded_as_a_server_words_them() {
    let mut r = RedisCore::new();
    let compile = eval(&mut r, "return x +", &[], &[], 0);
    let expected = "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'";
    assert_eq!(compile, Reply::Error(expected.into()));
    let unknown = eval(&mut r, "local x = 1\nreturn redis.call('nosuch')", &[], &[], 0);
    let sha = sha1_hex("local x = 1\nreturn redis.call('nosuch')");
    let expected = format!("ERR Unknown Redis command called from script script: {sha}, on @user_script:2.");
    assert_eq!(unknown, Reply::Error(expected));
    let cases = [
        ("return nil + 1", "ERR user_script:1: attempt to perform arithmetic on a nil value"),
        ("x = 1", "ERR user_script:1: Attempt to modify a readonly table"),
        ("return y", "ERR user_script:1: Script attempted to access nonexistent global variable 'y'"),
        ("return redis.call('get')", "ERR Wrong number of args calling Redis command from script"),
        ("error({err='CUSTOM x'})", "CUSTOM x"),
        ("return redis.call('hset', 'h', 'f', 'v')", "ERR the simulated Redis does not run 'hset'"),
        ("return math.random()", "ERR user_script:1: attempt to call field 'random' (a nil value)"),
        ("string.rep = nil", "ERR user_script:1: Attempt to modify a readonly table"),
    ];
    for (script, expected) in cases {
        let said = error_of(eval(&mut r, script, &[], &[], 0));
        assert!(said.starts_with(expected), "{script}: {said}");
    }
    let caught = "local e = redis.pcall('incr', KEYS[1]) return e.err";
    r.preset("t", Value::Str("abc".into()));
    let reply = eval(&mut r, caught, &["t"], &[], 0);
    assert_eq!(reply, Reply::Bulk("ERR value is not an integer or out of range".into()));
    for (message, said) in [("bad", "ERR bad"), ("MY bad", "MY bad"), ("-FOO bar", "FOO bar")] {
        let script = format!("return redis.error_reply('{message}')");
        assert_eq!(eval(&mut r, &script, &[], &[], 0), Reply::Error(said.into()), "{message}");
    }
}

#[test]
fn a_script_that_runs_on_and_on_is_stopped() {
    let mut r = RedisCore::new();
    let said = error_of(eval(&mut r, "while true do end", &[], &[], 0));
    assert!(said.contains("instructions and was stopped"), "{said}");
    assert_eq!(eval(&mut r, "return 1", &[], &[], 0), Reply::Int(1), "the next script runs");
}

#[test]
fn evalsha_finds_a_script_run_since_the_start_and_a_restart_forgets_it() {
    let mut r = RedisCore::new();
    let sha = sha1_hex("return 7");
    let by_sha = |r: &mut RedisCore| run(r, Command::EvalSha { sha: &sha, keys: &[], args: &[] }, 0).0;
    assert!(matches!(by_sha(&mut r), Reply::Error(e) if e.starts_with("NOSCRIPT")));
    assert_eq!(eval(&mut r, "return 7", &[], &[], 0), Reply::Int(7));
    assert_eq!(by_sha(&mut r), Reply::Int(7));
    r.restart(Persistence::AofAlways, 10);
    assert!(matches!(by_sha(&mut r), Reply::Error(e) if e.starts_with("NOSCRIPT")));
}

/// A script's named keys are one write each as it starts, and a key it writes without
/// naming it is logged as it writes it: a restart rolls both back.
#[test]
fn a_restart_rolls_back_what_a_script_wrote() {
    let mut r = RedisCore::new();
    run(&mut r, Command::SetNxPx { key: "lock", value: "A#1", ttl_ms: 30_000 }, 0);
    let script = "redis.call('del', KEYS[1]) redis.call('set', 'other', 'x') redis.call('set', 'other', 'y')";
    eval(&mut r, script, &["lock"], &[], 2_000);
    let writes: Vec<&str> = r.last_writes().map(|(key, _)| key).collect();
    assert_eq!(writes, ["lock", "other"]);
    assert_eq!(r.restart(Persistence::AofEverySec, 2_500), 2);
    assert_eq!(r.value_of("lock"), Some(&Value::Str("A#1".into())));
    assert_eq!(r.value_of("other"), None);
}
