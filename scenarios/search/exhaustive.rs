//! Exhaustive small scope: two workers, three rows, and every placement of up to two
//! faults (a pause shorter or longer than the TTL, a redelivery, a Redis restart that
//! loses everything, a failover to the replica), each triggered at every protocol step
//! either worker reaches.

use crate::runner::run;
use crate::scenario::small::SmallWorld;
use crate::search::pool::Pool;
use fencesim_model::{Mechanism, MerchantId, StepKind, WorkerId};
use fencesim_sim::{Aim, Fault, FaultKind, FaultName, GatewayMode, Trigger};
use serde::{Deserialize, Serialize};
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
            (FaultName::RedisFailover, 0),
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

/// How many of `plans` break some invariant under a mechanism, and where in `plans` the
/// first that does is.
pub fn failing(
    mechanism: Mechanism,
    plans: &[Vec<Fault>],
    jobs: usize,
) -> Result<(u64, Option<usize>), String> {
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
    Ok((count, first))
}

/// What the small scope measured: per mechanism, the plans that fail and the first.
pub struct SmallScope {
    pub trigger_points: usize,
    pub single_faults: usize,
    pub plans: usize,
    pub failing: Vec<(Mechanism, u64, Option<Vec<Fault>>)>,
    /// `fenced` over the plans without a Redis restart or a failover: failing, of how many.
    pub fenced_without_restart: (u64, usize),
}

/// What some of the plans (a shard's block of them, or all) measured: per mechanism, the
/// plans that fail and the index of the first; `fenced` over those without a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeShare {
    pub failing: Vec<(Mechanism, u64, Option<usize>)>,
    pub fenced_without_restart: (u64, usize),
}

/// Runs the plans of `block` (indices into `plans()`) under every mechanism, then `fenced`
/// over those of them without a restart.
pub fn scope_share(block: std::ops::Range<usize>, jobs: usize) -> Result<ScopeShare, String> {
    let plans = &plans()[block.clone()];
    let mut failing_plans = Vec::new();
    for mechanism in Mechanism::ALL {
        let (count, first) = failing(mechanism, plans, jobs)?;
        failing_plans.push((mechanism, count, first.map(|index| block.start + index)));
    }
    let kept: Vec<Vec<Fault>> = plans
        .iter()
        .filter(|plan| {
            !plan.iter().any(|fault| {
                matches!(fault.kind, FaultKind::RedisRestart { .. } | FaultKind::RedisFailover { .. })
            })
        })
        .cloned()
        .collect();
    let (count, _) = failing(Mechanism::Fenced, &kept, jobs)?;
    Ok(ScopeShare { failing: failing_plans, fenced_without_restart: (count, kept.len()) })
}

/// The small scope from the shares of every block, in block order.
pub fn scope_from(shares: &[ScopeShare]) -> Result<SmallScope, String> {
    let plans = plans();
    let mut failing: Vec<(Mechanism, u64, Option<usize>)> =
        Mechanism::ALL.iter().map(|&mechanism| (mechanism, 0, None)).collect();
    let mut without_restart = (0, 0);
    for share in shares {
        if share.failing.iter().map(|row| row.0).ne(Mechanism::ALL) {
            return Err("a small-scope share of other mechanisms than this build's".to_owned());
        }
        for (total, (_, count, first)) in failing.iter_mut().zip(&share.failing) {
            total.1 += count;
            total.2 = total.2.or(*first);
        }
        without_restart.0 += share.fenced_without_restart.0;
        without_restart.1 += share.fenced_without_restart.1;
    }
    let failing = failing
        .into_iter()
        .map(|(mechanism, count, first)| {
            let plan = first.map(|i| plans.get(i).cloned().ok_or(format!("no plan {i} in the small scope")));
            Ok((mechanism, count, plan.transpose()?))
        })
        .collect::<Result<_, String>>()?;
    Ok(SmallScope {
        trigger_points: trigger_points().len(),
        single_faults: single_faults().len(),
        plans: plans.len(),
        failing,
        fenced_without_restart: without_restart,
    })
}

/// Runs every plan under every mechanism, then `fenced` over the plans without a restart.
pub fn small_scope(jobs: usize) -> Result<SmallScope, String> {
    scope_from(&[scope_share(0..plans().len(), jobs)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of plans measured in four pieces is what it is measured whole: counts add
    /// up and the first failing plan is the first piece's that has one.
    #[test]
    fn a_small_scope_in_blocks_is_the_small_scope_whole() {
        let whole = scope_from(&[scope_share(0..240, 2).unwrap()]).unwrap();
        let pieces: Vec<ScopeShare> =
            (0..4).map(|piece| scope_share(piece * 60..(piece + 1) * 60, 2).unwrap()).collect();
        let pieced = scope_from(&pieces).unwrap();
        assert_eq!(pieced.failing, whole.failing);
        assert_eq!(pieced.fenced_without_restart, whole.fenced_without_restart);
        assert!(whole.failing.iter().any(|(_, count, _)| *count > 0), "some plans fail: {:?}", whole.failing);
    }
}
