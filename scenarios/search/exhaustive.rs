//! Exhaustive small scope: two workers, three rows, and every placement of up to two
//! faults (a pause shorter or longer than the TTL, a redelivery, a Redis restart that
//! loses everything), each triggered at every protocol step either worker reaches.

use crate::runner::run;
use crate::scenario::small::SmallWorld;
use crate::search::pool::Pool;
use fencesim_model::{Mechanism, MerchantId, StepKind, WorkerId};
use fencesim_sim::{Aim, Fault, FaultKind, FaultName, GatewayMode, Trigger};
use std::sync::atomic::AtomicBool;

pub const TTL_MS: u64 = 200;
pub const ROWS: u32 = 3;

/// Where a fault can be triggered: each step a worker reaches, each time it reaches it.
pub fn trigger_points() -> Vec<Trigger> {
    let mut points = Vec::new();
    for worker in [WorkerId(0), WorkerId(1)] {
        for step in
            [StepKind::JobReceived, StepKind::LeaseAcquired, StepKind::TokenTaken, StepKind::RowsSelected]
        {
            points.push(Trigger::Step { worker, step, nth: 1 });
        }
        // a lease check happens right after the token, and before each write under
        // check-before-write: the gap between a check and its write is a place too
        for step in
            [StepKind::LeaseChecked, StepKind::AfterClaim, StepKind::AfterGatewayCall, StepKind::AfterConfirm]
        {
            for nth in 1..=ROWS {
                points.push(Trigger::Step { worker, step, nth });
            }
        }
    }
    points
}

/// Every single fault: each kind at each trigger point, aimed at the worker that reaches it.
pub fn single_faults() -> Vec<Fault> {
    let mut faults = Vec::new();
    for trigger in trigger_points() {
        let Trigger::Step { worker, .. } = trigger else { continue };
        let aim = Aim { worker, merchant: MerchantId(7), instance: 0 };
        // (kind, size): a pause shorter and one longer than the TTL, a redelivery, and a
        // restart with the first persistence mode (none: every key is lost)
        for (kind, size) in [
            (FaultName::Pause, TTL_MS / 2),
            (FaultName::Pause, TTL_MS * 2),
            (FaultName::Redeliver, 0),
            (FaultName::RedisRestart, 0),
        ] {
            faults.push(Fault { kind: kind.make(aim, size), trigger });
        }
    }
    faults
}

/// Every plan of at most two faults: none, each single fault, each unordered pair.
pub fn plans() -> Vec<Vec<Fault>> {
    let singles = single_faults();
    let mut plans = vec![Vec::new()];
    plans.extend(singles.iter().map(|fault| vec![fault.clone()]));
    for (i, first) in singles.iter().enumerate() {
        for second in &singles[i + 1..] {
            plans.push(vec![first.clone(), second.clone()]);
        }
    }
    plans
}

pub fn world(faults: Vec<Fault>) -> SmallWorld {
    SmallWorld { workers: 2, rows: ROWS, ttl_ms: TTL_MS, latency_ms: 50, faults }
}

/// How many of `plans` break some invariant under a mechanism, and the first that does.
pub fn failing(
    mechanism: Mechanism,
    plans: &[Vec<Fault>],
    jobs: usize,
) -> Result<(u64, Option<Vec<Fault>>), String> {
    let never = AtomicBool::new(false);
    let mut count = 0u64;
    let mut first = None;
    Pool { jobs, interrupted: &never }.run(
        0..plans.len() as u64,
        |_| false,
        |index| {
            let plan = &plans[index as usize];
            Ok(run(&world(plan.clone()).scenario(mechanism, GatewayMode::Idempotent), 1)?.passed())
        },
        |_, _| {},
        |index, passed| {
            if !passed {
                count += 1;
                first.get_or_insert(index as usize);
            }
        },
    )?;
    Ok((count, first.map(|index| plans[index].clone())))
}

/// What the small scope measured: per mechanism, the plans that fail and the first.
pub struct SmallScope {
    pub trigger_points: usize,
    pub single_faults: usize,
    pub plans: usize,
    pub failing: Vec<(Mechanism, u64, Option<Vec<Fault>>)>,
    /// `fenced` over the plans without a Redis restart: failing, of how many.
    pub fenced_without_restart: (u64, usize),
}

/// Runs every plan under every mechanism, then `fenced` over the plans without a restart.
pub fn small_scope(jobs: usize) -> Result<SmallScope, String> {
    let plans = plans();
    let mut failing_plans = Vec::new();
    for mechanism in Mechanism::ALL {
        let (count, first) = failing(mechanism, &plans, jobs)?;
        failing_plans.push((mechanism, count, first));
    }
    let kept: Vec<Vec<Fault>> = plans
        .iter()
        .filter(|plan| !plan.iter().any(|fault| matches!(fault.kind, FaultKind::RedisRestart { .. })))
        .cloned()
        .collect();
    let (count, _) = failing(Mechanism::Fenced, &kept, jobs)?;
    Ok(SmallScope {
        trigger_points: trigger_points().len(),
        single_faults: single_faults().len(),
        plans: plans.len(),
        failing: failing_plans,
        fenced_without_restart: (count, kept.len()),
    })
}
