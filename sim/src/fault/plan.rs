//! The fault plan: an explicit, serializable list of faults, each with a kind, a target
//! and a trigger. A replay file stores the plan itself, so it keeps its meaning when the
//! generator that made it changes.

use crate::redis::Persistence;
use fencesim_model::{MerchantId, StepKind, WorkerId};
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;
use strum::{EnumCount, EnumDiscriminants, EnumIter, IntoStaticStr};

/// One kind of fault with its target and size. `FaultName` (the kind without its data) is
/// derived from it, so a new kind is one new variant: its name, its place in coverage and
/// in the swarm's choices follow, and the compiler points at every match that must learn it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, EnumDiscriminants)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[strum_discriminants(
    name(FaultName),
    doc = "A fault kind without its data: what coverage counts and a swarm switches on or off.",
    derive(PartialOrd, Ord, Hash, EnumCount, EnumIter, IntoStaticStr),
    strum(serialize_all = "kebab-case")
)]
pub enum FaultKind {
    /// Stop the whole worker process, background tasks included, for a while.
    Pause { worker: WorkerId, duration_ms: u64 },
    /// Kill the worker process; a new one starts after `restart_after_ms`. Its job comes
    /// back by the queue.
    Crash { worker: WorkerId, restart_after_ms: u64 },
    /// The merchant's lease key on this Redis instance expires now.
    ExpireLease { instance: u8, merchant: MerchantId },
    /// This Redis instance's clock jumps forward.
    RedisClockJump { instance: u8, by_ms: u64 },
    /// This Redis instance restarts, keeping what its persistence mode keeps.
    RedisRestart { instance: u8, persistence: Persistence },
    /// The queue gives up on the worker's delivery now: another worker gets the job.
    Redeliver { worker: WorkerId },
    /// The queue delivers the worker's job once more, to another worker.
    DuplicateDelivery { worker: WorkerId },
    /// The worker's next request to the database is held up on its way there.
    DbDelay { worker: WorkerId, delay_ms: u64 },
    /// The worker's next gateway call takes this much longer.
    GatewayLatency { worker: WorkerId, extra_ms: u64 },
    /// The worker's next refund call moves the money, and the answer never arrives.
    LostResponse { worker: WorkerId },
    /// For a while, a call whose idempotency key is still in flight gets a conflict.
    GatewayConflicts { for_ms: u64 },
    /// The worker's next Redis command is held up on its way there.
    RedisDelay { worker: WorkerId, delay_ms: u64 },
    /// The worker's next refund call is held up on its way for `late_ms`: the worker hears
    /// nothing when its answer is due (a timeout, outcome unknown), and the call still
    /// lands, late, and does what a call does then.
    GatewayTimeout { worker: WorkerId, late_ms: u64 },
    /// For a while, the gateway refuses every lookup and refund call at once: nothing moves.
    GatewayOutage { for_ms: u64 },
    /// The answer to the worker's next Redis command is held up on its way back: the
    /// command has run, and the worker learns of it late.
    RedisReplyDelay { worker: WorkerId, delay_ms: u64 },
    /// The answer to the worker's next database request is held up on its way back.
    DbReplyDelay { worker: WorkerId, delay_ms: u64 },
    /// The worker's next request to the second store (the settlement ledger) is held up
    /// on its way there.
    SettlementDelay { worker: WorkerId, delay_ms: u64 },
    /// The answer to the worker's next request to the settlement ledger is held up on its
    /// way back: the posting has happened, and the worker learns of it late.
    SettlementReplyDelay { worker: WorkerId, delay_ms: u64 },
    /// The primary of this instance stops and its replica is promoted, with every write
    /// that had not reached it lost; clients talk to the promoted replica once the
    /// deployment's switch-over time has passed. Only a replicated world has one.
    RedisFailover { instance: u8 },
    /// For a while, the copy the gateway answers lookups from stops catching up with its
    /// ledger (a stalled read replica or search index): until `for_ms` have passed, a
    /// lookup sees only the refunds it would have seen when the fault fired, then the copy
    /// catches up at once.
    LookupLag { for_ms: u64 },
    // New kinds go last: a trace's hash includes each event's variant position.
}

