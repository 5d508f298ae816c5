//! Smaller worlds for the shrinker: a world without one worker (the later ones renamed down,
//! with the faults that name them), without one merchant, or with fewer rows at either end
//! of a merchant's refunds. Each is a candidate; the shrinker keeps it only if the run
//! still fails the same way.

use crate::scenario::Scenario;
use fencesim_model::{MerchantId, RefundId, WorkerId};
use fencesim_sim::Fault;

/// The world without `gone`, if no fault names it: each later worker takes the name of the
/// one before it, in the plan too.
pub fn without_worker(scenario: &Scenario, gone: WorkerId) -> Option<Scenario> {
    let names = |fault: &Fault| fault.kind.worker() == Some(gone) || fault.trigger.worker() == Some(gone);
    if scenario.world.workers <= 1 || scenario.world.faults.faults.iter().any(names) {
        return None;
    }
    let renamed = |worker: WorkerId| if worker > gone { WorkerId(worker.0 - 1) } else { worker };
    let mut trial = scenario.clone();
    trial.world.workers -= 1;
    for fault in &mut trial.world.faults.faults {
        if let Some(worker) = fault.kind.worker() {
            fault.kind = fault.kind.for_worker(renamed(worker));
        }
        if let Some(worker) = fault.trigger.worker() {
            fault.trigger = fault.trigger.for_worker(renamed(worker));
        }
    }
    Some(trial)
}

/// The world without `gone`'s job, rows and counter, if no fault names it and another
/// merchant is left.
pub fn without_merchant(scenario: &Scenario, gone: MerchantId) -> Option<Scenario> {
    let world = &scenario.world;
    let others = world.jobs.iter().any(|job| job.merchant != gone);
    if !others || world.faults.faults.iter().any(|fault| fault.kind.merchant() == Some(gone)) {
        return None;
    }
    let mut trial = scenario.clone();
    trial.world.jobs.retain(|job| job.merchant != gone);
    trial.world.rows.retain(|row| row.merchant != gone);
    trial.world.counters.retain(|(merchant, _)| *merchant != gone);
    Some(trial)
}

/// The merchant's rows without `count` of them, from its last rows or its first (none if
/// it would be left with none).
pub fn fewer_rows(
    scenario: &Scenario,
    merchant: MerchantId,
    count: usize,
    from_end: bool,
) -> Option<Scenario> {
    let ids: Vec<RefundId> =
        scenario.world.rows.iter().filter(|row| row.merchant == merchant).map(|row| row.id).collect();
    if count == 0 || ids.len() <= count {
        return None;
    }
    let dropped = if from_end { &ids[ids.len() - count..] } else { &ids[..count] };
    let mut trial = scenario.clone();
    trial.world.rows.retain(|row| !dropped.contains(&row.id));
    Some(trial)
}
