//! The matrix's JUnit report: one suite per mechanism and gateway mode, one case per
//! invariant. The matrix measures what each mechanism guarantees, so an unsafe mechanism's
//! broken invariants are failed cases by design: the report shows where each one breaks.
//! A cell's first failure is told from its shrunk replay file; its other broken invariants
//! from the first seed that broke each.

use super::{failure_body, judged_invariants, under, Case, Failure, Suite};
use crate::runner::{run, Outcome};
use crate::scenario::{self, FaultMask};
use crate::search::matrix::{shrunk_file, Cell, ShrunkFailure};
use std::path::Path;

/// The failure told from a run: its breach of `invariant`, its plan, the command.
fn told(invariant: &str, outcome: &Outcome, what: &str, replay: &str) -> Failure {
    let plan = serde_json::to_string_pretty(&outcome.scenario.world.faults).expect("a plan serializes");
    let Some(breach) = outcome.check(invariant).breaches.first() else {
        let body =
            format!("{what}\n\nthe run no longer breaks it with this build\n\nreplay with: {replay}\n");
        return Failure { message: format!("{invariant}: {what}"), body };
    };
    let at = outcome.scenario.base.plus(breach.at_ms);
    Failure {
        message: format!("{invariant} broken at {at}: {}", breach.detail),
        body: failure_body(&format!("{what}, at {at}: {}", breach.detail), &plan, replay),
    }
}

/// A broken invariant's failure: from the cell's shrunk file when it was shrunk for this
/// invariant, else from the first seed that broke it.
fn failure(cell: &Cell, invariant: &str, shrunk: &[ShrunkFailure], root: &Path) -> Result<Failure, String> {
    let (count, seed, _) = cell.broken[invariant];
    let broken = format!("{invariant}: broken in {count} of {} seeds, first by seed {seed}", cell.seeds);
    let mine = shrunk.iter().find(|s| s.mechanism == cell.mechanism && s.gateway == cell.gateway);
    if let Some(shrunk) = mine.filter(|s| s.invariant == invariant) {
        let path = under(root, &shrunk_file(cell.mechanism, cell.gateway));
        let what = format!("{broken}; shrunk from seed {} into {}", shrunk.seed, path.display());
        return Ok(told(invariant, &shrunk.outcome, &what, &format!("fencesim replay {}", path.display())));
    }
    let found = scenario::build("random", seed, cell.mechanism, cell.gateway, FaultMask::ALL)?;
    let outcome = run(&found, seed)?;
    Ok(told(invariant, &outcome, &format!("{broken}, told by that seed"), &outcome.replay_command()))
}

/// The suites of the matrix's cells.
pub fn matrix_suites(cells: &[Cell], shrunk: &[ShrunkFailure], root: &Path) -> Result<Vec<Suite>, String> {
    let mut suites = Vec::new();
    for cell in cells {
        let classname = format!("{}.{}", cell.mechanism, cell.gateway);
        let mut properties = vec![
            ("scenario".to_owned(), "random".to_owned()),
            ("mechanism".to_owned(), cell.mechanism.to_string()),
            ("gateway".to_owned(), cell.gateway.to_string()),
            ("seed-range".to_owned(), format!("1..={}", cell.seeds)),
        ];
        let mut cases = Vec::new();
        for invariant in judged_invariants() {
            let failure = match cell.broken.get(invariant) {
                None => None,
                Some((_, _, hash)) => {
                    properties.push((format!("trace-hash.{invariant}"), format!("{hash:016x}")));
                    Some(failure(cell, invariant, shrunk, root)?)
                }
            };
            cases.push(Case {
                name: invariant.to_owned(),
                classname: classname.clone(),
                failure,
                output: None,
            });
        }
        suites.push(Suite { name: format!("matrix {classname}"), properties, cases });
    }
    Ok(suites)
}
