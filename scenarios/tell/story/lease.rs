//! Redis's events, in words: leases granted, refused, expired, released, deleted, extended,
//! read and overwritten; counters seeded and tokens issued; restarts.

use crate::tell::story::narrator::{fmt_ms, Narrator};
use fencesim_sim::{Actor, EventKind};

impl Narrator<'_> {
    fn lease_granted(&mut self, at: u64, kind: &EventKind) {
        let EventKind::LeaseGranted { worker, instance, key, value, ttl_ms, epoch } = kind else { return };
        let (ttl_ms, epoch) = (*ttl_ms, *epoch);
        let redis = self.redis(*instance);
        let text = match epoch {
            Some(number) if self.instances() == 1 => format!(
                "grants {key} to {worker} (value {value}, TTL {} ms): epoch {number} begins",
                fmt_ms(ttl_ms)
            ),
            Some(number) => format!("{redis} grants {key} to {worker}: a majority, epoch {number} begins"),
            None => format!("{redis} grants {key} to {worker} (value {value}, TTL {} ms)", fmt_ms(ttl_ms)),
        };
        let reply = epoch.map_or("OK".to_owned(), |number| format!("OK, epoch {number}"));
        let diagram =
            vec![format!("{worker}->>R: SET {key} NX PX {ttl_ms}"), format!("R-->>{worker}: {reply}")];
        self.push(at, redis, text, diagram)
    }

    /// Events about a lease key, other than its grant.
    fn lease_changed(&mut self, at: u64, kind: &EventKind) {
        let (instance, text, diagram) = match kind {
            EventKind::LeaseRefused { worker, instance, key } => (
                instance,
                format!("refuses {key} to {worker}: another lease is live"),
                vec![format!("{worker}->>R: SET {key} NX"), format!("R-->>{worker}: nil")],
            ),
            EventKind::LeaseExpired { instance, key, epoch, .. } => (
                instance,
                format!("{key} expires: {} is over, and nothing tells its holder", self.holder(*epoch)),
                vec![format!("Note over R: {key} expires")],
            ),
            EventKind::LeaseReleased { worker, instance, key, deleted, .. } => {
                let own_script = self.outcome.scenario.world.mechanism.spec().scripts.release
                    == fencesim_model::mechanism::COMPARE_AND_DELETE_LUA;
                let text = match (*deleted, own_script) {
                    (true, _) => format!("{worker} releases {key}"),
                    (false, true) => format!(
                        "{worker}'s compare-and-delete of {key} deletes nothing: the key is no longer {worker}'s"
                    ),
                    (false, false) => format!("{worker}'s release script deletes nothing from {key}"),
                };
                (instance, text, vec![format!("{worker}->>R: release {key}")])
            }
            EventKind::LeaseDeleted { worker, instance, key, holder } => {
                let text = match holder {
                    Some(value) if !value.starts_with(&format!("{worker}")) => {
                        format!("{worker} DELs {key} and removes {value}, another worker's live lease")
                    }
                    Some(_) => format!("{worker} DELs {key}"),
                    None => format!("{worker} DELs {key}: nothing there"),
                };
                (instance, text, vec![format!("{worker}->>R: DEL {key}")])
            }
            EventKind::LeaseRearmed { worker, instance, key, holder, ttl_ms } => {
                let text = match holder {
                    Some(value) if !value.starts_with(&format!("{worker}")) => {
                        format!("{worker} PEXPIREs {key} and re-arms {value}, another worker's lease, for {ttl_ms} ms")
                    }
                    Some(_) => format!("{worker} PEXPIREs {key} for {ttl_ms} ms"),
                    None => format!("{worker} PEXPIREs {key}: nothing there"),
                };
                (instance, text, vec![format!("{worker}->>R: PEXPIRE {key}")])
            }
            EventKind::LeaseSet { worker, instance, key, value, .. } => (
                instance,
                format!("{worker} sets {key} to {value} without NX, whoever held it"),
                vec![format!("{worker}->>R: SET {key} PX (no NX)")],
            ),
            _ => return self.lease_looked_at(at, kind),
        };
        self.push(at, self.redis(*instance), text, diagram)
    }

    /// A renewal or a check of the key: told only when it finds the lease gone or another's.
    fn lease_looked_at(&mut self, at: u64, kind: &EventKind) {
        match kind {
            EventKind::LeaseExtended { worker, instance, key, extended: false } => self.push(
                at,
                self.redis(*instance),
                format!("{worker}'s renewal of {key} finds the lease gone"),
                vec![format!("{worker}->>R: extend {key}"), format!("R-->>{worker}: 0")],
            ),
            EventKind::LeaseRead { worker, instance, key, holder } => {
                let ours = holder.as_deref().is_some_and(|held| held.starts_with(&format!("{worker}")));
                if !ours {
                    let who = holder.as_deref().unwrap_or("nobody");
                    let counted = if self.instances() > 1 {
                        "; that is one instance's answer, and the check goes by the majority's"
                    } else {
                        ""
                    };
                    self.push(
                        at,
                        self.redis(*instance),
                        format!("{worker} reads {key} (GET): held by {who}, not by {worker}{counted}"),
                        vec![format!("{worker}->>R: GET {key}"), format!("R-->>{worker}: {who}")],
                    )
                }
            }
            // a renewal that worked is routine; other events are told elsewhere
            _ => {}
        }
    }

    /// Redis's events: the lease, the token counter, restarts.
    pub(super) fn redis_event(&mut self, at: u64, kind: &EventKind) {
        match kind {
            EventKind::LeaseGranted { .. } => self.lease_granted(at, kind),
            EventKind::ScriptFailed { worker, instance, key, script, reply } => self.push(
                at,
                self.redis(*instance),
                format!("{worker}'s {script} script on {key} fails: Redis replies {reply}"),
                vec![format!("{worker}->>R: {script} {key}"), format!("R-->>{worker}: error")],
            ),
            EventKind::CounterSeeded { instance, key, value } => self.push(
                at,
                self.redis(*instance),
                format!("starts with {key} seeded from MAX(fence): {value}"),
                vec![format!("Note over R: {key} = {value}")],
            ),
            EventKind::RedisRestarted { instance, lost } => self.push(
                at,
                self.redis(*instance),
                format!("restarts; {lost} key(s) lost or rolled back"),
                vec![format!("Note over R: restart, {lost} key(s) lost")],
            ),
            EventKind::RedisFailedOver { instance, lost, leases_lost, counters_back } => self.push(
                at,
                self.redis(*instance),
                format!(
                    "the promoted replica answers in the primary's place: {lost} write(s) never reached it, {leases_lost} lease key(s) are not as the primary held them, {counters_back} counter(s) went back"
                ),
                vec![format!("Note over R: failover, {lost} write(s) lost")],
            ),
            EventKind::ReplicaWaited { worker, instance, acked } => self.push(
                at,
                self.redis(*instance),
                match acked {
                    true => format!("the replica has every write {worker} made: WAIT answers 1"),
                    false => format!("the replica has not acknowledged {worker}'s last write in time: WAIT answers 0"),
                },
                vec![format!("R-->>{worker}: WAIT {}", u8::from(*acked))],
            ),
            EventKind::RedisRefused { worker, instance } => self.push(
                at,
                self.redis(*instance),
                format!("refuses {worker}'s connection: it is restarting or switching over"),
                vec![format!("{worker}-x{}: connection refused", "R")],
            ),
            EventKind::TokenIssued { worker, key, token } if key.starts_with("fence_seq:") => self.push(
                at,
                Actor::Store,
                format!("the database's sequence {key} gives {worker} token {token}"),
                vec![format!("{worker}->>D: next value of {key}"), format!("D-->>{worker}: {token}")],
            ),
            EventKind::TokenIssued { worker, key, token } => self.push(
                at,
                Actor::Redis,
                format!("INCR {key} gives {worker} token {token}"),
                vec![format!("{worker}->>R: INCR {key}"), format!("R-->>{worker}: {token}")],
            ),
            _ => self.lease_changed(at, kind),
        }
    }
}
