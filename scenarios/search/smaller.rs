//! Smaller worlds for the shrinker: a world without one worker (the later ones renamed down,
//! with the faults that name them), without one merchant, with fewer rows at either end
//! of a merchant's refunds, or with a merchant's batch condensed into a few slower rows.
//! Each is a candidate; the shrinker keeps it only if the run still fails the same way.

use crate::scenario::Scenario;
use fencesim_model::{MerchantId, RefundId, WorkerId};
use fencesim_sim::{Arrival, Fault, Hop, Trigger, WorldConfig};
use std::collections::BTreeSet;

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

/// The world without `gone`'s jobs, rows, arrivals and counter, if no fault names it and
/// another merchant is left.
pub fn without_merchant(scenario: &Scenario, gone: MerchantId) -> Option<Scenario> {
    let world = &scenario.world;
    let others = world.jobs.iter().any(|job| job.merchant != gone);
    if !others || world.faults.faults.iter().any(|fault| fault.kind.merchant() == Some(gone)) {
        return None;
    }
    let mut trial = scenario.clone();
    trial.world.drop_merchant(gone);
    trial.world.counters.retain(|(merchant, _)| *merchant != gone);
    Some(trial)
}

/// The merchant's rows without `count` of them, from its last rows (those that arrive
/// latest among them) or its first (none if it would be left with none).
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
    trial.world.retain_rows(|row| !dropped.contains(&row.id));
    Some(trial)
}

/// The merchant's rows in the store when the run starts, in order: its first batch.
pub fn first_batch(world: &WorldConfig, merchant: MerchantId) -> Vec<RefundId> {
    let arriving = world.arriving_rows();
    let own = world.rows.iter().filter(|row| row.merchant == merchant && !arriving.contains(&row.id));
    own.map(|row| row.id).collect()
}

/// The merchant's batch (the rows in the store at the start; those that arrive later are
/// left as they are) condensed into its first `keep` rows, slower at the gateway so that
/// they take as long there as all its rows did, times `percent` / 100 (a row's own SQL and
/// lookup time is not scaled, so more than 100 makes up for it): the batch lasts about as long;
/// a trigger counted per row (a per-row step, a SQL statement, a gateway call) comes as
/// much sooner. Many races need a batch that outlasts a timeout, not many rows: this keeps
/// the timing that dropping rows one at a time loses.
pub fn condensed(scenario: &Scenario, merchant: MerchantId, keep: usize, percent: u64) -> Option<Scenario> {
    let world = &scenario.world;
    let ids = first_batch(world, merchant);
    if keep == 0 || ids.len() <= keep {
        return None;
    }
    let (all, keep64) = (ids.len() as u64, keep as u64);
    let total_ms: u64 = ids.iter().map(|id| world.refund_latency.of(*id)).sum();
    let kept_ms: u64 = ids[..keep].iter().map(|id| world.refund_latency.of(*id)).sum::<u64>().max(1);
    let mut trial = scenario.clone();
    let latency = &mut trial.world.refund_latency;
    let highest = ids[..keep].iter().map(|id| id.0 as usize).max().unwrap_or(0);
    if latency.per_refund_ms.len() <= highest {
        latency.per_refund_ms.resize(highest + 1, 0);
    }
    for id in &ids[..keep] {
        let ms = world.refund_latency.of(*id) * total_ms * percent / (100 * kept_ms);
        latency.per_refund_ms[id.0 as usize] = ms.max(1);
    }
    trial.world.retain_rows(|row| {
        row.merchant != merchant || !ids.contains(&row.id) || ids[..keep].contains(&row.id)
    });
    let sooner = |nth: u32| (u64::from(nth) * keep64).div_ceil(all).max(1) as u32;
    for fault in &mut trial.world.faults.faults {
        fault.trigger = match fault.trigger {
            Trigger::Step { worker, step, nth } if step.per_row() => {
                Trigger::Step { worker, step, nth: sooner(nth) }
            }
            Trigger::Call { worker, hop, nth } if hop != Hop::Redis => {
                Trigger::Call { worker, hop, nth: sooner(nth) }
            }
            trigger @ (Trigger::At { .. }
            | Trigger::Step { .. }
            | Trigger::Call { .. }
            | Trigger::Within { .. }) => trigger,
        };
    }
    Some(trial)
}

