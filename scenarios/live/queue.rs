//! The job queue of a live run: a Redis stream read by a consumer group. A delivery that
//! is not acked within the visibility timeout is handed on (its idle time in the group
//! says how long it has waited), to the waiting worker the simulated queue would choose;
//! each delivery gets a receipt
//! of its own, and an ack is accepted only with the receipt of the job's latest delivery.
//! The coordinator closes the queue once every job is acked.

use crate::live::log::EventLog;
use fencesim_model::{Delivery, Job, JobId, JobQueue, MerchantId, WorkerId};
use fencesim_sim::EventKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const STREAM: &str = "jobs";
pub const GROUP: &str = "settle";
/// Hash: stream entry id -> "receipt:worker" of its latest delivery.
pub const CURRENT: &str = "jobs:current";
pub const RECEIPTS: &str = "jobs:receipts";
pub const ACKED: &str = "jobs:acked";
pub const CLOSED: &str = "jobs:closed";

/// Hash: worker -> the wall-clock microsecond it began to wait for a job.
pub const IDLE: &str = "jobs:idle";
/// Hash: worker -> the wall-clock microsecond it last asked.
pub const POLLED: &str = "jobs:polled";

/// Takes one job for `ARGV[2]`, by the simulated queue's rule: the job is the oldest
/// delivery idle for `ARGV[3]` ms or more, else the next new entry, and it goes to the
/// worker waiting for one (asked within the last `ARGV[5]` microseconds, or not asked yet
/// and within `ARGV[6]` microseconds of the story's start) that did not
/// hold it last, then the one that has waited longest, then the lowest id; the caller
/// gets it only if that is the caller. Returns the entry id, its fields, the new receipt,
/// the delivery count and the latest delivery before this one ("receipt:worker"); or,
/// when there is nothing to take, how many ms until the oldest delivery is due (-1: none
/// is pending), so that the caller asks again the moment a visibility timeout ends, as
/// the simulated queue hands a job on; or nothing, when the job is another's to take.
const DELIVER_LUA: &str = r#"
local group, me, now, fresh = ARGV[1], ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('HSET', KEYS[5], me, now)
if redis.call('HEXISTS', KEYS[4], me) == 0 then redis.call('HSET', KEYS[4], me, now) end
local id, pending = nil, false
local late = redis.call('XPENDING', KEYS[1], group, 'IDLE', ARGV[3], '-', '+', 1)
if #late > 0 then
  id, pending = late[1][1], true
else
  local last = '0-0'
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local fields = {}
    for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
    if fields['name'] == group then last = fields['last-delivered-id'] end
  end
  local next = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 1)
  if #next > 0 then id = next[1][1] end
end
if not id then
  -- nothing to take: how many ms until the oldest delivery is due (-1: none is pending)
  local soonest = -1
  for _, entry in ipairs(redis.call('XPENDING', KEYS[1], group, '-', '+', 100)) do
    local left = math.max(tonumber(ARGV[3]) - entry[3], 0)
    if soonest < 0 or left < soonest then soonest = left end
  end
  return soonest
end
local previous = redis.call('HGET', KEYS[2], id)
local held_by = previous and string.match(previous, ':(.*)$') or ''
if not pending then
  -- a duplicate delivery's entry names the worker that held the job
  local fields = redis.call('XRANGE', KEYS[1], id, id)[1][2]
  for i = 1, #fields, 2 do if fields[i] == 'last' then held_by = fields[i + 1] end end
end
local best = nil
local idle = redis.call('HGETALL', KEYS[4])
for i = 1, #idle, 2 do
  local w, since = idle[i], tonumber(idle[i + 1])
  local polled = redis.call('HGET', KEYS[5], w)
  -- a worker that has not asked yet waits from the story's start (its process is late)
  local waiting = (polled == false and now < since + tonumber(ARGV[6])) or (polled and now - tonumber(polled) <= fresh)
  if waiting then
    local key = {w == held_by and 1 or 0, since, w}
    if best == nil or key[1] < best[1] or (key[1] == best[1] and (key[2] < best[2] or (key[2] == best[2] and key[3] < best[3]))) then
      best = key
    end
  end
end
if best == nil or best[3] ~= me then return false end
local got
if pending then
  got = redis.call('XCLAIM', KEYS[1], group, me, ARGV[3], id)
