//! What the lease's Lua costs a run: every script a run's workers sent (each release and
//! renewal, as its events tell), run again on a bare simulated Redis with nothing around
//! it, each with its key set so that it takes the branch it took in the run (the holder's
//! value where it deleted or extended, another value where it did not). Against the run's
//! own time it is the share the embedded Lua takes; against the SQL floor, the points of
//! the floor ratio it adds.

use fencesim_model::mechanism::Scripts;
use fencesim_sim::redis::{Command, RedisCore, Reply, Value};
use fencesim_sim::{EventKind, RunRecord};

/// One script call of a run: the release or the renewal, its key, the holder's value, and
/// whether it did its work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptOp {
    renewal: bool,
    key: String,
    value: String,
    did: bool,
}

/// The script calls a run made, in order.
pub fn script_calls(record: &RunRecord) -> Vec<ScriptOp> {
    let op = |renewal, key: &String, value: String, did| ScriptOp { renewal, key: key.clone(), value, did };
    let mut holder_of = std::collections::BTreeMap::new();
    let mut ops = Vec::new();
    for event in &record.events {
        match &event.kind {
            EventKind::LeaseGranted { worker, key, value, .. } => {
                holder_of.insert((*worker, key.clone()), value.clone());
            }
            EventKind::LeaseReleased { key, value, deleted, .. } => {
                ops.push(op(false, key, value.clone(), *deleted));
            }
            EventKind::LeaseExtended { worker, key, extended, .. } => {
                let value = holder_of.get(&(*worker, key.clone())).cloned().unwrap_or_default();
                ops.push(op(true, key, value, *extended));
            }
            _ => {}
        }
    }
    ops
}

/// Runs `ops` with `scripts` (renewing for `ttl_ms`) on a fresh instance; an error when a
/// script gave another answer than it gave in the run.
pub fn run_scripts(scripts: Scripts, ttl_ms: u64, ops: &[ScriptOp]) -> Result<(), String> {
    let ttl = ttl_ms.to_string();
    let mut core = RedisCore::new();
    let mut expired = Vec::new();
    for (now, op) in (1..).zip(ops) {
        let holder = if op.did { op.value.clone() } else { format!("not-{}", op.value) };
        core.preset(&op.key, Value::Str(holder));
        let keys = [op.key.as_str()];
        let command = match op.renewal {
            false => Command::Eval { script: scripts.release, keys: &keys, args: &[&op.value] },
            true => Command::Eval { script: scripts.renew, keys: &keys, args: &[&op.value, &ttl] },
        };
        let reply = core.apply(command, now, &mut expired);
        if (reply == Reply::Int(1)) != op.did {
            return Err(format!("a script on {} answered {reply:?} on bare Redis", op.key));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{run, DEFAULT_SEED};
    use crate::scenario::worked_example;
    use fencesim_model::mechanism::PLAIN_DEL_LUA;
    use fencesim_model::Mechanism;
    use fencesim_sim::GatewayMode;

    /// A renewing mechanism's worked example sends releases and renewals that did their
    /// work; each, run again on a bare instance, answers as it did in the run. A release
    /// that found another holder, run with a release that does not compare, is told.
    #[test]
    fn a_runs_scripts_answer_on_bare_redis_as_they_did_in_the_run() {
        let scenario = worked_example().with_mechanism(Mechanism::FencedRenewal, GatewayMode::Idempotent);
        let outcome = run(&scenario, DEFAULT_SEED).expect("the worked example runs");
        let mut calls = script_calls(&outcome.record);
        assert!(calls.iter().any(|op| op.renewal && op.did), "no renewal that extended: {calls:?}");
        assert!(calls.iter().any(|op| !op.renewal && op.did), "no release that deleted: {calls:?}");
        let (scripts, ttl) = (scenario.world.mechanism.spec().scripts, scenario.world.ttl_ms);
        run_scripts(scripts, ttl, &calls).expect("every script answers as in the run");
        let release = calls.iter_mut().find(|op| !op.renewal).expect("a release");
        release.did = false;
        run_scripts(scripts, ttl, &calls).expect("a release that found another holder deletes nothing");
        let careless = Scripts { release: PLAIN_DEL_LUA, ..scripts };
        assert!(run_scripts(careless, ttl, &calls).is_err(), "a release that deleted another's key passed");
    }
}
