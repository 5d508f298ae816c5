//! A worker's connection to one Redis instance. Each command waits out the Redis latency,
//! runs on the instance's pure core, tells the epoch ledger what it did to a lease, and
//! records what happened.

use super::Link;
use crate::fault::Hop;
use crate::history::EventKind;
use crate::redis::{Command, Reply};
use crate::world::{value_text, State, World};
use fencesim_model::{BackendError, RedisInstance, Token, WorkerId};

#[derive(Clone)]
pub struct RedisClient {
    pub(crate) link: Link,
    pub(crate) instance: u8,
}

impl RedisClient {
    /// Sends one command: it waits out the latency and any delay, and runs `f` on the
    /// instance, unless the instance is restarting, when the connection is refused.
    async fn call<T>(
        &self,
        f: impl FnOnce(&World, &mut State, u64) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let world = &self.link.world;
        self.link.request(Hop::Redis).await;
        let delay = world.lock().faults.take_delay(self.link.worker, Hop::Redis);
        world.clock.sleep_ms(world.config.redis_latency_ms + delay).await;
        self.link.arrived(Hop::Redis);
        let (reply, back) = {
            let mut state = world.lock();
            let now = world.clock.now_ms();
            let reply = if state.faults.redis_down(self.instance, now) {
                let (worker, instance) = (self.link.worker, self.instance);
                state.record(now, EventKind::RedisRefused { worker, instance });
                Err(BackendError(format!("redis#{instance}: connection refused (restarting)")))
            } else {
                let reply = f(world, &mut state, now);
                if let Some(replica) = state.replica.as_mut().filter(|_| self.instance == 0) {
                    replica.commanded(self.link.worker, now);
                }
                reply
            };
            (reply, state.faults.take_reply_delay(self.link.worker, Hop::Redis))
        };
        if back > 0 {
            world.clock.sleep_ms(back).await;
        }
        reply
    }

    fn worker(&self) -> WorkerId {
        self.link.worker
    }

    /// `PEXPIRE key ttl`: re-arms the key's expiry whoever holds it. Not a port of the
    /// model's (the protocol extends only its own lease, by script); a harness may use it.
    pub async fn pexpire(&self, key: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        self.call(|world, state, now| {
            let holder = state.redis[instance as usize].value_of(key).map(value_text);
            let rearmed = state.redis(instance, Command::PExpire { key, ttl_ms }, now) == Reply::Int(1);
            let holder = holder.filter(|_| rearmed);
            state.record(
                now,
                EventKind::LeaseRearmed { worker, instance, key: key.to_owned(), holder, ttl_ms },
            );
            world.changed.notify_one();
            Ok(rearmed)
        })
        .await
    }

    /// `SETNX key value`: the lease taken with no expiry (until a `PEXPIRE` gives it one).
    /// Not a port of the model's; a harness may use it.
    pub async fn set_nx(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        self.set_if_absent(key, value, None).await
    }

    /// `SET key value NX PX ttl`, or `SETNX` without a TTL: a grant the epoch ledger hears of.
    async fn set_if_absent(&self, key: &str, value: &str, ttl_ms: Option<u64>) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        let command = match ttl_ms {
            Some(ttl_ms) => Command::SetNxPx { key, value, ttl_ms },
            None => Command::SetNx { key, value },
        };
        self.call(|world, state, now| match state.redis(instance, command, now) {
            Reply::Ok => {
                Ok(told((world, state, now), (worker, instance), (key, value, ttl_ms.unwrap_or(0)), true))
            }
            Reply::Nil => Ok(told((world, state, now), (worker, instance), (key, value, 0), false)),
            other => Err(BackendError(format!("{command:?}: {other:?}"))),
        })
        .await
    }

    /// `SET key value PX ttl`, with no NX: whoever holds the key, it is this value's now.
    /// Not a port of the model's (the protocol never needs it); a harness may use it.
    pub async fn set_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<(), BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        self.call(|world, state, now| {
            state.expiring(instance, |core, out| core.expire_due(now, out));
            let before = state.redis[instance as usize].value_of(key).map(value_text);
            state.redis(instance, Command::SetPx { key, value, ttl_ms }, now);
            // the holder it overwrote no longer holds the key; a value granted before holds
            // it again, and no epoch opens: nothing granted it
            if let Some(holder) = before.filter(|holder| holder != value) {
                let (own, at) = (state.ledger.granted_to(key, &holder, worker), state.moment(now));
                state.ledger.lost(instance, key, &holder, at, own);
            }
            state.ledger.restored(instance, key, value);
            let (key, value) = (key.to_owned(), value.to_owned());
            state.record(now, EventKind::LeaseSet { worker, instance, key, value, ttl_ms });
            world.changed.notify_one();
            Ok(())
        })
        .await
    }
}

