//! `redis.call` and `redis.pcall`, as C functions over the Lua stack, as a server's are:
//! the frame of a script ending in `return redis.call(...)` stays on the stack (Lua drops
//! the frame of a function that tail-calls a Lua function) so an error names the script's
//! line, and a command costs a read of its arguments and a push of its reply, without a
//! wrapper's conversions (a script's commands are the simulation's hot path).
//!
//! The discipline that keeps them sound: a Lua call that can jump out (a push may fail for
//! memory, `lua_error` always jumps) is only made when nothing on the Rust frames it would
//! skip has a destructor. The arguments are read and the command run in `command`, whose
//! values are all dropped when it returns; the reply waits in a thread-local slot and is
//! pushed from there through a plain reference.

use super::lua::{number_text, run_command};
use super::Reply;
use mlua::ffi;
use std::cell::RefCell;
use std::ffi::c_int;

thread_local! {
    /// The reply of the command a script sent last, until it is pushed.
    static REPLY: RefCell<Reply> = const { RefCell::new(Reply::Nil) };
}

/// `redis.call`: the reply, or the error table raised.
pub unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its stack; see the module's comment for the jumps.
    unsafe {
        let failed = command(state);
        push_reply(state, &*REPLY.with(RefCell::as_ptr));
        if failed {
            ffi::lua_error(state);
        }
    }
    1
}

/// `redis.pcall`: the reply, an error as a table `{err = ...}`.
pub unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: as `redis_call`, without the jump.
    unsafe {
        command(state);
        push_reply(state, &*REPLY.with(RefCell::as_ptr));
    }
    1
}

/// Reads the arguments off the stack, runs the command and leaves its reply in `REPLY`;
/// whether it failed. Makes no Lua call that can jump.
unsafe fn command(state: *mut ffi::lua_State) -> bool {
    // SAFETY: reads the values of the calling function's frame, as its caller promises.
    let reply = match unsafe { arguments(state) } {
        Ok(argv) => run_command(&argv),
        Err(message) => Reply::Error(message.to_owned()),
    };
    let failed = matches!(reply, Reply::Error(_));
    REPLY.with(|slot| *slot.borrow_mut() = reply);
    failed
}

/// The command's arguments: strings, and numbers as a server prints them.
unsafe fn arguments(state: *mut ffi::lua_State) -> Result<Vec<String>, &'static str> {
    // SAFETY: indexes 1 to the top are the frame's arguments; neither call here allocates
    // on the Lua side (`lua_tolstring` of a string returns it as it is).
    unsafe {
        let count = ffi::lua_gettop(state);
        if count == 0 {
            return Err("ERR Please specify at least one argument for this redis lib call");
        }
        (1..=count)
            .map(|i| match ffi::lua_type(state, i) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let text = ffi::lua_tolstring(state, i, &mut len).cast::<u8>();
                    Ok(String::from_utf8_lossy(std::slice::from_raw_parts(text, len)).into_owned())
                }
                ffi::LUA_TNUMBER => Ok(number_text(ffi::lua_tonumber(state, i))),
                _ => Err("ERR Lua redis lib command arguments must be strings or integers"),
            })
            .collect()
    }
}

/// Pushes a reply as a script receives it: a number, a string, `false` for nil, a table
/// `{ok = ...}` or `{err = ...}`, or an array.
unsafe fn push_reply(state: *mut ffi::lua_State, reply: &Reply) {
    // SAFETY: pushes onto the calling function's stack, growing it first.
    unsafe {
        ffi::lua_checkstack(state, 3);
        match reply {
            Reply::Int(n) => ffi::lua_pushnumber(state, *n as f64),
            Reply::Bulk(text) => push_text(state, text),
            Reply::Nil => ffi::lua_pushboolean(state, 0),
            Reply::Ok => push_field(state, c"ok", "OK"),
            Reply::Status(text) => push_field(state, c"ok", text),
            Reply::Error(text) => push_field(state, c"err", text),
            Reply::Array(items) => {
                ffi::lua_createtable(state, items.len() as c_int, 0);
                for (i, item) in items.iter().enumerate() {
                    push_reply(state, item);
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                }
            }
        }
    }
}

unsafe fn push_text(state: *mut ffi::lua_State, text: &str) {
    // SAFETY: Lua copies the bytes.
    unsafe { ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len()) };
}

unsafe fn push_field(state: *mut ffi::lua_State, name: &std::ffi::CStr, text: &str) {
    // SAFETY: a new table with one field, left on the stack.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        push_text(state, text);
        ffi::lua_setfield(state, -2, name.as_ptr());
    }
}