/// How long a row of the world's first batches takes, roughly: its gateway call, its claim
/// and its confirm, and the lease checks before them where the mechanism asks Redis.
fn row_ms(world: &WorldConfig, row: RefundId) -> u64 {
    let spec = world.mechanism.spec();
    let checks = if spec.check_before_write && world.redis_instances() == 1 { 2 } else { 0 };
    world.refund_latency.of(row) + 2 * world.db_latency_ms + checks * world.redis_latency_ms
}

/// The merchant's batch without its first `count` rows (of those in the store at the
/// start), and the queue's visibility timeout and every timed fault brought as much
/// sooner as those rows took, give or take `slack_ms`; a trigger counted per row comes as
/// many rows sooner. What happened after them happens as it did, with fewer rows before
/// it: a race that needs a batch to be at one exact row when a timeout runs out keeps
/// that row, where condensing the batch would move it.
pub fn started_later(
    scenario: &Scenario,
    merchant: MerchantId,
    count: usize,
    slack_ms: i64,
) -> Option<Scenario> {
    let world = &scenario.world;
    let ids = first_batch(world, merchant);
    if count == 0 || ids.len() <= count {
        return None;
    }
    let taken: u64 = ids[..count].iter().map(|id| row_ms(world, *id)).sum();
    let shift = taken.saturating_add_signed(slack_ms);
    if shift >= world.visibility_timeout_ms {
        return None;
    }
    let mut trial = scenario.clone();
    trial.world.retain_rows(|row| !ids[..count].contains(&row.id));
    trial.world.visibility_timeout_ms -= shift;
    let rows = count as u32;
    for fault in &mut trial.world.faults.faults {
        fault.trigger = match fault.trigger {
            Trigger::At { at_ms } => Trigger::At { at_ms: at_ms.saturating_sub(shift) },
            Trigger::Step { worker, step, nth } if step.per_row() => {
                Trigger::Step { worker, step, nth: nth.saturating_sub(rows).max(1) }
            }
            Trigger::Call { worker, hop: Hop::Database, nth } => {
                Trigger::Call { worker, hop: Hop::Database, nth: nth.saturating_sub(2 * rows).max(1) }
            }
            Trigger::Call { worker, hop: Hop::Gateway, nth } => {
                Trigger::Call { worker, hop: Hop::Gateway, nth: nth.saturating_sub(rows).max(1) }
            }
            trigger @ (Trigger::Step { .. } | Trigger::Call { .. } | Trigger::Within { .. }) => trigger,
        };
    }
    Some(trial)
}

/// How a world cut down to fewer workers renames the workers its plan names.
#[derive(Clone, Copy, Debug)]
pub enum Rename {
    /// A, B, ... in the order the plan names them: the first job goes to A, so the worker a
    /// plan is about keeps its part.
    InOrder,
    /// Each keeps its name modulo the number of workers left: the order in which the queue
    /// hands out jobs and redeliveries is kept as far as it can be.
    Modulo,
}

impl Rename {
    /// `worker`'s name among `workers` left, `named` being the workers the plan names, in
    /// the order it names them.
    fn apply(self, worker: WorkerId, named: &[WorkerId], workers: u32) -> WorkerId {
        match self {
            Rename::InOrder => {
                WorkerId(named.iter().position(|&name| name == worker).unwrap_or(0) as u32 % workers)
            }
            Rename::Modulo => WorkerId(worker.0 % workers),
        }
    }
}

/// The workers the plan names, in the order it first names them.
fn named_workers(scenario: &Scenario) -> Vec<WorkerId> {
    let mut named: Vec<WorkerId> = Vec::new();
    for fault in &scenario.world.faults.faults {
        for worker in fault.kind.worker().into_iter().chain(fault.trigger.worker()) {
            if !named.contains(&worker) {
                named.push(worker);
            }
        }
    }
    named
}

