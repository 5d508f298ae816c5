//! The model's Redis port over a real redis-server, one connection per worker process.
//! Every command records what it did to a lease, as the simulated Redis does, so that the
//! same checkers can judge the run; the epochs are worked out when the files are merged.

use crate::live::clock::LiveClock;
use crate::live::faults::LiveFaults;
use crate::live::log::EventLog;
use crate::mutant::RawRedis;
use fencesim_model::{BackendError, CounterAdmin, RedisInstance, Token, WorkerId};
use fencesim_sim::{EventKind, Hop};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// A team's acquisition script, run inside one that reads the key before and after it and
/// the server's clock, and answers `{before, answer, after, seconds, microseconds}` (false
/// for a missing key or a nil answer). Its first line is the script's first line, so that
/// an error names the script's own line; its SHA is put back in an error's words by the
/// caller.
fn watched(script: &str) -> String {
    format!(
        "local before = redis.call('GET', KEYS[1]) local answer = (function() {script}\n\
         end)() if answer == nil then answer = false end \
         local now = redis.call('TIME') \
         return {{before, answer, redis.call('GET', KEYS[1]), now[1], now[2]}}"
    )
}

/// The watched acquisition's answer: the key before and after, the script's answer, and
/// when the server ran it, in wall-clock microseconds.
struct Watched {
    before: Option<String>,
    answer: Option<redis::Value>,
    after: Option<String>,
    at_us: u64,
}

impl Watched {
    fn read(reply: redis::Value) -> Result<Watched, BackendError> {
        let redis::Value::Array(mut parts) = reply else {
            return Err(BackendError(format!("the watched acquisition answered {reply:?}")));
        };
        parts.resize(5, redis::Value::Nil);
        let text = |part: &redis::Value| match part {
            redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        };
        let number = |part: &redis::Value| text(part).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
        let at_us = number(&parts[3]) * 1_000_000 + number(&parts[4]);
        // an error reply the script returned (a `redis.pcall`'s) is its own error reply
        if let redis::Value::ServerError(error) = &parts[1] {
            let words = format!("{} {}", error.code(), error.details().unwrap_or_default());
            return Err(BackendError(format!("{REPLIED}{}", words.trim_end())));
        }
        let answer = Some(parts[1].clone()).filter(|answer| *answer != redis::Value::Nil);
        Ok(Watched { before: text(&parts[0]), answer, after: text(&parts[2]), at_us })
    }
}

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
    /// None after the server went away (a restart): the next command connects again.
    con: Arc<Mutex<Option<redis::Connection>>>,
    url: String,
    worker: WorkerId,
    log: Arc<EventLog>,
    /// TTLs are the story's milliseconds; the server counts real ones.
    clock: LiveClock,
    faults: Arc<LiveFaults>,
}

/// How a server's error reply begins, as a worker's port is given it.
const REPLIED: &str = "redis#0 replied: ";

fn backend(e: redis::RedisError) -> BackendError {
    BackendError(format!("redis: {e}"))
}

impl LiveRedis {
    pub fn new(
        url: &str,
        worker: WorkerId,
        log: Arc<EventLog>,
        clock: LiveClock,
        faults: Arc<LiveFaults>,
    ) -> Result<LiveRedis, String> {
        let con = Arc::new(Mutex::new(Some(connect(url)?)));
        Ok(LiveRedis { con, url: url.to_owned(), worker, log, clock, faults })
    }

    /// A TTL of the story as the server's milliseconds (at least one).
    fn real_ms(&self, ttl_ms: u64) -> u64 {
        (self.clock.real(ttl_ms).as_millis() as u64).max(1)
    }

