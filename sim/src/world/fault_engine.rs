//! The fault engine: what each fault kind does to the world when it fires, and which
//! faults a step or the clock triggers. Every fault kind is handled here and only here.

use super::{value_text, Counted, State, Value, World};
use crate::fault::{Fault, FaultKind, Hop, Trigger};
use crate::history::EventKind;
use fencesim_model::{StepKind, WorkerId};
use madsim::runtime::Handle;

impl World {
    /// Fires one fault now. A worker that fires a pause or a crash of its own process must
    /// then yield, so that the fault takes hold right there.
    pub(crate) fn fire(&self, state: &mut State, fault: &Fault) {
        let now = self.clock.now_ms();
        state.faults.last_fault_ms = Some(now);
        if let Some(log) = &self.order {
            log.lock().unwrap_or_else(|p| p.into_inner()).fault(now, fault.clone());
        }
        state.record(now, EventKind::FaultFired { fault: fault.kind, trigger: fault.trigger });
        match fault.kind {
            FaultKind::Pause { worker, duration_ms } => self.pause(state, worker, now + duration_ms),
            FaultKind::Crash { worker, restart_after_ms } => {
                self.crash(state, worker, now + restart_after_ms)
            }
            FaultKind::ExpireLease { instance, merchant } => {
                for key in self.config.mechanism.spec().lease_keys(merchant, self.config.workers) {
                    state.expiring(instance, |core, out| out.extend(core.expire_now(&key, now)));
                }
            }
            FaultKind::RedisClockJump { instance, by_ms } => state.expiring(instance, |core, out| {
                core.jump_clock(by_ms as i64, now);
                core.expire_due(now, out);
            }),
            FaultKind::RedisRestart { instance, persistence } => {
                self.restart(state, instance, persistence, now)
            }
            FaultKind::RedisFailover { instance } => self.fail_over(state, instance, now),
            FaultKind::Redeliver { worker } => self.with_queue(state, now, |queue, out| {
                queue.redeliver_from(worker, now, out);
            }),
            FaultKind::DuplicateDelivery { worker } => self.with_queue(state, now, |queue, out| {
                queue.duplicate_from(worker, out);
            }),
            FaultKind::DbDelay { worker, delay_ms } => state.faults.hold_up(worker, Hop::Database, delay_ms),
            FaultKind::RedisDelay { worker, delay_ms } => state.faults.hold_up(worker, Hop::Redis, delay_ms),
            FaultKind::GatewayLatency { worker, extra_ms } => {
                state.faults.hold_up(worker, Hop::Gateway, extra_ms)
            }
            FaultKind::LostResponse { worker } => state.faults.armed[worker.0 as usize].lost_responses += 1,
            FaultKind::GatewayConflicts { for_ms } => {
                state.faults.conflicts_until_ms = state.faults.conflicts_until_ms.max(now + for_ms)
            }
            FaultKind::GatewayTimeout { worker, late_ms } => {
                state.faults.armed[worker.0 as usize].late_ms = Some(late_ms)
            }
            FaultKind::RedisReplyDelay { worker, delay_ms } => {
                state.faults.hold_up_reply(worker, Hop::Redis, delay_ms)
            }
            FaultKind::DbReplyDelay { worker, delay_ms } => {
                state.faults.hold_up_reply(worker, Hop::Database, delay_ms)
            }
            FaultKind::SettlementDelay { worker, delay_ms } => {
                state.faults.hold_up(worker, Hop::Settlement, delay_ms)
            }
            FaultKind::SettlementReplyDelay { worker, delay_ms } => {
                state.faults.hold_up_reply(worker, Hop::Settlement, delay_ms)
            }
            FaultKind::GatewayOutage { for_ms } => {
                state.faults.outage_until_ms = state.faults.outage_until_ms.max(now + for_ms)
            }
            FaultKind::LookupLag { for_ms } => state.faults.lookup.freeze(now, for_ms),
        }
        self.changed.notify_one();
    }