else
  got = redis.call('XREADGROUP', 'GROUP', group, me, 'COUNT', 1, 'STREAMS', KEYS[1], '>')[1][2]
end
if #got == 0 then return false end
redis.call('HDEL', KEYS[4], me)
local count = redis.call('XPENDING', KEYS[1], group, id, id, 1)[1][4]
local receipt = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[2], id, receipt .. ':' .. me)
return {id, got[1][2], receipt, count, previous or ''}
"#;

/// Acks entry `ARGV[2]` if `ARGV[3]` is still its latest delivery.
const ACK_LUA: &str = r#"
if redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('INCR', KEYS[3])
return 1
"#;

/// Hands on every delivery worker `ARGV[2]` holds now, as the simulated queue's faults
/// do: a redelivery makes it due at once (its idle time set to the visibility timeout,
/// `ARGV[3]` ms, its delivery count kept), a duplicate puts a copy of the job on the stream
/// that names the worker as its last holder (and counts it among the jobs to ack).
/// Returns how many deliveries it handed on.
const HAND_ON_LUA: &str = r#"
local group, worker, visibility, duplicate = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local current = redis.call('HGETALL', KEYS[2])
local n = 0
for i = 1, #current, 2 do
  local id = current[i]
  if string.match(current[i + 1], ':(.*)$') == worker then
    n = n + 1
    if duplicate then
      local fields = redis.call('XRANGE', KEYS[1], id, id)[1][2]
      local f = {}
      for j = 1, #fields, 2 do f[fields[j]] = fields[j + 1] end
      redis.call('XADD', KEYS[1], '*', 'job', f['job'], 'merchant', f['merchant'], 'last', worker)
      redis.call('INCR', KEYS[3])
    else
      local count = redis.call('XPENDING', KEYS[1], group, id, id, 1)[1][4]
      redis.call('XCLAIM', KEYS[1], group, worker, 0, id, 'IDLE', visibility, 'RETRYCOUNT', count)
    end
  end
end
return n
"#;

/// List: the workers whose processes are ready (their database open), in the order they
/// said so.
pub const READY: &str = "jobs:ready";

/// How much later each worker begins to wait for its first job than the one before it:
/// the queue's rule (the worker that has waited longest) then hands the first jobs to the
/// lowest ids, as the simulated queue does with workers that all wait from the start.
pub const STAGGER_US: u64 = 5_000;

/// How long after the story's start a worker that has not asked yet still counts as
/// waiting: a process woken late by a busy machine keeps its place, and one that never
/// asks (stopped at the start) holds nobody up for long.
const LATE_START_US: u64 = 1_000_000;

/// The list the story's start is handed to `worker` on.
fn go_key(worker: WorkerId) -> String {
    format!("jobs:go:{worker}")
}

/// The worker's side of the start: says it is ready, then waits (at most `timeout`) for
/// the wall-clock microsecond the story starts at.
pub fn await_start(con: &mut redis::Connection, worker: WorkerId, timeout: Duration) -> Result<u64, String> {
    let said = redis::cmd("RPUSH").arg(READY).arg(worker.to_string()).query::<u64>(con);
    said.map_err(|e| format!("worker {worker} cannot say it is ready: {e}"))?;
    let got = redis::cmd("BLPOP")
        .arg(go_key(worker))
        .arg(timeout.as_secs_f64())
        .query::<Option<(String, u64)>>(con);
    match got.map_err(|e| format!("worker {worker} cannot hear the start: {e}"))? {
        Some((_, start_us)) => Ok(start_us),
        None => Err(format!("worker {worker} was not told to start within {} s", timeout.as_secs())),
    }
}

/// How many worker processes have said they are ready.
pub fn ready(con: &mut redis::Connection) -> redis::RedisResult<u64> {
    redis::cmd("LLEN").arg(READY).query(con)
}

/// Starts the story at `start_us` for `workers`: each counts as waiting for a job from the
/// start, in id order, and is told when the start is.
pub fn start(con: &mut redis::Connection, workers: u32, start_us: u64) -> redis::RedisResult<()> {
    for worker in (0..workers).map(WorkerId) {
        let since = start_us + STAGGER_US * u64::from(worker.0);
        redis::cmd("HSET").arg(IDLE).arg(worker.to_string()).arg(since).query::<()>(con)?;
        redis::cmd("RPUSH").arg(go_key(worker)).arg(start_us).query::<()>(con)?;
    }
    Ok(())
}

