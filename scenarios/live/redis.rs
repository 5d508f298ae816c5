//! The model's Redis port over a real redis-server, one connection per worker process.
//! Every command records what it did to a lease, as the simulated Redis does, so that the
//! same checkers can judge the run; the epochs are worked out when the files are merged.

use crate::live::clock::LiveClock;
use crate::live::faults::LiveFaults;
use crate::live::log::EventLog;
use crate::mutant::RawRedis;
use fencesim_model::{BackendError, CounterAdmin, RedisInstance, Token, WorkerId};
use fencesim_sim::redis::{COMPARE_AND_DELETE_LUA, COMPARE_AND_EXTEND_LUA};
use fencesim_sim::{EventKind, Hop};
use std::sync::{Arc, Mutex};

/// Opens a connection to the server at `url`, or says why not.
pub fn connect(url: &str) -> Result<redis::Connection, String> {
    let client = redis::Client::open(url).map_err(|e| format!("'{url}' is not a Redis URL: {e}"))?;
    let mut con = client
        .get_connection_with_timeout(std::time::Duration::from_secs(2))
        .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
    redis::cmd("PING")
        .query::<String>(&mut con)
        .map_err(|e| format!("Redis at {url} does not answer PING: {e}"))?;
    Ok(con)
}

/// A worker's connection to the one Redis instance of a live run.
#[derive(Clone)]
pub struct LiveRedis {
    con: Arc<Mutex<redis::Connection>>,
    worker: WorkerId,
    log: Arc<EventLog>,
    /// TTLs are the story's milliseconds; the server counts real ones.
    clock: LiveClock,
    faults: Arc<LiveFaults>,
}

fn backend(e: redis::RedisError) -> BackendError {
    BackendError(format!("redis: {e}"))
}

impl LiveRedis {
    pub fn new(
        con: redis::Connection,
        worker: WorkerId,
        log: Arc<EventLog>,
        clock: LiveClock,
        faults: Arc<LiveFaults>,
    ) -> LiveRedis {
        LiveRedis { con: Arc::new(Mutex::new(con)), worker, log, clock, faults }
    }

    /// A TTL of the story as the server's milliseconds (at least one).
    fn real_ms(&self, ttl_ms: u64) -> u64 {
        (self.clock.real(ttl_ms).as_millis() as u64).max(1)
    }

    /// Runs one command and lets the process's other task (a renewal) have a turn.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, BackendError> {
        self.faults.call(Hop::Redis).await;
        let reply = {
            let mut con = self.con.lock().unwrap_or_else(|p| p.into_inner());
            cmd.query(&mut *con).map_err(backend)
        };
        self.faults.answered(Hop::Redis).await;
        tokio::task::yield_now().await;
        reply
    }

    fn eval(script: &str, key: &str, args: &[&str]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(1).arg(key);
        for arg in args {
            cmd.arg(*arg);
        }
        cmd
    }
}