    /// The instance restarts with what its persistence keeps: the lease keys it no longer
    /// holds as they were are lost to the ledger, it refuses clients while it is down, and
    /// a replica copies the restarted primary's whole data set again.
    fn restart(&self, state: &mut State, instance: u8, persistence: crate::redis::Persistence, now: u64) {
        let before = state.ledger.held_on(instance);
        let lost = state.redis[instance as usize].restart(persistence, now);
        for (key, value) in before {
            let still = state.redis[instance as usize].value_of(&key).map(value_text);
            if still.as_deref() != Some(value.as_str()) {
                let at = state.moment(now);
                state.ledger.lost(instance, &key, &value, at, false);
            }
        }
        state.record(now, EventKind::RedisRestarted { instance, lost });
        let down_ms = self.config.mechanism.restart_down_ms(self.config.redis_restart_ms, self.config.ttl_ms);
        if down_ms > 0 {
            let down = &mut state.faults.redis_down_until_ms;
            down.retain(|&(other, _)| other != instance);
            down.push((instance, now + down_ms));
        }
        self.redis_started(state, instance, now);
        if let Some(replica) = state.replica.as_mut().filter(|_| instance == 0) {
            replica.resync(&state.redis[0], now);
        }
    }

    /// The primary stops and its replica is promoted: the lease keys and counters the
    /// primary held that the replica does not hold as they were are lost to the ledger, a
    /// lease key the replica still holds that the primary had removed is held again, and
    /// clients are refused for the switch-over time.
    fn fail_over(&self, state: &mut State, instance: u8, now: u64) {
        let (Some(replica), Some(deployment)) = (state.replica.as_mut(), self.config.replica) else {
            return; // validation lets a failover only into a replicated world
        };
        let promoted = replica.fail_over(now);
        let before = state.ledger.held_on(instance);
        let old = std::mem::replace(&mut state.redis[instance as usize], promoted.core);
        let core = &state.redis[instance as usize];
        let mut leases_lost = 0;
        for (key, value) in &before {
            if core.value_of(key).map(value_text).as_deref() != Some(value.as_str()) {
                leases_lost += 1;
                let at = state.moment(now);
                state.ledger.lost(instance, key, value, at, false);
            }
        }
        let mut counters_back = 0;
        for (key, entry) in core.entries() {
            let held = before.iter().any(|(k, v)| k == key && *v == value_text(&entry.value));
            // a counter was never granted, so only a lease is restored to the ledger
            if !held {
                state.ledger.restored(instance, key, &value_text(&entry.value));
            }
        }
        // the counters are the integers (a lease holds its holder's value)
        for (key, entry) in old.entries().filter(|(_, entry)| matches!(entry.value, Value::Int(_))) {
            let now_at = core.value_of(key).map_or(Some(0), |v| value_text(v).parse::<i64>().ok());
            let was = value_text(&entry.value).parse::<i64>().ok();
            counters_back += u32::from(matches!((now_at, was), (Some(n), Some(w)) if n < w));
        }
        let lost = promoted.lost;
        state.record(now, EventKind::RedisFailedOver { instance, lost, leases_lost, counters_back });
        if deployment.switch_over_ms > 0 {
            let down = &mut state.faults.redis_down_until_ms;
            down.retain(|&(other, _)| other != instance);
            down.push((instance, now + deployment.switch_over_ms));
        }
    }

    fn pause(&self, state: &mut State, worker: WorkerId, until_ms: u64) {
        let faults = &mut state.faults;
        if faults.crashed[worker.0 as usize] || faults.resumes.iter().any(|r| r.1 == worker) {
            return;
        }
        if let Some(node) = self.node_of(worker) {
            Handle::current().pause(node.id());
            faults.resumes.push((until_ms, worker));
        }
    }

