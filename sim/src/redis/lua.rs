//! Scripts as a Redis server runs them: `EVAL` in an embedded Lua 5.1, the version Redis
//! embeds. A script runs at one instant against one instance, with `KEYS` and `ARGV`, and
//! sends it commands with `redis.call` (an error stops the script) and `redis.pcall` (an
//! error comes back as a table). What it returns becomes a reply by Redis's rules, and an
//! error it raises is worded as a Redis 7 server words it, with the script's digest and
//! the line that raised it.
//!
//! One Lua state per thread compiles each script once, by its SHA-1 digest. Nothing a
//! script does outlives it: the globals it sees are read only, and what keeps a state of
//! its own (`math.random`, `os`, `io`, `load`, `rawset`) is not there, so a run is the same
//! bytes whatever the thread ran before it. A script that runs past `INSTRUCTION_LIMIT`
//! instructions is stopped with an error (a real server would block every client).

use super::{lua_calls, RedisCore, Reply};
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState};
use std::cell::{Cell, RefCell};

/// Where scripts are loaded from, as a Redis server names them in its errors.
const SOURCE: &str = "@user_script";

/// How many Lua instructions a script may run before it is stopped.
pub const INSTRUCTION_LIMIT: u32 = 10_000_000;

/// How often the instruction count is looked at.
const HOOK_EVERY: u32 = 10_000;

