//! A mermaid sequence diagram of a story, generated from the recorded history.

use crate::runner::Outcome;
use crate::tell::story::Line;
use fencesim_model::WorkerId;
use std::fmt::Write as _;

/// The diagram: the participants, then each line's arrows and notes in the story's order.
pub fn sequence_diagram(outcome: &Outcome, lines: &[Line]) -> String {
    let mut out = String::from("sequenceDiagram\n");
    let workers = outcome.scenario.world.workers;
    let _ = writeln!(out, "  participant Q as Queue");
    for number in 0..workers {
        let worker = WorkerId(number);
        let _ = writeln!(out, "  participant {worker} as Worker {worker}");
        if worker.0 == 0 {
            let _ = writeln!(out, "  participant R as Redis");
        }
    }
    let _ = writeln!(out, "  participant D as Database");
    if outcome.scenario.world.settlement.is_some() {
        let _ = writeln!(out, "  participant L as Settlement ledger");
    }
    let _ = writeln!(out, "  participant G as Gateway");
    for line in lines {
        for step in &line.diagram {
            let _ = writeln!(out, "  {step}");
        }
    }
    out
}
