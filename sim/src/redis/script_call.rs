//! The commands a script may send with `redis.call`, read from its arguments as a server
//! reads them, and the errors a server gives for the rest. A real command the simulated
//! Redis does not run is named as such, never taken for another.

use super::{Command, INVALID_EXPIRE};

/// The commands a script may send, by name.
pub const NAMES: [&str; 9] = ["get", "set", "setnx", "del", "exists", "incr", "pexpire", "expire", "pttl"];

/// The commands a script may send, in words.
pub const MODELLED: &str = "GET, SET (with NX, PX, EX), SETNX, DEL, EXISTS, INCR, PEXPIRE, EXPIRE, PTTL";

const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
const UNKNOWN: &str = "ERR Unknown Redis command called from script";
const NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";

/// Real commands the simulated Redis does not run.
const NOT_MODELLED: [&str; 36] = [
    "append",
    "decr",
    "decrby",
    "expireat",
    "getdel",
    "getex",
    "getset",
    "hdel",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hset",
    "incrby",
    "keys",
    "lpop",
    "lpush",
    "mget",
    "mset",
    "persist",
    "pexpireat",
    "publish",
    "rpop",
    "rpush",
    "sadd",
    "scan",
    "sismember",
    "smembers",
    "srem",
    "time",
    "ttl",
    "type",
    "xack",
    "xadd",
    "zadd",
    "zrem",
];

/// What a script asked the instance to do.
pub enum Called<'a> {
    One(Command<'a>),
    /// `DEL` of several keys: each deleted in turn, the reply how many were there.
    DelMany(&'a [String]),
}

/// Reads one `redis.call`'s arguments (the command's name first).
pub fn read(argv: &[String]) -> Result<Called<'_>, String> {
    let mut lower = [0u8; 16];
    let name = match argv[0].as_bytes() {
        bytes if bytes.len() <= lower.len() => {
            lower[..bytes.len()].copy_from_slice(bytes);
            lower[..bytes.len()].make_ascii_lowercase();
            std::str::from_utf8(&lower[..bytes.len()]).unwrap_or("")
        }
        _ => "",
    };
    let args = &argv[1..];
    let arity = |n: usize| if args.len() == n { Ok(()) } else { Err(WRONG_ARITY.to_owned()) };
    let command = match name {
        "get" => arity(1).map(|()| Command::Get { key: &args[0] })?,
        "set" => set(args)?,
        "setnx" => arity(2).map(|()| Command::SetNx { key: &args[0], value: &args[1] })?,
        "del" if args.len() > 1 => return Ok(Called::DelMany(args)),
        "del" => arity(1).map(|()| Command::Del { key: &args[0] })?,
        "exists" => arity(1).map(|()| Command::Exists { key: &args[0] })?,
        "incr" => arity(1).map(|()| Command::Incr { key: &args[0] })?,
        "pttl" => arity(1).map(|()| Command::PTtl { key: &args[0] })?,
        "pexpire" | "expire" => {
            arity(2)?;
            let n: i64 = args[1].parse().map_err(|_| NOT_AN_INTEGER)?;
            let scale = if name == "expire" { 1_000 } else { 1 };
            Command::PExpire { key: &args[0], ttl_ms: n.max(0).saturating_mul(scale) as u64 }
        }
        "eval" | "evalsha" | "script" | "multi" | "exec" | "watch" => return Err(NOT_ALLOWED.to_owned()),
        _ if NOT_MODELLED.contains(&name) => {
            return Err(format!(
                "ERR the simulated Redis does not run '{name}' (a script may send {MODELLED})"
            ))
        }
        _ => return Err(UNKNOWN.to_owned()),
    };
    Ok(Called::One(command))
}

/// `SET key value [NX] [PX ms | EX s]`.
fn set(args: &[String]) -> Result<Command<'_>, String> {
    let [key, value, options @ ..] = args else { return Err(WRONG_ARITY.to_owned()) };
    let (mut nx, mut ttl_ms) = (false, None);
    let mut rest = options.iter();
    while let Some(option) = rest.next() {
        match option.to_ascii_lowercase().as_str() {
            "nx" => nx = true,
            unit @ ("px" | "ex") => {
                let n: i64 = rest.next().ok_or("ERR syntax error")?.parse().map_err(|_| NOT_AN_INTEGER)?;
                if n <= 0 {
                    return Err(INVALID_EXPIRE.to_owned());
                }
                ttl_ms = Some(if unit == "ex" { n.saturating_mul(1_000) } else { n } as u64);
            }
            other @ ("xx" | "get" | "keepttl" | "exat" | "pxat") => {
                let other = other.to_ascii_uppercase();
                return Err(format!("ERR the simulated Redis does not model SET's {other} option"));
            }
            _ => return Err("ERR syntax error".to_owned()),
        }
    }
    Ok(match (nx, ttl_ms) {
        (true, Some(ttl_ms)) => Command::SetNxPx { key, value, ttl_ms },
        (true, None) => Command::SetNx { key, value },
        (false, Some(ttl_ms)) => Command::SetPx { key, value, ttl_ms },
        (false, None) => Command::Set { key, value },
    })
}
