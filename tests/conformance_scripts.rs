//! Lua scripts held against a real redis-server: the project's release and renewal, and
//! scripts as a team writes them (an acquire that hands out a token, a renewal that brings
//! a lost lease back, a release that deletes without comparing), each run by the simulated
//! Redis's embedded Lua and by the real server, answer by answer; an error must match the
//! server's word for word, with the script's digest and the line that raised it.

mod support;

use fencesim::sim::redis::{sha1_hex, Command, COMPARE_AND_DELETE_LUA, COMPARE_AND_EXTEND_LUA};
use support::redis_answers::agree;
use support::redis_server;

/// An acquire that takes the lease and hands out the next fencing token in one step.
const ACQUIRE_WITH_TOKEN: &str = "if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then \
     return redis.call('incr', KEYS[2]) else return 0 end";

/// A renewal that sets the lease again when it is gone: a lease lost to expiry comes back.
const RENEW_RECREATING: &str = "local holder = redis.call('get', KEYS[1])\n\
     if holder == false or holder == ARGV[1] then\n\
       return redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])\n\
     end\n\
     return 0";

/// A release that deletes whoever holds the lease.
const RELEASE_BLIND: &str = "return redis.call('del', KEYS[1])";

fn eval<'a>(script: &'a str, keys: &'a [&'a str], args: &'a [&'a str]) -> Command<'a> {
    Command::Eval { script, keys, args }
}

#[test]
fn the_project_s_scripts_and_a_team_s_answer_as_a_real_server_does() {
    let Some(server) = redis_server::start("conformance-scripts") else { return };
    let lock = "lock:settle:m_4471";
    let fence = "fence:settle:m_4471";
    agree(
        &server,
        "the project's release and renewal, by their holder and by another",
        &[
            Command::SetNxPx { key: lock, value: "A#1", ttl_ms: 30_000 },
            eval(COMPARE_AND_EXTEND_LUA, &[lock], &["B#1", "60000"]),
            eval(COMPARE_AND_EXTEND_LUA, &[lock], &["A#1", "60000"]),
            Command::PTtl { key: lock },
            eval(COMPARE_AND_DELETE_LUA, &[lock], &["B#1"]),
            eval(COMPARE_AND_DELETE_LUA, &[lock], &["A#1"]),
            eval(COMPARE_AND_DELETE_LUA, &[lock], &["A#1"]),
            eval(COMPARE_AND_EXTEND_LUA, &[lock], &["A#1", "60000"]),
            Command::Get { key: lock },
        ],
    );
    agree(
        &server,
        "a team's acquire with a token, renewal that re-creates, release that does not compare",
        &[
            eval(ACQUIRE_WITH_TOKEN, &[lock, fence], &["A#1", "30000"]),
            eval(ACQUIRE_WITH_TOKEN, &[lock, fence], &["B#1", "30000"]),
            Command::Get { key: fence },
            Command::Del { key: lock },
            eval(RENEW_RECREATING, &[lock], &["A#1", "30000"]),
            Command::Get { key: lock },
            Command::PTtl { key: lock },
            eval(RENEW_RECREATING, &[lock], &["B#2", "30000"]),
            eval(RELEASE_BLIND, &[lock], &[]),
            eval(ACQUIRE_WITH_TOKEN, &[lock, fence], &["B#2", "30000"]),
            Command::Get { key: lock },
        ],
    );
    let sha = sha1_hex(COMPARE_AND_DELETE_LUA);
    agree(
        &server,
        "EVALSHA: refused before the script ran, found after",
        &[
            Command::SetNxPx { key: lock, value: "A#1", ttl_ms: 30_000 },
            Command::EvalSha { sha: &sha, keys: &[lock], args: &["A#1"] },
            eval(COMPARE_AND_DELETE_LUA, &[lock], &["B#1"]),
            Command::EvalSha { sha: &sha, keys: &[lock], args: &["A#1"] },
            Command::Get { key: lock },
        ],
    );
}