    fn crash(&self, state: &mut State, worker: WorkerId, restart_at_ms: u64) {
        if state.faults.crashed[worker.0 as usize] {
            return;
        }
        if let Some(node) = self.node_of(worker) {
            Handle::current().kill(node.id());
        }
        state.faults.crashed[worker.0 as usize] = true;
        state.faults.resumes.retain(|r| r.1 != worker);
        state.ledger.forget(worker);
        state.faults.restarts.push((restart_at_ms, worker));
    }

    /// A Redis instance came back: the deployment's start-up routine runs (the mechanism
    /// says what it does), unless this world was wired without it.
    fn redis_started(&self, state: &mut State, instance: u8, now: u64) {
        if !self.start_routine {
            return;
        }
        let merchants: std::collections::BTreeSet<_> = self.config.jobs.iter().map(|j| j.merchant).collect();
        let core = &mut state.redis[instance as usize];
        let max_fence = |merchant| self.store.max_fence(merchant).ok();
        let seeded =
            self.config.mechanism.on_redis_start(instance, merchants, self.config.workers, core, max_fence);
        for (key, value) in seeded {
            state.record(now, EventKind::CounterSeeded { instance, key, value });
        }
    }

    /// Fires the faults `worker` triggers by reaching `step` (its `nth` time). Returns
    /// whether one of them stops the worker's own process.
    pub(crate) fn fire_step_triggers(&self, state: &mut State, worker: WorkerId, step: StepKind) -> bool {
        let nth = state.faults.count_step(worker, step);
        self.fire_triggered(state, worker, Trigger::Step { worker, step, nth })
    }

    /// Fires the faults `worker` triggers by sending a request on `hop`: its `nth` on the
    /// hop, and its `within`-th inside one operation. Returns whether one of them stops the
    /// worker's own process.
    pub(crate) fn fire_call_triggers(
        &self,
        state: &mut State,
        worker: WorkerId,
        hop: Hop,
        counted: Counted,
    ) -> bool {
        let mut stops = false;
        if let Some(nth) = counted.nth {
            stops |= self.fire_triggered(state, worker, Trigger::Call { worker, hop, nth });
        }
        if let Some(nth) = counted.within {
            stops |= self.fire_triggered(state, worker, Trigger::Within { worker, hop, nth });
        }
        stops
    }

    /// Fires every fault of the plan with this trigger, in plan order; whether one stops `worker`.
    fn fire_triggered(&self, state: &mut State, worker: WorkerId, trigger: Trigger) -> bool {
        let mut stops = false;
        for fault in self.config.faults.faults.iter().filter(|fault| fault.trigger == trigger) {
            self.fire(state, fault);
            stops |= fault.kind.stops(worker);
        }
        stops
    }

    /// Fires the timed faults due at `now`, in plan order.
    pub(crate) fn fire_timed(&self, state: &mut State, now: u64) {
        let plan = &self.config.faults.faults;
        let mut due: Vec<usize> = Vec::new();
        state.faults.timed.retain(|&i| match plan[i].trigger {
            Trigger::At { at_ms } if at_ms <= now => {
                due.push(i);
                false
            }
            Trigger::At { .. } | Trigger::Step { .. } | Trigger::Call { .. } | Trigger::Within { .. } => true,
        });
        due.sort_unstable();
        for i in due {
            self.fire(state, &plan[i]);
        }
    }

    /// The next time a timed fault, a resume or a restart is due.
    pub(crate) fn next_fault_deadline(&self, state: &State) -> Option<u64> {
        let plan = &self.config.faults.faults;
        let timed = state.faults.timed.iter().filter_map(|&i| match plan[i].trigger {
            Trigger::At { at_ms } => Some(at_ms),
            Trigger::Step { .. } | Trigger::Call { .. } | Trigger::Within { .. } => None,
        });
        let faults = &state.faults;
        let lifecycle = faults.resumes.iter().map(|r| r.0).chain(faults.restarts.iter().map(|r| r.0));
        let landings = faults.late_calls.iter().map(|c| c.lands_at_ms);
        timed.chain(lifecycle).chain(landings).min()
    }
}