/// Builds the world a script sees, once per state; returns the function that runs one.
const PRELUDE: &str = r#"
local raw, setfenv, setmetatable, xpcall, type, tostring, rawset, select = ...
local find, sub = string.find, string.sub
local function readonly(t)
  return setmetatable({}, {
    __index = t,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
end
local redis = {
  call = raw.call,
  pcall = raw.pcall,
  error_reply = function(message)
    message = tostring(message)
    if sub(message, 1, 1) == '-' then message = sub(message, 2) end
    if not find(message, ' ', 1, true) then message = 'ERR ' .. message end
    return {err = message}
  end,
  status_reply = function(message) return {ok = message} end,
  sha1hex = function(text) return raw.sha1(text) end,
  log = function() end,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
}
local math_kept = {}
for name, f in pairs(math) do
  if name ~= 'random' and name ~= 'randomseed' then math_kept[name] = f end
end
local visible = {
  string = readonly(string), table = readonly(table), math = readonly(math_kept),
  redis = readonly(redis), _VERSION = _VERSION,
}
for _, name in ipairs({'assert', 'error', 'ipairs', 'next', 'pairs', 'pcall', 'rawequal',
    'rawget', 'select', 'setmetatable', 'getmetatable', 'tonumber', 'tostring', 'type',
    'unpack', 'xpcall'}) do
  visible[name] = _G[name]
end
getmetatable('').__metatable = false
local globals = {
  __index = function(_, name)
    local value = visible[name]
    if value == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return value
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
}
local function handler(err)
  local source, line = raw.where()
  local message = type(err) == 'table' and err.err
  if type(message) ~= 'string' then message = 'ERR ' .. tostring(err) end
  return {err = message, source = source, line = line}
end
local environments = setmetatable({}, {__mode = 'k'})
return function(script, count, ...)
  local keys, argv = {}, {}
  for i = 1, select('#', ...) do
    if i <= count then keys[i] = (select(i, ...)) else argv[i - count] = (select(i, ...)) end
  end
  local env = environments[script]
  if env == nil then
    env = setmetatable({}, globals)
    setfenv(script, env)
    environments[script] = env
  end
  rawset(env, 'KEYS', keys)
  rawset(env, 'ARGV', argv)
  return xpcall(script, handler)
end
"#;

/// A script as the engine keeps it: its digest, and the function it compiled to or the
/// syntax error Lua gave.
struct Compiled {
    sha: String,
    function: Result<Function, String>,
}

struct Engine {
    lua: Lua,
    run: Function,
    /// By the script's text: looking a script up costs a hash of its text, not its SHA-1.
    compiled: RefCell<ahash::AHashMap<String, Compiled>>,
    /// Instructions the running script has left, in hook periods.
    budget: std::rc::Rc<Cell<u32>>,
}

thread_local! {
    static ENGINE: Engine = Engine::new().expect("the script engine starts");
}

/// The SHA-1 digest of a script, in hex, as `EVALSHA` names it.
pub fn sha1_hex(text: &str) -> String {
    sha1_smol::Sha1::from(text).digest().to_string()
}

thread_local! {
    /// The instance a script is running on, and the script's instant: taken out of its
    /// owner for the length of the script, for `redis.call` to reach.
    static RUNNING: RefCell<Option<(RedisCore, u64)>> = const { RefCell::new(None) };
}

/// Runs `script` with `keys` and `args` on `core`, at `now_ms`: each command the script
/// sends runs on `core` at that instant.
pub(super) fn eval(core: &mut RedisCore, script: &str, keys: &[&str], args: &[&str], now_ms: u64) -> Reply {
    RUNNING.with(|running| *running.borrow_mut() = Some((std::mem::take(core), now_ms)));
    let reply = ENGINE.with(|engine| engine.eval(script, keys, args));
    *core = RUNNING.with(|running| running.borrow_mut().take()).expect("the instance comes back").0;
    reply
}

/// Runs one command a script sent on the instance the script runs on.
pub(super) fn run_command(argv: &[String]) -> Reply {
    RUNNING.with(|running| match running.borrow_mut().as_mut() {
        Some((core, now_ms)) => core.script_command(argv, *now_ms),
        None => Reply::Error("ERR no script is running".to_owned()),
    })
}

/// Compiles a script as `EVAL` would, without running it: Lua's message when it does not.
pub fn compile_script(script: &str) -> Result<(), String> {
    ENGINE.with(|engine| {
        engine.compile(script);
        match &engine.compiled.borrow()[script].function {
            Ok(_) => Ok(()),
            Err(message) => Err(message.clone()),
        }
    })
}

impl Engine {
    fn new() -> mlua::Result<Engine> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let raw = lua.create_table()?;
        raw.set(
            "sha1",
            lua.create_function(|_, text: mlua::LuaString| Ok(sha1_hex(&text.to_string_lossy())))?,
        )?;
        raw.set("where", lua.create_function(|lua, ()| Ok(where_raised(lua)))?)?;
        // SAFETY: both keep to the discipline `lua_calls` describes.
        raw.set("call", unsafe { lua.create_c_function(lua_calls::redis_call)? })?;
        raw.set("pcall", unsafe { lua.create_c_function(lua_calls::redis_pcall)? })?;
        let globals = lua.globals();
        let builtins = ["setfenv", "setmetatable", "xpcall", "type", "tostring", "rawset", "select"]
            .map(|name| globals.get::<Function>(name));
        let mut arguments = vec![Value::Table(raw)];
        for builtin in builtins {
            arguments.push(Value::Function(builtin?));
        }
        let prelude = lua.load(PRELUDE).set_name("=prelude").into_function()?;
        let run: Function = prelude.call(mlua::MultiValue::from_vec(arguments))?;
        let budget = std::rc::Rc::new(Cell::new(0));
        let left = budget.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |_, _| match left.get() {
            0 => Err(mlua::Error::runtime(format!(
                "the script ran past {INSTRUCTION_LIMIT} instructions and was stopped"
            ))),
            n => {
                left.set(n - 1);
                Ok(VmState::Continue)
            }
        })?;
        Ok(Engine { lua, run, compiled: RefCell::new(ahash::AHashMap::new()), budget })
    }

    fn eval(&self, script: &str, keys: &[&str], args: &[&str]) -> Reply {
        self.compile(script);
        let compiled = self.compiled.borrow();
        let Compiled { sha, function } = compiled.get(script).expect("just compiled");
        let function = match function {
            Ok(function) => function.clone(),
            Err(message) => {
                return Reply::Error(format!("ERR Error compiling script (new function): {message}"))
            }
        };
        self.budget.set(INSTRUCTION_LIMIT / HOOK_EVERY);
        let strings = keys.iter().chain(args).map(|text| self.lua.create_string(text).map(Value::String));
        let outcome = std::iter::once(Ok(Value::Function(function)))
            .chain(std::iter::once(Ok(Value::Integer(keys.len() as mlua::Integer))))
            .chain(strings)
            .collect::<mlua::Result<Vec<Value>>>()
            .and_then(|arguments| self.run.call::<(bool, Value)>(mlua::MultiValue::from_vec(arguments)));
        match outcome {
            Ok((true, result)) => from_lua(&result),
            Ok((false, raised_error)) => raised(&raised_error, sha),
            Err(e) => Reply::Error(format!("ERR {e} script: {sha}")),
        }
    }

    /// Compiles the script unless it was before; a syntax error is kept as Lua words it.
    fn compile(&self, script: &str) {
        if self.compiled.borrow().contains_key(script) {
            return;
        }
        let function = self.lua.load(script).set_name(SOURCE).into_function().map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => message,
            other => other.to_string(),
        });
        let compiled = Compiled { sha: sha1_hex(script), function };
        self.compiled.borrow_mut().insert(script.to_owned(), compiled);
    }
}