impl RedisInstance for RedisClient {
    async fn set_nx_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        self.set_if_absent(key, value, Some(ttl_ms)).await
    }

    async fn get(&self, key: &str) -> Result<Option<String>, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        self.call(|_, state, now| {
            let holder = match state.redis(instance, Command::Get { key }, now) {
                Reply::Bulk(s) => Some(s),
                Reply::Ok
                | Reply::Nil
                | Reply::Int(_)
                | Reply::Status(_)
                | Reply::Error(_)
                | Reply::Array(_) => None,
            };
            let kind = EventKind::LeaseRead { worker, instance, key: key.to_owned(), holder: holder.clone() };
            state.record(now, kind);
            Ok(holder)
        })
        .await
    }

    async fn del(&self, key: &str) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        self.call(|_, state, now| {
            let holder = state.redis[instance as usize].value_of(key).map(value_text);
            let deleted = state.redis(instance, Command::Del { key }, now) == Reply::Int(1);
            let holder = holder.filter(|_| deleted);
            if let Some(value) = &holder {
                let (own, at) = (state.ledger.granted_to(key, value, worker), state.moment(now));
                state.ledger.lost(instance, key, value, at, own);
            }
            state.record(now, EventKind::LeaseDeleted { worker, instance, key: key.to_owned(), holder });
            Ok(deleted)
        })
        .await
    }

    async fn incr(&self, key: &str) -> Result<i64, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        self.call(|_, state, now| match state.redis(instance, Command::Incr { key }, now) {
            Reply::Int(n) => {
                state.record(now, EventKind::TokenIssued { worker, key: key.to_owned(), token: Token(n) });
                Ok(n)
            }
            other => Err(BackendError(format!("INCR {key}: {other:?}"))),
        })
        .await
    }

    /// A team's own acquisition. Its answer is the worker's: 1 or `OK` a grant, 0 or nil a
    /// refusal, as `SET NX PX`'s are; an error reply is the failed command it is. What it did
    /// is the history's, read from the instance: a key it gave the worker's value is a grant,
    /// and one it took from another holder is a SET without NX (the holder loses it there,
    /// and the worker's epoch begins).
    async fn acquire_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        let ttl = ttl_ms.to_string();
        self.call(|world, state, now| {
            state.expiring(instance, |core, out| core.expire_due(now, out));
            let held = |state: &State| state.redis[instance as usize].value_of(key).map(value_text);
            let before = held(state);
            let reply =
                state.redis(instance, Command::Eval { script, keys: &[key], args: &[value, &ttl] }, now);
            failed(state, now, (worker, instance, key), "acquire", &reply)?;
            let answered = match reply {
                Reply::Ok | Reply::Int(1) => true,
                Reply::Status(status) if status == "OK" => true,
                Reply::Nil | Reply::Int(0) => false,
                other => {
                    let said = format!("redis#{instance}: the acquisition script returned {other:?}");
                    return Err(BackendError(format!("{said}, not 1, 0, OK or nil")));
                }
            };
            let took = held(state).as_deref() == Some(value) && before.as_deref() != Some(value);
            match before.filter(|_| took) {
                Some(holder) => {
                    let (own, at) = (state.ledger.granted_to(key, &holder, worker), state.moment(now));
                    state.ledger.lost(instance, key, &holder, at, own);
                    // the worker holds the lease from here: its writes are its own epoch's
                    state.ledger.granted(instance, key, value, worker, at);
                    let (key, value) = (key.to_owned(), value.to_owned());
                    state.record(now, EventKind::LeaseSet { worker, instance, key, value, ttl_ms });
                    world.changed.notify_one();
                }
                None => {
                    told((world, state, now), (worker, instance), (key, value, ttl_ms), took);
                }
            }
            Ok(answered)
        })
        .await
    }

    async fn release_script(&self, script: &str, key: &str, value: &str) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        self.call(|_, state, now| {
            let command = Command::Eval { script, keys: &[key], args: &[value] };
            let reply = state.redis(instance, command, now);
            failed(state, now, (worker, instance, key), "release", &reply)?;
            let deleted = reply == Reply::Int(1);
            if deleted {
                let at = state.moment(now);
                state.ledger.lost(instance, key, value, at, true);
            }
            let (key, value) = (key.to_owned(), value.to_owned());
            state.record(now, EventKind::LeaseReleased { worker, instance, key, value, deleted });
            Ok(deleted)
        })
        .await
    }

    /// The server blocks until the replica has everything the primary had sent by this
    /// worker's last command, or until the timeout: the replica's lag decides which comes
    /// first. A failover or a restart meanwhile breaks the connection.
    async fn wait_replicas(&self, timeout_ms: u64) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        let world = &self.link.world;
        let lost =
            || BackendError(format!("redis#{instance}: connection lost while waiting for the replica"));
        let asked = self
            .call(|_, state, now| {
                let Some(replica) = state.replica.as_ref().filter(|_| instance == 0) else { return Ok(None) };
                let generation = replica.generation;
                let Some(acked_at) = replica.acked_at(worker) else {
                    // the connection the worker's writes went on broke with the old primary
                    state.record(now, EventKind::RedisRefused { worker, instance });
                    return Err(lost());
                };
                let acked = acked_at.max(now) <= now + timeout_ms;
                Ok(Some((generation, if acked { acked_at.max(now) } else { now + timeout_ms }, acked)))
            })
            .await?;
        let Some((generation, answer_at, acked)) = asked else {
            return Ok(true); // no replica: `WAIT 0` answers at once
        };
        world.clock.sleep_ms(answer_at.saturating_sub(world.clock.now_ms())).await;
        let mut state = world.lock();
        let now = world.clock.now_ms();
        if state.replica.as_ref().is_none_or(|replica| replica.generation != generation) {
            state.record(now, EventKind::RedisRefused { worker, instance });
            return Err(lost());
        }
        state.record(now, EventKind::ReplicaWaited { worker, instance, acked });
        Ok(acked)
    }

    async fn renew_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<bool, BackendError> {
        let (worker, instance) = (self.worker(), self.instance);
        let ttl = ttl_ms.to_string();
        self.call(|world, state, now| {
            let command = Command::Eval { script, keys: &[key], args: &[value, &ttl] };
            let reply = state.redis(instance, command, now);
            failed(state, now, (worker, instance, key), "renew", &reply)?;
            let extended = reply == Reply::Int(1);
            state.record(now, EventKind::LeaseExtended { worker, instance, key: key.to_owned(), extended });
            world.changed.notify_one();
            Ok(extended)
        })
        .await
    }
}