/// Whether both ways rename every worker the plan names alike when `workers` are left:
/// then a world cut down either way is the same world.
pub fn renames_agree(scenario: &Scenario, workers: u32) -> bool {
    let workers = workers.min(scenario.world.workers).max(1);
    let named = named_workers(scenario);
    named.iter().all(|&worker| {
        Rename::InOrder.apply(worker, &named, workers) == Rename::Modulo.apply(worker, &named, workers)
    })
}

/// The world cut down at once to `merchant`'s jobs alone, `workers` workers and its batch
/// condensed into `rows` rows (its arrivals kept as they are) (as `condensed` does, at `percent`): the workers the plan
/// names are renamed as `rename` says, and a fault aimed at another merchant aims at this
/// one. Greedy steps of one worker or one row at a time stop in a
/// local minimum when a race needs the world's pieces to move together; this jumps past it.
pub fn cut_down(
    scenario: &Scenario,
    merchant: MerchantId,
    workers: u32,
    rows: usize,
    percent: u64,
    rename: Rename,
) -> Option<Scenario> {
    let world = &scenario.world;
    let own_rows = first_batch(world, merchant).len();
    let alone = world.all_jobs().all(|job| job.merchant == merchant);
    if workers == 0 || (world.workers <= workers && alone && own_rows <= rows) {
        return None;
    }
    let mut trial = scenario.clone();
    for other in world.all_jobs().map(|job| job.merchant).filter(|other| *other != merchant) {
        trial.world.drop_merchant(other);
    }
    trial.world.counters.retain(|(owner, _)| *owner == merchant);
    if own_rows > rows {
        trial = condensed(&trial, merchant, rows, percent)?;
    }
    let workers = workers.min(world.workers);
    trial.world.workers = workers;
    let named = named_workers(scenario);
    let renamed = |worker: WorkerId| rename.apply(worker, &named, workers);
    for fault in &mut trial.world.faults.faults {
        let mut aim = fault.kind.aim();
        aim.worker = renamed(aim.worker);
        aim.merchant = merchant;
        fault.kind = fault.kind.kind().make(aim, fault.kind.size());
        if let Some(worker) = fault.trigger.worker() {
            fault.trigger = fault.trigger.for_worker(renamed(worker));
        }
    }
    Some(trial)
}