impl FaultName {
    /// Every fault kind, in declaration order (the order of coverage tables).
    pub fn all() -> impl Iterator<Item = FaultName> {
        <FaultName as strum::IntoEnumIterator>::iter()
    }

    /// `pause`, `redis-restart`, ...
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The kind named `name`, or a message that lists the kinds.
    pub fn parse(name: &str) -> Result<FaultName, String> {
        FaultName::all().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<&str> = FaultName::all().map(FaultName::name).collect();
            format!("unknown fault kind '{name}': expected one of {}", names.join(", "))
        })
    }
}

/// What a fault may aim at: a worker, a merchant's lease, a Redis instance. Each kind
/// takes the targets it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aim {
    pub worker: WorkerId,
    pub merchant: MerchantId,
    pub instance: u8,
}

/// The sizes a fault of one kind comes in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Size {
    /// The kind has no size.
    None,
    /// A number of milliseconds from this range.
    Ms(RangeInclusive<u64>),
    /// One of this many choices, by index.
    OneOf(usize),
}

/// What a fault kind does to a lease holder's hold on time: the two things the argument
/// over majority leases turns on. A stall keeps the holder from acting while its lease runs
/// out; a clock shift ends the lease on a Redis instance before the holder's own clock says
/// it should.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// The holder, or a request or answer of its, is held up for a while.
    Stall,
    /// An instance's clock jumps, or its lease key expires, early.
    ClockShift,
    /// Neither: the kind acts on something else (a process's life, the queue, the
    /// gateway's answers, what a restart keeps).
    Neither,
}

impl FaultName {
    /// The sizes the generators draw a fault of this kind from, for a lease of `ttl_ms`:
    /// durations are scaled to the TTL, where races live.
    pub fn sizes(self, ttl_ms: u64) -> Size {
        match self {
            FaultName::Pause => Size::Ms(ttl_ms / 4..=ttl_ms * 3),
            FaultName::Crash => Size::Ms(0..=ttl_ms * 2),
            FaultName::RedisClockJump => Size::Ms(ttl_ms / 2..=ttl_ms * 2),
            FaultName::RedisRestart => Size::OneOf(Persistence::ALL.len()),
            FaultName::RedisFailover => Size::None,
            FaultName::DbDelay
            | FaultName::RedisDelay
            | FaultName::GatewayLatency
            | FaultName::RedisReplyDelay
            | FaultName::DbReplyDelay
            | FaultName::SettlementDelay
            | FaultName::SettlementReplyDelay => Size::Ms(ttl_ms / 4..=ttl_ms * 2),
            FaultName::GatewayConflicts => Size::Ms(ttl_ms..=ttl_ms * 3),
            FaultName::GatewayTimeout => Size::Ms(ttl_ms / 4..=ttl_ms * 2),
            FaultName::GatewayOutage => Size::Ms(ttl_ms / 10..=ttl_ms),
            FaultName::LookupLag => Size::Ms(ttl_ms / 4..=ttl_ms * 2),
            FaultName::ExpireLease
            | FaultName::Redeliver
            | FaultName::DuplicateDelivery
            | FaultName::LostResponse => Size::None,
        }
    }

    /// The hop whose far side this kind acts on (its requests, its answers, its server),
    /// or none for a kind that acts on a worker's process or on the queue: a fault inside
    /// an operation on one hop can change what that operation sees only if it acts on that
    /// hop, on the worker, or on who else holds the job.
    pub fn hop(self) -> Option<Hop> {
        match self {
            FaultName::Pause | FaultName::Crash | FaultName::Redeliver | FaultName::DuplicateDelivery => None,
            FaultName::ExpireLease
            | FaultName::RedisClockJump
            | FaultName::RedisRestart
            | FaultName::RedisFailover
            | FaultName::RedisDelay
            | FaultName::RedisReplyDelay => Some(Hop::Redis),
            FaultName::DbDelay | FaultName::DbReplyDelay => Some(Hop::Database),
            FaultName::SettlementDelay | FaultName::SettlementReplyDelay => Some(Hop::Settlement),
            FaultName::GatewayLatency
            | FaultName::LostResponse
            | FaultName::GatewayConflicts
            | FaultName::GatewayTimeout
            | FaultName::GatewayOutage
            | FaultName::LookupLag => Some(Hop::Gateway),
        }
    }

