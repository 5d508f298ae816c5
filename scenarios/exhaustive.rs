//! Exhaustive small scope: two workers, three rows, and every placement of up to two
//! faults (a pause shorter or longer than the TTL, a redelivery, a Redis restart that
//! loses everything), each triggered at every protocol step either worker reaches.

use crate::props::SmallWorld;
use crate::runner::run;
use fencesim_model::{Mechanism, StepKind, WorkerId};
use fencesim_sim::{Fault, FaultKind, GatewayMode, Persistence, Trigger};

pub const TTL_MS: u64 = 200;
pub const ROWS: u32 = 3;

/// Where a fault can be triggered: each step a worker reaches, each time it reaches it.
fn trigger_points() -> Vec<Trigger> {
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
        for kind in [
            FaultKind::Pause { worker, duration_ms: TTL_MS / 2 },
            FaultKind::Pause { worker, duration_ms: TTL_MS * 2 },
            FaultKind::Redeliver { worker },
            FaultKind::RedisRestart { instance: 0, persistence: Persistence::None },
        ] {
            faults.push(Fault { kind, trigger });
        }
    }
    faults
}

/// Every plan of at most two faults: none, each single fault, each unordered pair.
pub fn plans() -> Vec<Vec<Fault>> {
    let singles = single_faults();
    let mut plans = vec![Vec::new()];
    plans.extend(singles.iter().map(|f| vec![f.clone()]));
    for (i, a) in singles.iter().enumerate() {
        for b in &singles[i + 1..] {
            plans.push(vec![a.clone(), b.clone()]);
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
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new((0u64, None::<usize>));
    let error = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(plan) = plans.get(i) else { return };
                match run(&world(plan.clone()).scenario(mechanism, GatewayMode::Idempotent), 1) {
                    Ok(o) if !o.passed() => {
                        let mut f = found.lock().unwrap_or_else(|p| p.into_inner());
                        f.0 += 1;
                        f.1 = Some(f.1.map_or(i, |j| j.min(i)));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let (count, first) = found.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok((count, first.map(|i| plans[i].clone())))
}

/// The report's section: plans counted, and how many each mechanism fails.
pub fn section(jobs: usize) -> Result<String, String> {
    use std::fmt::Write as _;
    let plans = plans();
    let mut out = String::from("\n## Exhaustive small scope\n\n");
    let _ = writeln!(
        out,
        "Two workers, {ROWS} rows, TTL {TTL_MS} ms, idempotent gateway. Faults: a pause of {} ms (shorter than the TTL) \
         or {} ms (longer), a redelivery, a Redis restart that loses every key; each triggered at every protocol step \
         either worker reaches ({} trigger points, {} single faults). Every plan of at most two faults: {} plans.\n",
        TTL_MS / 2,
        TTL_MS * 2,
        trigger_points().len(),
        single_faults().len(),
        plans.len()
    );
    out.push_str("| strategy | plans failing | first failing plan |\n|---|---:|---|\n");
    for mechanism in Mechanism::ALL {
        let (count, first) = failing(mechanism, &plans, jobs)?;
        let first = first.map_or("-".to_owned(), |p| {
            p.iter()
                .map(|f| format!("{} at {}", f.kind.name(), describe(&f.trigger)))
                .collect::<Vec<_>>()
                .join(" + ")
        });
        let _ = writeln!(out, "| {mechanism} | {count} of {} | {first} |", plans.len());
    }
    let kept: Vec<Vec<Fault>> = plans
        .iter()
        .filter(|p| !p.iter().any(|f| matches!(f.kind, FaultKind::RedisRestart { .. })))
        .cloned()
        .collect();
    let (count, _) = failing(Mechanism::Fenced, &kept, jobs)?;
    let _ = writeln!(
        out,
        "
The plans without a Redis restart: `fenced` fails {count} of {}; every `fenced` failure above is a counter \
         lost with Redis.",
        kept.len()
    );
    Ok(out)
}

fn describe(t: &Trigger) -> String {
    match t {
        Trigger::Step { worker, step, nth } => format!("{worker}'s {} #{nth}", step.name()),
        Trigger::At { at_ms } => format!("{at_ms} ms"),
    }
}
