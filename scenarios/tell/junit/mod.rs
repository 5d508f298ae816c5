//! Results as JUnit XML, the format CI systems show test results in: `explore`, `matrix`,
//! `mutants` and `merge` take `--junit FILE`. Each search is a suite whose properties say
//! what was run (the seed range, each failure's trace hash); each case is one (mechanism,
//! gateway, invariant), or one mutant. A failing case's message is the violation, its body
//! the plan that breaks it and the exact command that replays it.
//!
//! The XML is written by quick-junit and must pass the JUnit schema kept in `tests/data/`
//! (a test validates it): cases carry no properties of their own, so per-case figures are
//! suite properties named after their case.

pub mod explore;
pub mod matrix;
pub mod mutants;

use crate::check::INVARIANTS;
use crate::files::write::write_whole;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::{Path, PathBuf};

/// A case that failed: the violation in a line, then the plan and the replay command.
pub struct Failure {
    pub message: String,
    pub body: String,
}

/// One test case: passed (with what it found to say, if anything), or failed.
pub struct Case {
    pub name: String,
    pub classname: String,
    pub failure: Option<Failure>,
    pub output: Option<String>,
}

/// One suite: what was run, as properties, and its cases.
pub struct Suite {
    pub name: String,
    pub properties: Vec<(String, String)>,
    pub cases: Vec<Case>,
}

/// The invariants a case is made for: every one that fails a run (diagnostics never do).
pub fn judged_invariants() -> impl Iterator<Item = &'static str> {
    INVARIANTS.iter().filter(|invariant| invariant.fails_runs()).map(|invariant| invariant.name)
}

/// A file under the project root, as a command run from there names it (no `./`).
pub fn under(root: &Path, relative: &str) -> PathBuf {
    match root == Path::new(".") {
        true => PathBuf::from(relative),
        false => root.join(relative),
    }
}

/// A failing case's body: what broke, the plan (as JSON), and the command that replays it.
pub fn failure_body(what: &str, plan: &str, replay: &str) -> String {
    format!("{what}\n\nfault plan:\n{plan}\n\nreplay with: {replay}\n")
}

fn test_case(case: &Case) -> TestCase {
    let status = match &case.failure {
        None => TestCaseStatus::success(),
        Some(failure) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(failure.message.as_str())
                .set_type("violation")
                .set_description(failure.body.as_str());
            status
        }
    };
    let mut test_case = TestCase::new(case.name.as_str(), status);
    test_case.set_classname(case.classname.as_str());
    if let Some(output) = &case.output {
        test_case.set_system_out(output.as_str());
    }
    test_case
}

/// The report as JUnit XML.
pub fn junit_xml(name: &str, suites: &[Suite]) -> Result<String, String> {
    let mut report = Report::new(name);
    for suite in suites {
        let mut test_suite = TestSuite::new(suite.name.as_str());
        test_suite.add_properties(suite.properties.iter().map(|(key, value)| (key.as_str(), value.as_str())));
        test_suite.add_test_cases(suite.cases.iter().map(test_case));
        report.add_test_suite(test_suite);
    }
    report.to_string().map_err(|e| format!("cannot write the JUnit report: {e}"))
}

/// Writes the report whole at `path`.
pub fn write_junit(path: &Path, name: &str, suites: &[Suite]) -> Result<(), String> {
    let xml = junit_xml(name, suites)?;
    write_whole(path, xml.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