    /// Whether a fault of this kind needs a replicated deployment (a replica to promote).
    pub fn needs_replica(self) -> bool {
        self == FaultName::RedisFailover
    }

    /// What this kind does to a lease holder's hold on time.
    pub fn timing(self) -> Timing {
        match self {
            FaultName::Pause
            | FaultName::DbDelay
            | FaultName::RedisDelay
            | FaultName::GatewayLatency
            | FaultName::RedisReplyDelay
            | FaultName::DbReplyDelay
            | FaultName::SettlementDelay
            | FaultName::SettlementReplyDelay => Timing::Stall,
            FaultName::RedisClockJump | FaultName::ExpireLease => Timing::ClockShift,
            FaultName::Crash
            | FaultName::RedisRestart
            | FaultName::RedisFailover
            | FaultName::Redeliver
            | FaultName::DuplicateDelivery
            | FaultName::LostResponse
            | FaultName::GatewayConflicts
            | FaultName::GatewayTimeout
            | FaultName::GatewayOutage
            | FaultName::LookupLag => Timing::Neither,
        }
    }

    /// A fault of this kind aimed at `aim`, of `size` (milliseconds, or a choice's index).
    /// The one place a kind is built from its parts: every generator goes through it.
    pub fn make(self, aim: Aim, size: u64) -> FaultKind {
        let Aim { worker, merchant, instance } = aim;
        match self {
            FaultName::Pause => FaultKind::Pause { worker, duration_ms: size },
            FaultName::Crash => FaultKind::Crash { worker, restart_after_ms: size },
            FaultName::ExpireLease => FaultKind::ExpireLease { instance, merchant },
            FaultName::RedisClockJump => FaultKind::RedisClockJump { instance, by_ms: size },
            FaultName::RedisRestart => {
                FaultKind::RedisRestart { instance, persistence: Persistence::ALL[size as usize] }
            }
            FaultName::Redeliver => FaultKind::Redeliver { worker },
            FaultName::DuplicateDelivery => FaultKind::DuplicateDelivery { worker },
            FaultName::DbDelay => FaultKind::DbDelay { worker, delay_ms: size },
            FaultName::RedisDelay => FaultKind::RedisDelay { worker, delay_ms: size },
            FaultName::GatewayLatency => FaultKind::GatewayLatency { worker, extra_ms: size },
            FaultName::LostResponse => FaultKind::LostResponse { worker },
            FaultName::GatewayConflicts => FaultKind::GatewayConflicts { for_ms: size },
            FaultName::GatewayTimeout => FaultKind::GatewayTimeout { worker, late_ms: size },
            FaultName::GatewayOutage => FaultKind::GatewayOutage { for_ms: size },
            FaultName::RedisReplyDelay => FaultKind::RedisReplyDelay { worker, delay_ms: size },
            FaultName::DbReplyDelay => FaultKind::DbReplyDelay { worker, delay_ms: size },
            FaultName::SettlementDelay => FaultKind::SettlementDelay { worker, delay_ms: size },
            FaultName::SettlementReplyDelay => FaultKind::SettlementReplyDelay { worker, delay_ms: size },
            FaultName::RedisFailover => FaultKind::RedisFailover { instance },
            FaultName::LookupLag => FaultKind::LookupLag { for_ms: size },
        }
    }
}

