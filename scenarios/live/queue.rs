//! The job queue of a live run: a Redis stream read by a consumer group. A delivery that
//! is not acked within the visibility timeout is claimed by the next worker that asks
//! (its idle time in the group says how long it has waited); each delivery gets a receipt
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

/// Takes one job for `ARGV[2]`: a delivery idle for `ARGV[3]` ms or more first, else a new
/// one. Returns the entry id, its fields, the new receipt, the delivery count and the
/// latest delivery before this one ("receipt:worker"), or nothing.
const DELIVER_LUA: &str = r#"
local got = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], '0-0', 'COUNT', 1)[2]
if #got == 0 then
  local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
  if not read then return false end
  got = read[1][2]
end
if #got == 0 then return false end
local id = got[1][1]
local count = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)[1][4]
local previous = redis.call('HGET', KEYS[2], id)
local receipt = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[2], id, receipt .. ':' .. ARGV[2])
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

/// Puts the jobs on a fresh stream, each as an entry with its id and merchant.
pub fn enqueue(con: &mut redis::Connection, jobs: &[Job]) -> redis::RedisResult<()> {
    redis::cmd("XGROUP").arg("CREATE").arg(STREAM).arg(GROUP).arg("$").arg("MKSTREAM").query::<()>(con)?;
    for job in jobs {
        redis::cmd("XADD")
            .arg(STREAM)
            .arg("*")
            .arg("job")
            .arg(job.id.0)
            .arg("merchant")
            .arg(job.merchant.0)
            .query::<String>(con)?;
    }
    Ok(())
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

    fn take(&self) -> Option<Taken> {
        let mut con = self.con.lock().unwrap_or_else(|p| p.into_inner());
        redis::cmd("EVAL")
            .arg(DELIVER_LUA)
            .arg(3)
            .arg(STREAM)
            .arg(CURRENT)
            .arg(RECEIPTS)
            .arg(GROUP)
            .arg(self.worker.to_string())
            .arg(self.visibility_ms)
            .query::<Option<Taken>>(&mut *con)
            .ok()
            .flatten()
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
    async fn receive(&self) -> Option<Delivery> {
        loop {
            if self.closed() {
                return None;
            }
            if let Some(delivery) = self.take().and_then(|taken| self.delivered(taken)) {
                return Some(delivery);
            }
            tokio::time::sleep(self.poll).await;
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