/// The innermost frame of the script on the stack: its source and current line.
fn where_raised(lua: &Lua) -> (Option<String>, Option<usize>) {
    let mut level = 1;
    while let Some(found) = lua.inspect_stack(level, |frame| {
        let source = frame.source().source.map(|s| s.into_owned());
        (source.as_deref() == Some(SOURCE)).then(|| (source, frame.current_line()))
    }) {
        if let Some(at) = found {
            return at;
        }
        level += 1;
    }
    (None, None)
}

/// A number as a server prints one it is given (`%.17g`): whole numbers without a point.
pub(super) fn number_text(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if n.fract() == 0.0 && n.abs() < 1e17 {
        return format!("{}", n as i64);
    }
    let scientific = format!("{n:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("an exponent");
    let exponent: i32 = exponent.parse().expect("a number");
    let trim = |s: &str| s.trim_end_matches('0').trim_end_matches('.').to_owned();
    if !(-4..17).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mantissa), exponent.abs());
    }
    trim(&format!("{n:.*}", (16 - exponent) as usize))
}

/// What a script returned, as the reply a server sends for it.
fn from_lua(value: &Value) -> Reply {
    match value {
        Value::String(text) => Reply::Bulk(text.to_string_lossy()),
        Value::Integer(n) => Reply::Int(*n),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::Boolean(true) => Reply::Int(1),
        Value::Table(table) => table_reply(table),
        _ => Reply::Nil,
    }
}

/// A table: an error, a status, or an array up to its first nil.
fn table_reply(table: &Table) -> Reply {
    if let Ok(Value::String(text)) = table.raw_get::<Value>("err") {
        return Reply::Error(text.to_string_lossy());
    }
    if let Ok(Value::String(text)) = table.raw_get::<Value>("ok") {
        let text = text.to_string_lossy();
        return if text == "OK" { Reply::Ok } else { Reply::Status(text) };
    }
    let mut items = Vec::new();
    for i in 1.. {
        match table.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(value) => items.push(from_lua(&value)),
        }
    }
    Reply::Array(items)
}

/// An error the script raised, worded as a server words it: the message, the script's
/// digest, and where it was raised.
fn raised(value: &Value, sha: &str) -> Reply {
    let Value::Table(table) = value else {
        return Reply::Error(format!("ERR the script failed script: {sha}"));
    };
    let message = table.raw_get::<String>("err").unwrap_or_else(|_| "ERR the script failed".into());
    let source = table.raw_get::<Option<String>>("source").ok().flatten();
    let line = table.raw_get::<Option<i64>>("line").ok().flatten();
    Reply::Error(match (source, line) {
        (Some(source), Some(line)) => format!("{message} script: {sha}, on {source}:{line}."),
        _ => format!("{message} script: {sha}"),
    })
}

#[cfg(test)]
mod tests {
    use super::number_text;

    #[test]
    fn numbers_are_printed_as_a_server_prints_them() {
        assert_eq!(number_text(1000.0), "1000");
        assert_eq!(number_text(-3.0), "-3");
        assert_eq!(number_text(1.5), "1.5");
        assert_eq!(number_text(0.1), "0.10000000000000001");
        assert_eq!(number_text(1e20), "1e+20");
        assert_eq!(number_text(1.25e-7), "1.2499999999999999e-07");
    }
}
