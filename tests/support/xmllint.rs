//! A real XML Schema validator for a test: Debian's `xmllint` (libxml2-utils) and the
//! JUnit schema in `tests/data/`. Without xmllint a test says loudly that it skipped the
//! validation, and fails instead when `CI` is set.

#![allow(dead_code)] // each test binary uses part of it

use std::path::Path;
use std::process::Command;

/// The JUnit schema the reports are validated against.
pub const JUNIT_SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/junit-4.xsd");

/// Whether this machine has xmllint: `false` (having said so loudly) when it has none and
/// `CI` is not set; with `CI` set a missing xmllint fails the test.
pub fn available(test: &str) -> bool {
    if Command::new("xmllint").arg("--version").output().is_ok_and(|out| out.status.success()) {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no xmllint was found");
    eprintln!("SKIPPED the schema validation of {test}: no xmllint on this machine (install Debian's libxml2-utils)");
    false
}

/// Validates `file` against the JUnit schema, failing the test with xmllint's words when
/// it does not validate; `false` when xmllint is missing (and the test said it skipped).
pub fn validate_junit(test: &str, file: &Path) -> bool {
    if !available(test) {
        return false;
    }
    let out = Command::new("xmllint")
        .args(["--noout", "--schema", JUNIT_SCHEMA])
        .arg(file)
        .output()
        .expect("xmllint runs");
    assert!(
        out.status.success(),
        "{test}: {} does not validate against {JUNIT_SCHEMA}:\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}