impl FaultKind {
    /// This fault's size, as `FaultName::make` takes it (milliseconds, or a choice's index).
    pub fn size(&self) -> u64 {
        match *self {
            FaultKind::Pause { duration_ms: ms, .. }
            | FaultKind::Crash { restart_after_ms: ms, .. }
            | FaultKind::RedisClockJump { by_ms: ms, .. }
            | FaultKind::DbDelay { delay_ms: ms, .. }
            | FaultKind::RedisDelay { delay_ms: ms, .. }
            | FaultKind::GatewayLatency { extra_ms: ms, .. }
            | FaultKind::GatewayConflicts { for_ms: ms }
            | FaultKind::GatewayTimeout { late_ms: ms, .. }
            | FaultKind::GatewayOutage { for_ms: ms }
            | FaultKind::RedisReplyDelay { delay_ms: ms, .. }
            | FaultKind::DbReplyDelay { delay_ms: ms, .. }
            | FaultKind::SettlementDelay { delay_ms: ms, .. }
            | FaultKind::SettlementReplyDelay { delay_ms: ms, .. }
            | FaultKind::LookupLag { for_ms: ms } => ms,
            FaultKind::RedisRestart { persistence, .. } => {
                Persistence::ALL.iter().position(|p| *p == persistence).expect("every mode is listed") as u64
            }
            FaultKind::ExpireLease { .. }
            | FaultKind::Redeliver { .. }
            | FaultKind::DuplicateDelivery { .. }
            | FaultKind::LostResponse { .. }
            | FaultKind::RedisFailover { .. } => 0,
        }
    }

    /// What this fault aims at (targets it does not take read as the first of each).
    pub fn aim(&self) -> Aim {
        Aim {
            worker: self.worker().unwrap_or(WorkerId(0)),
            merchant: self.merchant().unwrap_or(MerchantId(0)),
            instance: self.instance().unwrap_or(0),
        }
    }

    /// The merchant whose lease this fault acts on, if it acts on one.
    pub fn merchant(&self) -> Option<MerchantId> {
        match *self {
            FaultKind::ExpireLease { merchant, .. } => Some(merchant),
            FaultKind::Pause { .. }
            | FaultKind::Crash { .. }
            | FaultKind::RedisClockJump { .. }
            | FaultKind::RedisRestart { .. }
            | FaultKind::Redeliver { .. }
            | FaultKind::DuplicateDelivery { .. }
            | FaultKind::DbDelay { .. }
            | FaultKind::GatewayLatency { .. }
            | FaultKind::LostResponse { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::RedisDelay { .. }
            | FaultKind::GatewayTimeout { .. }
            | FaultKind::GatewayOutage { .. }
            | FaultKind::RedisReplyDelay { .. }
            | FaultKind::DbReplyDelay { .. }
            | FaultKind::SettlementDelay { .. }
            | FaultKind::SettlementReplyDelay { .. }
            | FaultKind::RedisFailover { .. }
            | FaultKind::LookupLag { .. } => None,
        }
    }

    /// The same fault with another size.
    pub fn resized(&self, size: u64) -> FaultKind {
        self.kind().make(self.aim(), size)
    }

    /// The same fault aimed at `worker` instead (a fault that names no worker is unchanged).
    pub fn for_worker(&self, worker: WorkerId) -> FaultKind {
        match self.worker() {
            Some(_) => self.kind().make(Aim { worker, ..self.aim() }, self.size()),
            None => *self,
        }
    }

    pub fn kind(&self) -> FaultName {
        FaultName::from(self)
    }

    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The worker this fault acts on, if it acts on one.
    pub fn worker(&self) -> Option<WorkerId> {
        match *self {
            FaultKind::Pause { worker, .. }
            | FaultKind::Crash { worker, .. }
            | FaultKind::Redeliver { worker }
            | FaultKind::DuplicateDelivery { worker }
            | FaultKind::DbDelay { worker, .. }
            | FaultKind::RedisDelay { worker, .. }
            | FaultKind::GatewayLatency { worker, .. }
            | FaultKind::LostResponse { worker }
            | FaultKind::GatewayTimeout { worker, .. }
            | FaultKind::RedisReplyDelay { worker, .. }
            | FaultKind::DbReplyDelay { worker, .. }
            | FaultKind::SettlementDelay { worker, .. }
            | FaultKind::SettlementReplyDelay { worker, .. } => Some(worker),
            FaultKind::ExpireLease { .. }
            | FaultKind::RedisClockJump { .. }
            | FaultKind::RedisRestart { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::GatewayOutage { .. }
            | FaultKind::RedisFailover { .. }
            | FaultKind::LookupLag { .. } => None,
        }
    }

    /// The Redis instance this fault acts on, if it acts on one.
    pub fn instance(&self) -> Option<u8> {
        match *self {
            FaultKind::ExpireLease { instance, .. }
            | FaultKind::RedisClockJump { instance, .. }
            | FaultKind::RedisRestart { instance, .. }
            | FaultKind::RedisFailover { instance } => Some(instance),
            FaultKind::Pause { .. }
            | FaultKind::Crash { .. }
            | FaultKind::Redeliver { .. }
            | FaultKind::DuplicateDelivery { .. }
            | FaultKind::DbDelay { .. }
            | FaultKind::RedisDelay { .. }
            | FaultKind::GatewayLatency { .. }
            | FaultKind::LostResponse { .. }
            | FaultKind::GatewayConflicts { .. }
            | FaultKind::GatewayTimeout { .. }
            | FaultKind::GatewayOutage { .. }
            | FaultKind::RedisReplyDelay { .. }
            | FaultKind::DbReplyDelay { .. }
            | FaultKind::SettlementDelay { .. }
            | FaultKind::SettlementReplyDelay { .. }
            | FaultKind::LookupLag { .. } => None,
        }
    }

    /// Does this fault stop `worker`'s own process (so that a worker firing it must yield)?
    pub fn stops(&self, worker: WorkerId) -> bool {
        matches!(*self, FaultKind::Pause { worker: w, .. } | FaultKind::Crash { worker: w, .. } if w == worker)
    }
}

/// A worker's way to one component: where a request can be held up, and what a call
/// trigger counts.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, EnumCount, EnumIter,
)]
#[serde(rename_all = "snake_case")]
pub enum Hop {
    /// Redis commands (every instance).
    Redis,
    /// SQL statements to the refund store.
    Database,
    /// Calls to the payment gateway (lookups and refunds).
    Gateway,
    /// SQL statements to the second store, the settlement ledger.
    Settlement,
}

