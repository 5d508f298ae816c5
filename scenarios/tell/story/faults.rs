//! Faults in words: what fired, a process starting again, a frozen process resuming.

use crate::fault_words::fault_words;
use crate::tell::story::narrator::Narrator;
use fencesim_sim::{Actor, EventKind};

impl Narrator<'_> {
    pub(super) fn fault_event(&mut self, at: u64, kind: &EventKind) {
        let (text, note) = match kind {
            EventKind::FaultFired { fault, .. } => fault_words(fault),
            EventKind::Restarted { worker, incarnation } => (
                format!("{worker} starts again (process {incarnation})"),
                format!("Note over {worker}: process {incarnation} starts"),
            ),
            EventKind::Resumed { worker } => (
                format!("{worker}'s process resumes; {worker} still believes it holds the lease"),
                format!("Note over {worker}: resumes"),
            ),
            // the other components' events are told by their own narrators
            _ => return,
        };
        self.push(at, Actor::Faults, text, vec![note])
    }
}
