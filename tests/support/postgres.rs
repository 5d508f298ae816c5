//! PostgreSQL for a test: without it on the machine a test says loudly that it skipped, and
//! fails instead when `CI` is set.

#![allow(dead_code)] // each test binary uses part of it

use fencesim::live::postgres::{postgres_program, PostgresServer};

/// Whether this machine has PostgreSQL; says loudly when it does not.
pub fn available(test: &str) -> bool {
    if postgres_program("initdb").is_some() && postgres_program("postgres").is_some() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no PostgreSQL was found");
    eprintln!("SKIPPED {test}: no PostgreSQL on this machine (install Debian's postgresql)");
    false
}

/// A cluster of the test's own, or none (said loudly) on a machine without PostgreSQL.
pub fn cluster(test: &str) -> Option<PostgresServer> {
    available(test).then(|| PostgresServer::start(test).unwrap())
}