/// Hash key: how many copies of jobs duplicate deliveries put on the stream.
pub const COPIES: &str = "jobs:copies";

/// Hands on `worker`'s deliveries now: again to another worker (`duplicate`: while the
/// first is still in flight). `visibility_ms` is the visibility timeout in real
/// milliseconds.
pub fn hand_on(
    con: &mut redis::Connection,
    worker: WorkerId,
    duplicate: bool,
    visibility_ms: u64,
) -> redis::RedisResult<u32> {
    redis::cmd("EVAL")
        .arg(HAND_ON_LUA)
        .arg(3)
        .arg(STREAM)
        .arg(CURRENT)
        .arg(COPIES)
        .arg(GROUP)
        .arg(worker.to_string())
        .arg(visibility_ms)
        .arg(if duplicate { 1 } else { 0 })
        .query(con)
}

/// How many jobs must be acked before the queue closes: the world's, and every copy a
/// duplicate delivery made.
pub fn to_ack(con: &mut redis::Connection, jobs: u64) -> redis::RedisResult<u64> {
    let copies = redis::cmd("GET").arg(COPIES).query::<Option<u64>>(con)?.unwrap_or_default();
    Ok(jobs + copies)
}

/// Puts the jobs on a fresh stream, each as an entry with its id and merchant.
pub fn enqueue(con: &mut redis::Connection, jobs: &[Job]) -> redis::RedisResult<()> {
    redis::cmd("XGROUP").arg("CREATE").arg(STREAM).arg(GROUP).arg("$").arg("MKSTREAM").query::<()>(con)?;
    jobs.iter().try_for_each(|job| add(con, job))
}

/// Puts one more job on the stream (its refunds arrived while the run goes on).
pub fn add(con: &mut redis::Connection, job: &Job) -> redis::RedisResult<()> {
    redis::cmd("XADD")
        .arg(STREAM)
        .arg("*")
        .arg("job")
        .arg(job.id.0)
        .arg("merchant")
        .arg(job.merchant.0)
        .query::<String>(con)
        .map(|_| ())
}

/// How many jobs have been acked.
pub fn acked(con: &mut redis::Connection) -> redis::RedisResult<u64> {
    redis::cmd("GET").arg(ACKED).query::<Option<u64>>(con).map(Option::unwrap_or_default)
}

pub fn close(con: &mut redis::Connection) -> redis::RedisResult<()> {
    redis::cmd("SET").arg(CLOSED).arg(1).query(con)
}

/// A worker's end of the queue.
pub struct LiveQueue {
    con: Mutex<redis::Connection>,
    worker: WorkerId,
    /// The visibility timeout in real milliseconds.
    visibility_ms: u64,
    /// How long to wait before asking again when there is nothing to take.
    poll: Duration,
    /// Each delivery this worker holds: its receipt and stream entry.
    entries: Mutex<Vec<(u32, String)>>,
    log: Arc<EventLog>,
}

type Taken = (String, Vec<String>, u32, u32, String);

/// What asking the queue gave.
enum Asked {
    Taken(Taken),
    /// Nothing to take; the oldest delivery is due this much later.
    DueIn(Duration),
    /// Nothing to take (none pending, or the job is another worker's to take).
    Nothing,
}

/// The value of field `name` in an entry's flat list of names and values.
fn field(fields: &[String], name: &str) -> Option<u64> {
    fields.chunks(2).find(|pair| pair[0] == name).and_then(|pair| pair.get(1)?.parse().ok())
}

/// "receipt:worker" back into its parts.
fn delivery_of(text: &str) -> Option<(u32, WorkerId)> {
    let (receipt, worker) = text.split_once(':')?;
    Some((receipt.parse().ok()?, worker.parse().ok()?))
}

impl LiveQueue {
    pub fn new(
        con: redis::Connection,
        worker: WorkerId,
        visibility_ms: u64,
        poll: Duration,
        log: Arc<EventLog>,
    ) -> LiveQueue {
        LiveQueue { con: Mutex::new(con), worker, visibility_ms, poll, entries: Mutex::new(Vec::new()), log }
    }