/// A grant (`granted`) or a refusal of the lease, told to the epoch ledger and recorded;
/// returns `granted`.
fn told(
    (world, state, now): (&World, &mut State, u64),
    (worker, instance): (WorkerId, u8),
    (key, value, ttl_ms): (&str, &str, u64),
    granted: bool,
) -> bool {
    if granted {
        let at = state.moment(now);
        let epoch = state.ledger.granted(instance, key, value, worker, at);
        let (key, value) = (key.to_owned(), value.to_owned());
        state.record(now, EventKind::LeaseGranted { worker, instance, key, value, ttl_ms, epoch });
        world.changed.notify_one();
    } else {
        state.record(now, EventKind::LeaseRefused { worker, instance, key: key.to_owned() });
    }
    granted
}

/// A script's error reply, recorded and given to the worker as the failed command it is.
fn failed(
    state: &mut State,
    now: u64,
    (worker, instance, key): (WorkerId, u8, &str),
    script: &str,
    reply: &Reply,
) -> Result<(), BackendError> {
    let Reply::Error(text) = reply else { return Ok(()) };
    let (key, script, reply) = (key.to_owned(), script.to_owned(), text.clone());
    state.record(now, EventKind::ScriptFailed { worker, instance, key, script, reply });
    Err(BackendError(format!("redis#{instance} replied: {text}")))
}
