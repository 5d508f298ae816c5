//! Mechanisms from files: a team's own lock described in TOML (its token source, its lease,
//! its SQL, its Lua scripts), read and checked here (`check`), with the schema in `schema`
//! and the built-in mechanisms written out as files in `builtin`.

pub mod builtin;
pub mod check;
pub mod parameters;
pub mod schema;

pub use check::{check, Problem};
pub use schema::MechanismFile;
