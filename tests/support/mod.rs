//! What the tests against real components share.

pub mod redis_server;