/// The world without the arrivals `kept` leaves out, and without their rows.
pub fn with_arrivals(scenario: &Scenario, kept: &[Arrival]) -> Scenario {
    let mut trial = scenario.clone();
    let gone: BTreeSet<RefundId> = scenario
        .world
        .arrivals
        .iter()
        .filter(|arrival| !kept.contains(arrival))
        .flat_map(|arrival| arrival.rows.iter().copied())
        .collect();
    trial.world.arrivals = kept.to_vec();
    trial.world.retain_rows(|row| !gone.contains(&row.id));
    trial
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{random_scenario, FaultMask};
    use fencesim_model::{Mechanism, StepKind};
    use fencesim_sim::{FaultKind, FaultPlan, GatewayMode};

    /// A random world of several merchants, with a plan that names a late worker, a
    /// merchant and per-row and per-batch triggers.
    fn world() -> (Scenario, MerchantId) {
        let seed = (0..200)
            .find(|&seed| {
                let world =
                    random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::NONE).world;
                world.jobs.len() >= 2
                    && world.workers >= 4
                    && world.rows.len() >= 40
                    && world.arrivals.is_empty()
            })
            .expect("a seed with a big world");
        let mut scenario = random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::NONE);
        let merchant = scenario.world.jobs[0].merchant;
        let other = scenario.world.jobs[1].merchant;
        let last = WorkerId(scenario.world.workers - 1);
        let (claim, redis, db) = (StepKind::AfterClaim, Hop::Redis, Hop::Database);
        scenario.world.faults = FaultPlan {
            faults: vec![
                Fault {
                    kind: FaultKind::Pause { worker: last, duration_ms: 50 },
                    trigger: Trigger::Step { worker: last, step: claim, nth: 20 },
                },
                Fault {
                    kind: FaultKind::ExpireLease { instance: 0, merchant: other },
                    trigger: Trigger::Call { worker: WorkerId(0), hop: redis, nth: 3 },
                },
                Fault {
                    kind: FaultKind::Crash { worker: WorkerId(1), restart_after_ms: 10 },
                    trigger: Trigger::Call { worker: WorkerId(1), hop: db, nth: 12 },
                },
            ],
        };
        (scenario, merchant)
    }

    fn gateway_ms(scenario: &Scenario, merchant: MerchantId) -> u64 {
        let world = &scenario.world;
        world
            .rows
            .iter()
            .filter(|row| row.merchant == merchant)
            .map(|row| world.refund_latency.of(row.id))
            .sum()
    }

    #[test]
    fn a_condensed_batch_keeps_its_length_and_brings_per_row_triggers_sooner() {
        let (scenario, merchant) = world();
        let own = scenario.world.rows.iter().filter(|row| row.merchant == merchant).count();
        let trial = condensed(&scenario, merchant, 2, 100).expect("fewer rows");
        assert_eq!(trial.world.rows.iter().filter(|row| row.merchant == merchant).count(), 2);
        let others = |s: &Scenario| s.world.rows.iter().filter(|row| row.merchant != merchant).count();
        assert_eq!(others(&trial), others(&scenario), "other merchants keep their rows");
        let (before, after) = (gateway_ms(&scenario, merchant), gateway_ms(&trial, merchant));
        assert!(after * 10 >= before * 8 && after * 10 <= before * 12, "{before} ms -> {after} ms");
        let slower = gateway_ms(&condensed(&scenario, merchant, 2, 200).unwrap(), merchant);
        assert!(slower >= after * 19 / 10, "{after} -> {slower}");
        let nth = |s: &Scenario, i: usize| match s.world.faults.faults[i].trigger {
            Trigger::Step { nth, .. } | Trigger::Call { nth, .. } | Trigger::Within { nth, .. } => nth,
            Trigger::At { .. } => 0,
        };
        assert_eq!(nth(&trial, 0), (20 * 2u32).div_ceil(own as u32).max(1), "a per-row step comes sooner");
        assert_eq!(nth(&trial, 1), 3, "a Redis command is counted per batch, not per row");
        assert!(nth(&trial, 2) < 12, "a SQL statement comes sooner");
        assert!(condensed(&scenario, merchant, own, 100).is_none(), "no fewer rows, no candidate");
    }

    #[test]
    fn a_world_cut_down_keeps_one_merchant_and_aims_every_fault_at_what_is_left() {
        let (scenario, merchant) = world();
        let trial = cut_down(&scenario, merchant, 2, 3, 100, Rename::InOrder).expect("a smaller world");
        let world = &trial.world;
        assert_eq!((world.workers, world.jobs.len(), world.rows.len()), (2, 1, 3));
        assert!(world.rows.iter().all(|row| row.merchant == merchant));
        assert_eq!(world.counters.len(), 1);
        for fault in &world.faults.faults {
            assert!(fault.kind.worker().is_none_or(|worker| worker.0 < 2), "{fault:?}");
            assert!(fault.trigger.worker().is_none_or(|worker| worker.0 < 2), "{fault:?}");
            assert!(fault.kind.merchant().is_none_or(|aimed| aimed == merchant), "{fault:?}");
        }
        assert!(world.validate().is_ok(), "{:?}", world.validate());
        assert!(cut_down(&trial, merchant, 2, 3, 100, Rename::Modulo).is_none(), "already that small");
    }

    /// A random world with arrivals for at least two merchants.
    fn world_with_arrivals() -> Scenario {
        (0..200)
            .map(|seed| random_scenario(seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::NONE))
            .find(|scenario| {
                let world = &scenario.world;
                world.jobs.len() >= 2
                    && world.arrivals.len() >= 3
                    && world.arrivals.iter().any(|a| a.rows.len() >= 2)
            })
            .expect("a seed with arrivals")
    }

    #[test]
    fn smaller_worlds_keep_arrivals_valid_and_leave_them_out_with_their_rows() {
        let scenario = world_with_arrivals();
        let world = &scenario.world;
        let merchant = world.jobs[0].merchant;
        let arriving = world.arriving_rows();
        let condensed = condensed(&scenario, merchant, 1, 100).expect("fewer rows");
        assert_eq!(condensed.world.arrivals, world.arrivals, "a condensed batch leaves arrivals alone");
        assert!(condensed.world.validate().is_ok(), "{:?}", condensed.world.validate());
        let cut = cut_down(&scenario, merchant, 2, 1, 100, Rename::InOrder).expect("a smaller world");
        assert!(cut.world.all_jobs().all(|job| job.merchant == merchant));
        let own = world.arrivals.iter().filter(|arrival| arrival.job.merchant == merchant).count();
        assert_eq!(cut.world.arrivals.len(), own, "the merchant keeps its arrivals");
        assert!(cut.world.validate().is_ok(), "{:?}", cut.world.validate());
        let last = world.rows.iter().rev().find(|row| row.merchant == merchant).expect("a row").id;
        assert!(arriving.contains(&last), "the merchant's last row arrives");
        let fewer = fewer_rows(&scenario, merchant, 1, true).expect("fewer rows");
        assert!(!fewer.world.arriving_rows().contains(&last));
        assert!(fewer.world.validate().is_ok(), "{:?}", fewer.world.validate());
        let first = world.arrivals[..1].to_vec();
        let kept = with_arrivals(&scenario, &first);
        assert_eq!(kept.world.arrivals, first);
        let gone = arriving.len() - first[0].rows.len();
        assert_eq!(kept.world.rows.len(), world.rows.len() - gone, "left-out arrivals take their rows");
        assert!(kept.world.validate().is_ok(), "{:?}", kept.world.validate());
        let gone_merchant = without_merchant(&scenario, merchant).expect("another merchant is left");
        assert!(gone_merchant.world.arrivals.iter().all(|arrival| arrival.job.merchant != merchant));
        assert!(gone_merchant.world.validate().is_ok(), "{:?}", gone_merchant.world.validate());
    }

    #[test]
    fn a_batch_started_later_brings_the_timeout_and_its_triggers_as_much_sooner() {
        let (scenario, merchant) = world();
        let world = &scenario.world;
        let ids: Vec<RefundId> =
            world.rows.iter().filter(|row| row.merchant == merchant).map(|row| row.id).collect();
        let trial = started_later(&scenario, merchant, 3, 0).expect("a later start");
        let own: Vec<RefundId> =
            trial.world.rows.iter().filter(|row| row.merchant == merchant).map(|row| row.id).collect();
        assert_eq!(own, ids[3..].to_vec(), "its first three rows are gone, the rest kept");
        let taken: u64 =
            ids[..3].iter().map(|id| world.refund_latency.of(*id) + 2 * world.db_latency_ms).sum();
        assert_eq!(trial.world.visibility_timeout_ms, world.visibility_timeout_ms - taken);
        let nth = |s: &Scenario, i: usize| match s.world.faults.faults[i].trigger {
            Trigger::Step { nth, .. } | Trigger::Call { nth, .. } | Trigger::Within { nth, .. } => nth,
            Trigger::At { .. } => 0,
        };
        assert_eq!(nth(&trial, 0), 17, "a per-row step comes three rows sooner");
        assert_eq!(nth(&trial, 1), 3, "a Redis command is counted per batch");
        assert_eq!(nth(&trial, 2), 6, "a SQL statement comes two statements a row sooner");
        let slower = started_later(&scenario, merchant, 3, 5).expect("with slack");
        assert_eq!(slower.world.visibility_timeout_ms + 5, trial.world.visibility_timeout_ms);
        assert!(trial.world.validate().is_ok(), "{:?}", trial.world.validate());
        assert!(started_later(&scenario, merchant, ids.len(), 0).is_none(), "a row must be left");
    }
}