    fn closed(&self) -> bool {
        let mut con = self.con.lock().unwrap_or_else(|p| p.into_inner());
        // A queue that cannot be asked is as good as closed: the worker stops.
        redis::cmd("EXISTS").arg(CLOSED).query::<bool>(&mut *con).unwrap_or(true)
    }

    fn take(&self) -> Asked {
        let mut con = self.con.lock().unwrap_or_else(|p| p.into_inner());
        // a worker counts as waiting while it asks at least every third poll
        let fresh_us = (self.poll.as_micros() as u64 * 3).max(5_000);
        let answer = redis::cmd("EVAL")
            .arg(DELIVER_LUA)
            .arg(5)
            .arg(STREAM)
            .arg(CURRENT)
            .arg(RECEIPTS)
            .arg(IDLE)
            .arg(POLLED)
            .arg(GROUP)
            .arg(self.worker.to_string())
            .arg(self.visibility_ms)
            .arg(crate::live::clock::wall_us())
            .arg(fresh_us)
            .arg(LATE_START_US)
            .query::<redis::Value>(&mut *con);
        match answer {
            Ok(redis::Value::Int(ms)) if ms >= 0 => Asked::DueIn(Duration::from_millis(ms as u64)),
            Ok(value @ redis::Value::Array(_)) => {
                redis::from_redis_value::<Taken>(value).map_or(Asked::Nothing, Asked::Taken)
            }
            _ => Asked::Nothing,
        }
    }

    /// Records the delivery (and the one it took over) and makes it the worker's.
    fn delivered(&self, taken: Taken) -> Option<Delivery> {
        let (entry, fields, receipt, count, previous) = taken;
        let job = Job {
            id: JobId(field(&fields, "job")? as u32),
            merchant: MerchantId(field(&fields, "merchant")? as u32),
        };
        if let Some((receipt, worker)) = delivery_of(&previous) {
            self.log.record(EventKind::VisibilityExpired { job: job.id, worker, receipt });
        }
        self.log.record(EventKind::JobDelivered {
            job: job.id,
            worker: self.worker,
            receipt,
            delivery: count,
        });
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).push((receipt, entry));
        Some(Delivery { job, receipt })
    }
}

impl JobQueue for LiveQueue {
    /// Waits for a job. The wait is part of the story between the worker's refund calls, as
    /// the simulated worker's is (`live::pace`): without it, a worker's first call after
    /// waiting 22 ms for a redelivery was answered without its latency, 12 ms before the
    /// simulated one, and a fresh failure's check came before the lease expired.
    async fn receive(&self) -> Option<Delivery> {
        let started = std::time::Instant::now();
        loop {
            if self.closed() {
                return None;
            }
            let wait = match self.take() {
                Asked::Taken(taken) => match self.delivered(taken) {
                    Some(delivery) => {
                        crate::live::clock::slept(started.elapsed());
                        crate::live::clock::due(started.elapsed());
                        crate::live::clock::woke();
                        return Some(delivery);
                    }
                    None => self.poll,
                },
                // a tenth of a millisecond more: the stream counts idle time in whole ms
                Asked::DueIn(due) => (due + Duration::from_micros(100)).min(self.poll),
                Asked::Nothing => self.poll,
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn ack(&self, delivery: Delivery) -> bool {
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let at = entries.iter().position(|(receipt, _)| *receipt == delivery.receipt);
            at.map(|at| entries.remove(at).1)
        };
        let Some(entry) = entry else { return false };
        let current = format!("{}:{}", delivery.receipt, self.worker);
        let accepted = {
            let mut con = self.con.lock().unwrap_or_else(|p| p.into_inner());
            let cmd = redis::cmd("EVAL")
                .arg(ACK_LUA)
                .arg(3)
                .arg(STREAM)
                .arg(CURRENT)
                .arg(ACKED)
                .arg(GROUP)
                .arg(&entry)
                .arg(&current)
                .clone();
            cmd.query::<i64>(&mut *con).map(|n| n == 1).unwrap_or(false)
        };
        let (job, worker, receipt) = (delivery.job.id, self.worker, delivery.receipt);
        self.log.record(EventKind::JobAcked { job, worker, receipt, accepted });
        accepted
    }
}
