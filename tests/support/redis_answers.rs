//! A command run on the simulated Redis and on a real server, and the two answers held
//! side by side: what the conformance tests share.

#![allow(dead_code)] // each test binary uses part of it

use super::redis_server::RedisServer;
use fencesim::sim::redis::{Command, RedisCore, Reply};

/// How much lower a TTL read back from the real server may be than the simulated one: the
/// milliseconds a script takes to run there.
const SLACK_MS: i64 = 200;

/// The real command for a simulated one.
pub fn real(command: &Command<'_>) -> redis::Cmd {
    let texts = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let script_args = |first: &str, keys: &[&str], args: &[&str]| {
        let mut all = vec![first.to_owned(), keys.len().to_string()];
        all.extend(texts(keys));
        all.extend(texts(args));
        all
    };
    let (name, args): (&str, Vec<String>) = match *command {
        Command::SetNxPx { key, value, ttl_ms } => {
            ("SET", vec![key.into(), value.into(), "NX".into(), "PX".into(), ttl_ms.to_string()])
        }
        Command::SetNx { key, value } => ("SET", texts(&[key, value, "NX"])),
        Command::SetPx { key, value, ttl_ms } => {
            ("SET", vec![key.into(), value.into(), "PX".into(), ttl_ms.to_string()])
        }
        Command::Set { key, value } => ("SET", texts(&[key, value])),
        Command::Get { key } => ("GET", texts(&[key])),
        Command::Exists { key } => ("EXISTS", texts(&[key])),
        Command::Del { key } => ("DEL", texts(&[key])),
        Command::Incr { key } => ("INCR", texts(&[key])),
        Command::PTtl { key } => ("PTTL", texts(&[key])),
        Command::PExpire { key, ttl_ms } => ("PEXPIRE", vec![key.into(), ttl_ms.to_string()]),
        Command::Eval { script, keys, args } => ("EVAL", script_args(script, keys, args)),
        Command::EvalSha { sha, keys, args } => ("EVALSHA", script_args(sha, keys, args)),
    };
    let mut cmd = redis::cmd(name);
    for arg in args {
        cmd.arg(arg);
    }
    cmd
}

/// A real answer in the simulated Redis's terms; an error as the line the server sent.
pub fn seen(answer: redis::RedisResult<redis::Value>) -> Result<Reply, String> {
    match answer {
        Ok(value) => reply(value),
        Err(error) => Err(match (error.code(), error.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            _ => error.to_string(),
        }),
    }
}

fn reply(value: redis::Value) -> Result<Reply, String> {
    Ok(match value {
        redis::Value::Okay => Reply::Ok,
        redis::Value::Nil => Reply::Nil,
        redis::Value::Int(n) => Reply::Int(n),
        redis::Value::BulkString(bytes) => Reply::Bulk(String::from_utf8_lossy(&bytes).into_owned()),
        redis::Value::SimpleString(text) => Reply::Status(text),
        redis::Value::Array(items) => Reply::Array(items.into_iter().map(reply).collect::<Result<_, _>>()?),
        other => return Err(format!("an answer the simulation never gives: {other:?}")),
    })
}

/// Runs `script` through both, command by command, and fails at the first answer on
/// which they part.
pub fn agree(server: &RedisServer, name: &str, script: &[Command<'_>]) {
    let mut con = server.connect().expect("a connection");
    redis::cmd("FLUSHALL").query::<()>(&mut con).expect("FLUSHALL");
    redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut con).expect("SCRIPT FLUSH");
    let mut core = RedisCore::new();
    for (step, command) in script.iter().enumerate() {
        let simulated = core.apply(*command, 0, &mut Vec::new());
        let real_answer = seen(real(command).query::<redis::Value>(&mut con));
        let context =
            format!("{name}, step {}: {command:?}: simulated {simulated:?}, real {real_answer:?}", step + 1);
        match (&simulated, &real_answer) {
            (Reply::Error(message), Err(real_message)) => assert_eq!(message, real_message, "{context}"),
            (Reply::Int(ttl), Ok(Reply::Int(real_ttl)))
                if matches!(command, Command::PTtl { .. }) && *ttl >= 0 =>
            {
                assert!(*real_ttl <= *ttl && *real_ttl > *ttl - SLACK_MS, "{context}");
            }
            _ => assert_eq!(Ok(&simulated), real_answer.as_ref(), "{context}"),
        }
    }
}