#[test]
fn what_a_script_returns_and_the_errors_it_raises_read_as_the_real_server_s() {
    let Some(server) = redis_server::start("conformance-script-errors") else { return };
    let returned: [&str; 12] = [
        "return {1, 'two', false, 3}",
        "return {1, nil, 3}",
        "return 3.7",
        "return true",
        "return false",
        "return redis.status_reply('FINE')",
        "return {ok = 'YES'}",
        "return redis.call('set', 'k', 0.1) and redis.call('get', 'k')",
        "return redis.call('set', 'k', 100.0, 'px', 5000.0)",
        "redis.call('set', 'k', 'abc') local e = redis.pcall('incr', 'k') return e.err",
        "return type(redis.call('get', 'missing'))",
        "redis.call('set', 'k', 'v') return redis.call('del', 'k', 'missing', 'k')",
    ];
    let raised: [&str; 14] = [
        "return x +",
        "return nil + 1",
        "x = 1",
        "return y",
        "local a = 1\nreturn redis.call('nosuch')",
        "return redis.call('get')",
        "return redis.call('get', {})",
        "return redis.call('pexpire', 'k', 1.5)",
        "error('boom')",
        "error({err = 'CUSTOM x'})",
        "return {err = 'no code here'}",
        "return redis.error_reply('bad')",
        "return redis.error_reply('MY bad')",
        "return redis.error_reply('-FOO bar')",
    ];
    for (group, scripts) in [("returned", &returned[..]), ("raised", &raised[..])] {
        for script in scripts {
            agree(&server, &format!("{group}: {script}"), &[eval(script, &[], &[])]);
        }
    }
}

/// The acquisition, release and renewal of every mechanism file under `mechanisms/` and of
/// the team files the suite catches (`tests/data/mechanism_bugs/`), each run as the file
/// holds it, the way a team's own file is run: by the holder, by another value and once the
/// lease is gone.
#[test]
fn every_mechanism_file_s_scripts_answer_as_a_real_server_does() {
    let Some(server) = redis_server::start("conformance-mechanism-files") else { return };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut scripts, mut acquires) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    let dirs = [root.join("mechanisms"), root.join("tests/data/mechanism_bugs")];
    for entry in dirs.iter().flat_map(|dir| std::fs::read_dir(dir).unwrap()) {
        let path = entry.unwrap().path();
        let file = fencesim::mechanism_file::check(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|problems| panic!("{}: {problems:?}", path.display()));
        scripts.insert((file.scripts.release, file.scripts.renew));
        acquires.extend(file.scripts.acquire);
    }
    assert!(scripts.len() >= 4, "the built-ins' two and the team files' two: {scripts:?}");
    let lock = "lock:settle:m_1";
    assert!(!acquires.is_empty(), "a team file takes its lease with a script of its own");
    for acquire in &acquires {
        agree(
            &server,
            &format!("acquire {acquire:?}"),
            &[
                eval(acquire, &[lock], &["A#1", "30000"]),
                Command::Get { key: lock },
                eval(acquire, &[lock], &["B#1", "30000"]),
                Command::Get { key: lock },
                Command::PTtl { key: lock },
                Command::Del { key: lock },
                eval(acquire, &[lock], &["B#2", "30000"]),
                Command::Get { key: lock },
                Command::Del { key: lock },
            ],
        );
    }
    for (release, renew) in &scripts {
        agree(
            &server,
            &format!("release {release:?}, renew {renew:?}"),
            &[
                Command::SetNxPx { key: lock, value: "A#1", ttl_ms: 30_000 },
                eval(renew, &[lock], &["B#1", "60000"]),
                eval(renew, &[lock], &["A#1", "60000"]),
                Command::PTtl { key: lock },
                eval(release, &[lock], &["B#1"]),
                Command::Get { key: lock },
                eval(release, &[lock], &["A#1"]),
                eval(release, &[lock], &["A#1"]),
                eval(renew, &[lock], &["A#1", "60000"]),
                Command::Get { key: lock },
            ],
        );
    }
}