impl RedisInstance for LiveRedis {
    async fn set_nx_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let cmd = redis::cmd("SET").arg(key).arg(value).arg("NX").arg("PX").arg(self.real_ms(ttl_ms)).clone();
        let granted: Option<String> = self.query(&cmd).await?;
        let (worker, key) = (self.worker, key.to_owned());
        self.log.record(match granted {
            Some(_) => EventKind::LeaseGranted {
                worker,
                instance: 0,
                key,
                value: value.to_owned(),
                ttl_ms,
                epoch: None,
            },
            None => EventKind::LeaseRefused { worker, instance: 0, key },
        });
        Ok(granted.is_some())
    }

    async fn get(&self, key: &str) -> Result<Option<String>, BackendError> {
        let holder: Option<String> = self.query(redis::cmd("GET").arg(key)).await?;
        let (worker, key) = (self.worker, key.to_owned());
        self.log.record(EventKind::LeaseRead { worker, instance: 0, key, holder: holder.clone() });
        Ok(holder)
    }

    /// `GETDEL`: a `DEL` that also says whose lease it removed, in the same step.
    async fn del(&self, key: &str) -> Result<bool, BackendError> {
        let holder: Option<String> = self.query(redis::cmd("GETDEL").arg(key)).await?;
        let (worker, key) = (self.worker, key.to_owned());
        self.log.record(EventKind::LeaseDeleted { worker, instance: 0, key, holder: holder.clone() });
        Ok(holder.is_some())
    }

    async fn incr(&self, key: &str) -> Result<i64, BackendError> {
        let n: i64 = self.query(redis::cmd("INCR").arg(key)).await?;
        self.log.record(EventKind::TokenIssued { worker: self.worker, key: key.to_owned(), token: Token(n) });
        Ok(n)
    }

    async fn compare_and_delete(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let deleted: i64 = self.query(&Self::eval(COMPARE_AND_DELETE_LUA, key, &[value])).await?;
        let (worker, key, value, deleted) = (self.worker, key.to_owned(), value.to_owned(), deleted == 1);
        self.log.record(EventKind::LeaseReleased { worker, instance: 0, key, value, deleted });
        Ok(deleted)
    }

    async fn compare_and_extend(&self, key: &str, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let ttl = self.real_ms(ttl_ms).to_string();
        let extended: i64 = self.query(&Self::eval(COMPARE_AND_EXTEND_LUA, key, &[value, &ttl])).await?;
        let (worker, key, extended) = (self.worker, key.to_owned(), extended == 1);
        self.log.record(EventKind::LeaseExtended { worker, instance: 0, key, extended });
        Ok(extended)
    }

    /// A live run's Redis has no replica: `WAIT 0 0` answers at once.
    async fn wait_replicas(&self, _timeout_ms: u64) -> Result<bool, BackendError> {
        let _acked: i64 = self.query(redis::cmd("WAIT").arg(0).arg(0)).await?;
        Ok(true)
    }
}

/// Re-arms a key's expiry and says whose lease it was, in one step, as the simulated
/// Redis records a `PEXPIRE`.
const PEXPIRE_SAYING_HOLDER_LUA: &str = "local v = redis.call('GET', KEYS[1]) \
     if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 1 then return v else return false end";

/// The commands only a planted bug sends, recorded as the simulated Redis records them.
impl RawRedis for LiveRedis {
    async fn set_nx(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        let taken: bool = self.query(redis::cmd("SETNX").arg(key).arg(value)).await?;
        let (worker, key, value) = (self.worker, key.to_owned(), value.to_owned());
        self.log.record(match taken {
            true => EventKind::LeaseGranted { worker, instance: 0, key, value, ttl_ms: 0, epoch: None },
            false => EventKind::LeaseRefused { worker, instance: 0, key },
        });
        Ok(taken)
    }

    async fn pexpire(&self, key: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let ttl = self.real_ms(ttl_ms).to_string();
        let holder: Option<String> = self.query(&Self::eval(PEXPIRE_SAYING_HOLDER_LUA, key, &[&ttl])).await?;
        let (worker, key, rearmed) = (self.worker, key.to_owned(), holder.is_some());
        self.log.record(EventKind::LeaseRearmed { worker, instance: 0, key, holder, ttl_ms });
        Ok(rearmed)
    }

    async fn set_px(&self, key: &str, value: &str, ttl_ms: u64) -> Result<(), BackendError> {
        let cmd = redis::cmd("SET").arg(key).arg(value).arg("PX").arg(self.real_ms(ttl_ms)).clone();
        let _: String = self.query(&cmd).await?;
        let (worker, key, value) = (self.worker, key.to_owned(), value.to_owned());
        self.log.record(EventKind::LeaseSet { worker, instance: 0, key, value, ttl_ms });
        Ok(())
    }
}

/// Where the deployment's counters are placed before the run, over a plain connection.
/// The first command that fails is kept, for the caller to report.
pub struct Admin<'a> {
    pub con: &'a mut redis::Connection,
    pub failed: Option<String>,
}

impl CounterAdmin for Admin<'_> {
    fn has(&self, _key: &str) -> bool {
        // Asked only by a Redis start-up routine, which a live run does not have.
        false
    }

    fn set(&mut self, key: &str, value: i64) {
        if let Err(e) = redis::cmd("SET").arg(key).arg(value).query::<()>(self.con) {
            self.failed.get_or_insert(format!("SET {key} {value}: {e}"));
        }
    }
}
