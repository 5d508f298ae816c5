//! The probe: told each protocol step a worker reaches. It records the step, counts it,
//! and fires the faults triggered there; a fault that stops the worker's own process
//! takes hold right at that step.

use super::Link;
use crate::history::EventKind;
use fencesim_model::{Probe, Step, StepKind};

/// Whether a step of this kind goes into the history. The per-row rhythm (claimed, paid,
/// confirmed) is already in the store's and the gateway's events; the worker's own marks
/// there would only double the history. They still count, as trigger points.
pub fn recorded(kind: StepKind) -> bool {
    !matches!(kind, StepKind::AfterClaim | StepKind::AfterGatewayCall | StepKind::AfterConfirm)
}

#[derive(Clone)]
pub struct ProbeClient(pub(crate) Link);

impl Probe for ProbeClient {
    async fn reached(&self, step: Step) {
        let Link { world, worker } = &self.0;
        world.calls.stepped(*worker);
        let stop_here = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let kind = step.kind();
            if recorded(kind) {
                state.record(now, EventKind::Step { worker: *worker, step });
            }
            world.fire_step_triggers(&mut state, *worker, kind)
        };
        if stop_here {
            // The node is marked paused or killed; yielding parks (or drops) this task
            // right here, with every other task of the process.
            madsim::task::yield_now().await;
        }
    }
}