    /// Runs one command and lets the process's other task (a renewal) have a turn.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, BackendError> {
        self.query_paced(cmd, true).await
    }

    /// `query`; `paced`: the batch sends it (a renewal, beside the batch, does not).
    async fn query_paced<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        paced: bool,
    ) -> Result<T, BackendError> {
        self.faults.call_paced(Hop::Redis, paced).await;
        let reply = self.send(cmd);
        self.faults.answered(Hop::Redis).await;
        tokio::task::yield_now().await;
        reply
    }

    /// Sends `cmd` on the connection, made again if the last one was lost; a server that
    /// is down (a restart) refuses it, as the simulated Redis does, and that is recorded.
    fn send<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, BackendError> {
        let mut con = self.con.lock().unwrap_or_else(|p| p.into_inner());
        let lost =
            |e: &redis::RedisError| e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal();
        let mut reply = Self::on(&mut con, &self.url, cmd);
        // a connection from before a restart fails at once, the command unsent to the new
        // server: it goes again on a new connection
        if reply.as_ref().is_err_and(lost) {
            *con = None;
            reply = Self::on(&mut con, &self.url, cmd);
        }
        match reply {
            Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() => {
                *con = None;
                self.log.record(EventKind::RedisRefused { worker: self.worker, instance: 0 });
                Err(BackendError(format!("redis#0: connection refused (restarting): {e}")))
            }
            Err(e) if e.code().is_some() => {
                let words = format!("{} {}", e.code().unwrap_or_default(), e.detail().unwrap_or_default());
                Err(BackendError(format!("{REPLIED}{}", words.trim_end())))
            }
            other => other.map_err(backend),
        }
    }

    /// A script's answer; an error reply is recorded, in the server's words, and given to
    /// the worker as the failed command it is, as the simulated Redis does. `renamed`: a
    /// script sent inside another, whose SHA the words then give for the inner one's.
    async fn script(
        &self,
        cmd: &redis::Cmd,
        key: &str,
        script: &str,
        renamed: Option<(&str, &str)>,
    ) -> Result<redis::Value, BackendError> {
        let sha = fencesim_sim::redis::sha1_hex;
        let paced = script != "renew";
        let answer = self.query_paced(cmd, paced).await.map_err(|BackendError(text)| match renamed {
            Some((sent, inner)) => BackendError(text.replace(&sha(sent), &sha(inner))),
            None => BackendError(text),
        });
        self.failed(key, script, &answer);
        answer
    }

    /// A script's error reply, if `answer` is one, recorded in the server's words.
    fn failed<T>(&self, key: &str, script: &str, answer: &Result<T, BackendError>) {
        if let Err(BackendError(text)) = answer {
            if let Some(reply) = text.strip_prefix(REPLIED) {
                let (worker, key, script, reply) =
                    (self.worker, key.to_owned(), script.to_owned(), reply.to_owned());
                self.log.record(EventKind::ScriptFailed { worker, instance: 0, key, script, reply });
            }
        }
    }

    /// Sends `cmd` on `con`, connecting first if there is none.
    fn on<T: redis::FromRedisValue>(
        con: &mut Option<redis::Connection>,
        url: &str,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        if con.is_none() {
            *con = Some(redis::Client::open(url)?.get_connection()?);
        }
        cmd.query(con.as_mut().expect("a connection"))
    }

    /// Records a grant (`granted`) or a refusal of the lease, at `at_us` or now; returns
    /// `granted`.
    fn told(&self, key: &str, value: &str, ttl_ms: u64, granted: bool, at_us: Option<u64>) -> bool {
        let (worker, key) = (self.worker, key.to_owned());
        let kind = match granted {
            true => EventKind::LeaseGranted {
                worker,
                instance: 0,
                key,
                value: value.to_owned(),
                ttl_ms,
                epoch: None,
            },
            false => EventKind::LeaseRefused { worker, instance: 0, key },
        };
        self.record(kind, at_us);
        granted
    }

    /// Records `kind` at `at_us` (the server's time), or now if none.
    fn record(&self, kind: EventKind, at_us: Option<u64>) {
        match at_us {
            Some(at_us) => self.log.record_at(at_us, kind),
            None => self.log.record(kind),
        }
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
        Ok(self.told(key, value, ttl_ms, granted.is_some(), None))
    }

    /// A team's own acquisition: 1 or `OK` is a grant, 0 or nil a refusal, as the
    /// simulated Redis reads them. The history tells what the script did to the key, read
    /// in the same script before and after it (`watched`): a key it gave the worker's value
    /// is a grant, a key it took from a live holder a SET without NX, as in the simulation.
    async fn acquire_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<bool, BackendError> {
        let ttl = self.real_ms(ttl_ms).to_string();
        let watched = watched(script);
        let cmd = Self::eval(&watched, key, &[value, &ttl]);
        let reply = self.script(&cmd, key, "acquire", Some((&watched, script))).await?;
        let read = Watched::read(reply);
        // an error reply the script returned is recorded as one the server gave
        self.failed(key, "acquire", &read);
        let Watched { before, answer, after, at_us } = read?;
        let granted = match answer {
            Some(redis::Value::Int(1) | redis::Value::Okay) => true,
            Some(redis::Value::SimpleString(status)) if status == "OK" => true,
            Some(redis::Value::Int(0)) | None => false,
            Some(other) => {
                let said = format!("the acquisition script returned {other:?}");
                return Err(BackendError(format!("{said}, not 1, 0, OK or nil")));
            }
        };
        // Dated by the server's clock, in the order the server ran the scripts: two
        // workers' acquisitions in the same millisecond, dated by their answers, were
        // merged the other way round now and then, and a theft read as the holder's grant.
        // A server whose clock a fault moves is dated by the answer.
        let at_us = Some(at_us).filter(|_| self.faults.outside.clock_file.is_none());
        let took = after.as_deref() == Some(value) && before.as_deref() != Some(value);
        if before.is_none() || !took {
            self.told(key, value, ttl_ms, took, at_us);
            return Ok(granted);
        }
        let (worker, key, value) = (self.worker, key.to_owned(), value.to_owned());
        self.record(EventKind::LeaseSet { worker, instance: 0, key, value, ttl_ms }, at_us);
        Ok(granted)
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

    async fn release_script(&self, script: &str, key: &str, value: &str) -> Result<bool, BackendError> {
        let answer = self.script(&Self::eval(script, key, &[value]), key, "release", None).await?;
        let deleted = answer == redis::Value::Int(1);
        let (worker, key, value) = (self.worker, key.to_owned(), value.to_owned());
        self.log.record(EventKind::LeaseReleased { worker, instance: 0, key, value, deleted });
        Ok(deleted)
    }

    async fn renew_script(
        &self,
        script: &str,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<bool, BackendError> {
        let ttl = self.real_ms(ttl_ms).to_string();
        let answer = self.script(&Self::eval(script, key, &[value, &ttl]), key, "renew", None).await?;
        let extended = answer == redis::Value::Int(1);
        let (worker, key) = (self.worker, key.to_owned());
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
        // an expiry of 0 deletes the key at once, on the server as in the simulation
        let ttl = if ttl_ms == 0 { 0 } else { self.real_ms(ttl_ms) }.to_string();
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

/// Where the deployment's counters are placed before the run, and seeded by the start-up
/// routine after a restart, over a plain connection. The first command that fails is
/// kept, for the caller to report.
pub struct Admin<'a> {
    con: RefCell<&'a mut redis::Connection>,
    failed: RefCell<Option<String>>,
}

impl<'a> Admin<'a> {
    pub fn new(con: &'a mut redis::Connection) -> Admin<'a> {
        Admin { con: RefCell::new(con), failed: RefCell::new(None) }
    }

    /// The first command that failed, if one did.
    pub fn failed(&self) -> Option<String> {
        self.failed.borrow().clone()
    }

    fn fail(&self, what: String) {
        self.failed.borrow_mut().get_or_insert(what);
    }
}

impl CounterAdmin for Admin<'_> {
    fn has(&self, key: &str) -> bool {
        let answer = redis::cmd("EXISTS").arg(key).query::<bool>(&mut **self.con.borrow_mut());
        answer.unwrap_or_else(|e| {
            self.fail(format!("EXISTS {key}: {e}"));
            true
        })
    }

    fn set(&mut self, key: &str, value: i64) {
        let answer = redis::cmd("SET").arg(key).arg(value).query::<()>(&mut **self.con.borrow_mut());
        if let Err(e) = answer {
            self.fail(format!("SET {key} {value}: {e}"));
        }
    }
}
