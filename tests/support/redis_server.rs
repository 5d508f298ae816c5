//! A real redis-server for a test (the live run's own, see `fencesim::live::server`).
//! Without a redis-server on the machine a test says loudly that it skipped, and fails
//! instead when `CI` is set.

#![allow(dead_code)] // each test binary uses part of it

use fencesim::live::server::redis_server_binary;
pub use fencesim::live::server::RedisServer;

/// Starts a server with no persistence, or `None` (having said why) when the machine has
/// no redis-server and `CI` is not set.
pub fn start(test: &str) -> Option<RedisServer> {
    start_with(test, &["--appendonly", "no"])
}

/// Starts a server with these arguments (`--appendonly yes --appendfsync always`, say).
pub fn start_with(test: &str, args: &[&str]) -> Option<RedisServer> {
    if !available(test) {
        return None;
    }
    Some(RedisServer::start(test, args).unwrap_or_else(|e| panic!("{test}: {e}")))
}

/// Whether a test that needs a redis-server can run: `false` (having said so loudly) when
/// the machine has none and `CI` is not set; with `CI` set a missing server fails the test.
pub fn available(test: &str) -> bool {
    if redis_server_binary().is_some() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no redis-server was found");
    eprintln!("SKIPPED {test}: no redis-server on this machine (install Debian's redis-server)");
    false
}