impl Hop {
    pub fn all() -> impl Iterator<Item = Hop> {
        <Hop as strum::IntoEnumIterator>::iter()
    }

    /// "Redis command", "SQL statement", "gateway call": one of what this hop counts.
    pub fn call_name(self) -> &'static str {
        match self {
            Hop::Redis => "Redis command",
            Hop::Database => "SQL statement",
            Hop::Gateway => "gateway call",
            Hop::Settlement => "settlement statement",
        }
    }
}

/// When a fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// At this many milliseconds after the start of the run.
    At { at_ms: u64 },
    /// The `nth` time (from 1) `worker` reaches `step`: the fault fires right there.
    Step { worker: WorkerId, step: StepKind, nth: u32 },
    /// `worker`'s `nth` request (from 1) on `hop`, right before it leaves: the fault can land
    /// between two calls of one operation.
    Call { worker: WorkerId, hop: Hop, nth: u32 },
    /// `worker`'s `nth` request (from 1) on `hop` that follows its previous request on the
    /// same hop with no protocol step and no other request in between, right before it
    /// leaves: inside one operation that takes several round trips (a lease taken on five
    /// instances, or an atomic command split in two), wherever in the run it comes.
    Within { worker: WorkerId, hop: Hop, nth: u32 },
    // New triggers go last: a trace's hash includes each fired fault's trigger.
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fault {
    #[serde(flatten)]
    pub kind: FaultKind,
    pub trigger: Trigger,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    pub faults: Vec<Fault>,
}

impl Trigger {
    /// The same trigger, fired by `worker` instead (a timed trigger names nobody).
    /// The trigger in words: "A's after-claim #3", "B's Redis command #2", "1500 ms".
    pub fn describe(&self) -> String {
        match self {
            Trigger::Step { worker, step, nth } => format!("{worker}'s {} #{nth}", step.name()),
            Trigger::Call { worker, hop, nth } => format!("{worker}'s {} #{nth}", hop.call_name()),
            Trigger::Within { worker, hop, nth } => {
                format!("{worker}'s {} #{nth} inside an operation", hop.call_name())
            }
            Trigger::At { at_ms } => format!("{at_ms} ms"),
        }
    }

    pub fn for_worker(self, worker: WorkerId) -> Trigger {
        match self {
            Trigger::At { at_ms } => Trigger::At { at_ms },
            Trigger::Step { step, nth, .. } => Trigger::Step { worker, step, nth },
            Trigger::Call { hop, nth, .. } => Trigger::Call { worker, hop, nth },
            Trigger::Within { hop, nth, .. } => Trigger::Within { worker, hop, nth },
        }
    }

    /// The worker whose step fires this trigger, if it is a step trigger.
    pub fn worker(&self) -> Option<WorkerId> {
        match *self {
            Trigger::At { .. } => None,
            Trigger::Step { worker, .. } | Trigger::Call { worker, .. } | Trigger::Within { worker, .. } => {
                Some(worker)
            }
        }
    }
}

impl Fault {
    /// The fault names only workers and instances a run of `workers` workers and
    /// `instances` Redis instances has, and needs a replica only in a `replicated` world; a
    /// reason if not.
    pub fn validate(
        &self,
        index: usize,
        workers: u32,
        instances: u8,
        replicated: bool,
    ) -> Result<(), String> {
        for worker in self.kind.worker().into_iter().chain(self.trigger.worker()) {
            if worker.0 >= workers {
                return Err(format!(
                    "fault {index} names worker {worker}, but the run has {workers} workers"
                ));
            }
        }
        if let Some(n) = self.kind.instance().filter(|&n| n >= instances) {
            return Err(format!("fault {index} names Redis instance {n}, but the run has {instances}"));
        }
        if self.kind.kind().needs_replica() && !replicated {
            return Err(format!(
                "fault {index} is a {}, but the run's Redis has no replica to promote (set `replica`)",
                self.kind.name()
            ));
        }
        Ok(())
    }
}

impl FaultPlan {
    pub fn none() -> FaultPlan {
        FaultPlan::default()
    }

    /// Every fault is valid for the run (see `Fault::validate`).
    pub fn validate(&self, workers: u32, instances: u8, replicated: bool) -> Result<(), String> {
        self.faults.iter().enumerate().try_for_each(|(i, f)| f.validate(i, workers, instances, replicated))
    }

    pub fn with(mut self, kind: FaultKind, trigger: Trigger) -> FaultPlan {
        self.faults.push(Fault { kind, trigger });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_made_as_itself_at_every_end_of_its_sizes() {
        let aim = Aim { worker: WorkerId(1), merchant: MerchantId(7), instance: 0 };
        for kind in FaultName::all() {
            let ends = match kind.sizes(1_000) {
                Size::None => vec![0],
                Size::Ms(range) => vec![*range.start(), *range.end()],
                Size::OneOf(choices) => vec![0, choices as u64 - 1],
            };
            for size in ends {
                let made = kind.make(aim, size);
                assert_eq!(made.kind(), kind);
                assert_eq!(made.resized(made.size()), made, "size and aim rebuild the fault");
                let fault = Fault { kind: made, trigger: Trigger::At { at_ms: 0 } };
                assert!(fault.validate(0, 2, 1, true).is_ok());
                assert_eq!(fault.validate(0, 2, 1, false).is_ok(), !kind.needs_replica());
            }
        }
    }

    #[test]
    fn a_plan_round_trips_through_json_and_refuses_unknown_fields() {
        let plan = FaultPlan::none()
            .with(
                FaultKind::Pause { worker: WorkerId(0), duration_ms: 8_000 },
                Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: 815 },
            )
            .with(
                FaultKind::RedisRestart { instance: 0, persistence: Persistence::None },
                Trigger::At { at_ms: 5 },
            );
        let text = serde_json::to_string(&plan).unwrap();
        assert!(text.contains(r#""kind":"pause","worker":"A","duration_ms":8000"#), "{text}");
        assert_eq!(serde_json::from_str::<FaultPlan>(&text).unwrap(), plan);
        let bad = r#"{"faults":[{"kind":"pause","worker":"A","duration_ms":1,"trigger":{"on":"at","at_ms":1,"extra":2}}]}"#;
        assert!(serde_json::from_str::<FaultPlan>(bad).is_err());
    }
}
