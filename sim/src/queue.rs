//! The simulated job queue: at-least-once delivery with a visibility timeout.
//!
//! Workers form one consumer group. The core hands a visible job to an idle worker by a
//! fixed rule (a worker that did not hold the job last, then the one idle longest, then
//! the lowest id), so the choice never depends on which task the scheduler polls first.
//! An unacked delivery becomes visible again when its timeout passes; its holder can still
//! ack it until the queue hands it to someone (as a stream's pending entry stays its
//! consumer's until another claims it).

use fencesim_model::{Delivery, Job, JobId, WorkerId};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobState {
    Visible,
    Assigned { worker: WorkerId, receipt: u32 },
    InFlight { worker: WorkerId, receipt: u32, visible_at_ms: u64 },
    Done,
}

#[derive(Clone, Debug)]
struct JobSlot {
    job: Job,
    state: JobState,
    last_holder: Option<WorkerId>,
    deliveries: u32,
    /// The receipt of the latest delivery: it acks the job until the job is delivered
    /// again, even once its visibility timeout has passed.
    receipt: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Consumer {
    Idle { since_ms: u64 },
    Busy,
}

/// Something the queue did, for the world to record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueEvent {
    Delivered { job: JobId, worker: WorkerId, receipt: u32, delivery: u32 },
    VisibilityExpired { job: JobId, worker: WorkerId, receipt: u32, at_ms: u64 },
}

/// The queue's state, indexed so that every operation costs what it touches, not the
/// number of jobs ever queued: jobs done stay in `jobs` and are never looked at again.
#[derive(Clone, Debug)]
pub struct QueueCore {
    jobs: Vec<JobSlot>,
    consumers: Vec<Consumer>,
    visibility_timeout_ms: u64,
    next_receipt: u32,
    closed: bool,
    /// Slots that are `Visible`, by index (the order jobs are handed out in).
    visible: BTreeSet<usize>,
    /// The slot `Assigned` to each worker, if any (a worker is handed one at a time).
    assigned: Vec<Option<usize>>,
    /// Slots `InFlight`, by when they become visible again.
    in_flight: BTreeSet<(u64, usize)>,
    /// Slots by the receipt that can ack them (`InFlight`, or `Visible` again and not yet
    /// handed on).
    by_receipt: BTreeMap<u32, usize>,
    /// Slots not `Done`.
    open: usize,
}

impl QueueCore {
    pub fn new(workers: usize, visibility_timeout_ms: u64) -> QueueCore {
        QueueCore {
            jobs: Vec::new(),
            consumers: vec![Consumer::Idle { since_ms: 0 }; workers],
            visibility_timeout_ms,
            next_receipt: 1,
            closed: false,
            visible: BTreeSet::new(),
            assigned: vec![None; workers],
            in_flight: BTreeSet::new(),
            by_receipt: BTreeMap::new(),
            open: 0,
        }
    }

    fn push(&mut self, slot: JobSlot) {
        self.visible.insert(self.jobs.len());
        self.jobs.push(slot);
        self.open += 1;
    }

    pub fn enqueue(&mut self, job: Job, out: &mut Vec<QueueEvent>) {
        self.push(JobSlot { job, state: JobState::Visible, last_holder: None, deliveries: 0, receipt: None });
        self.assign(out);
    }

    /// An in-flight slot becomes visible again; its event says when.
    fn expire(&mut self, index: usize, at_ms: u64, out: &mut Vec<QueueEvent>) {
        let slot = &mut self.jobs[index];
        let JobState::InFlight { worker, receipt, visible_at_ms } = slot.state else { return };
        slot.state = JobState::Visible;
        self.in_flight.remove(&(visible_at_ms, index));
        self.visible.insert(index);
        out.push(QueueEvent::VisibilityExpired { job: slot.job.id, worker, receipt, at_ms });
    }

    /// Makes timed-out deliveries visible again (in job order) and hands visible jobs to
    /// idle workers.
    pub fn tick(&mut self, now_ms: u64, out: &mut Vec<QueueEvent>) {
        let mut due: Vec<(usize, u64)> =
            self.in_flight.range(..(now_ms + 1, 0)).map(|&(at, index)| (index, at)).collect();
        due.sort_unstable();
        for (index, at) in due {
            self.expire(index, at, out);
        }
        self.assign(out);
    }

    fn assign(&mut self, out: &mut Vec<QueueEvent>) {
        while let Some(&index) = self.visible.first() {
            let slot = &self.jobs[index];
            let chosen = self
                .consumers
                .iter()
                .enumerate()
                .filter_map(|(i, c)| match c {
                    Consumer::Idle { since_ms } => Some((WorkerId(i as u32), *since_ms)),
                    Consumer::Busy => None,
                })
                .min_by_key(|&(w, since)| (Some(w) == slot.last_holder, since, w));
            let Some((worker, _)) = chosen else { return };
            let receipt = self.next_receipt;
            self.next_receipt += 1;
            let slot = &mut self.jobs[index];
            if let Some(handed_on) = slot.receipt.replace(receipt) {
                self.by_receipt.remove(&handed_on);
            }
            slot.deliveries += 1;
            slot.last_holder = Some(worker);
            slot.state = JobState::Assigned { worker, receipt };
            self.visible.remove(&index);
            self.assigned[worker.0 as usize] = Some(index);
            self.consumers[worker.0 as usize] = Consumer::Busy;
            out.push(QueueEvent::Delivered { job: slot.job.id, worker, receipt, delivery: slot.deliveries });
        }
    }

    /// The worker asks for its next job: the one assigned to it, if any; otherwise it
    /// becomes idle and waits.
    pub fn receive(&mut self, worker: WorkerId, now_ms: u64, out: &mut Vec<QueueEvent>) -> Option<Delivery> {
        if let Some(delivery) = self.take_assigned(worker, now_ms) {
            return Some(delivery);
        }
        if self.consumers[worker.0 as usize] == Consumer::Busy {
            self.consumers[worker.0 as usize] = Consumer::Idle { since_ms: now_ms };
            self.assign(out);
        }
        self.take_assigned(worker, now_ms)
    }

    fn take_assigned(&mut self, worker: WorkerId, now_ms: u64) -> Option<Delivery> {
        let index = self.assigned[worker.0 as usize].take()?;
        let slot = &mut self.jobs[index];
        let JobState::Assigned { receipt, .. } = slot.state else { return None };
        let visible_at_ms = now_ms + self.visibility_timeout_ms;
        slot.state = JobState::InFlight { worker, receipt, visible_at_ms };
        self.in_flight.insert((visible_at_ms, index));
        self.by_receipt.insert(receipt, index);
        Some(Delivery { job: slot.job, receipt })
    }

    /// Is a delivery waiting for this worker?
    pub fn has_assigned(&self, worker: WorkerId) -> bool {
        self.assigned[worker.0 as usize].is_some()
    }

    /// Acks a delivery. Refused (`false`) once the job was handed to someone else (or
    /// acked): a delivery whose timeout passed still acks while nobody has taken it.
    pub fn ack(&mut self, delivery: Delivery) -> bool {
        let Some(index) = self.by_receipt.remove(&delivery.receipt) else { return false };
        match self.jobs[index].state {
            JobState::InFlight { visible_at_ms, .. } => {
                self.in_flight.remove(&(visible_at_ms, index));
            }
            _ => {
                self.visible.remove(&index);
            }
        }
        self.jobs[index].state = JobState::Done;
        self.open -= 1;
        true
    }

    /// The in-flight slots of `worker`, in job order.
    fn held_by(&self, worker: WorkerId) -> Vec<usize> {
        let mut held: Vec<usize> = self
            .in_flight
            .iter()
            .map(|&(_, index)| index)
            .filter(|&index| matches!(self.jobs[index].state, JobState::InFlight { worker: w, .. } if w == worker))
            .collect();
        held.sort_unstable();
        held
    }

    /// The queue gives up on `worker`'s delivery now, as if its timeout had passed.
    pub fn redeliver_from(&mut self, worker: WorkerId, now_ms: u64, out: &mut Vec<QueueEvent>) -> bool {
        let held = self.held_by(worker);
        for &index in &held {
            self.expire(index, now_ms, out);
        }
        self.assign(out);
        !held.is_empty()
    }

    /// The queue delivers `worker`'s job a second time, to someone else, while the first
    /// delivery is still in flight.
    pub fn duplicate_from(&mut self, worker: WorkerId, out: &mut Vec<QueueEvent>) -> bool {
        let held = self.held_by(worker);
        for &index in &held {
            let JobSlot { job, deliveries, .. } = self.jobs[index];
            let copy = JobSlot {
                job,
                state: JobState::Visible,
                last_holder: Some(worker),
                deliveries,
                receipt: None,
            };
            self.push(copy);
        }
        self.assign(out);
        !held.is_empty()
    }

    /// When the next in-flight delivery times out.
    pub fn next_deadline(&self) -> Option<u64> {
        self.in_flight.first().map(|&(at, _)| at)
    }

    pub fn all_done(&self) -> bool {
        self.open == 0
    }

    pub fn is_idle(&self, worker: WorkerId) -> bool {
        matches!(self.consumers[worker.0 as usize], Consumer::Idle { .. })
    }

    /// Jobs not done yet, with their delivery count.
    pub fn open_jobs(&self) -> impl Iterator<Item = (Job, u32)> + '_ {
        self.jobs.iter().filter(|s| s.state != JobState::Done).map(|s| (s.job, s.deliveries))
    }

    pub fn close(&mut self) {
        self.closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_model::MerchantId;

    const JOB: Job = Job { id: JobId(1), merchant: MerchantId(4471) };

    #[test]
    fn an_unacked_job_goes_to_another_worker_when_its_visibility_times_out() {
        let (a, b) = (WorkerId(0), WorkerId(1));
        let mut q = QueueCore::new(2, 31_000);
        let mut ev = Vec::new();
        q.enqueue(JOB, &mut ev);
        assert_eq!(ev, vec![QueueEvent::Delivered { job: JobId(1), worker: a, receipt: 1, delivery: 1 }]);
        let first = q.receive(a, 0, &mut ev).unwrap();
        assert_eq!(q.receive(b, 0, &mut ev), None);
        assert_eq!(q.next_deadline(), Some(31_000));
        ev.clear();
        q.tick(30_999, &mut ev);
        assert!(ev.is_empty());
        q.tick(31_000, &mut ev);
        assert_eq!(
            ev[0],
            QueueEvent::VisibilityExpired { job: JobId(1), worker: a, receipt: 1, at_ms: 31_000 }
        );
        assert_eq!(ev[1], QueueEvent::Delivered { job: JobId(1), worker: b, receipt: 2, delivery: 2 });
        let second = q.receive(b, 31_000, &mut ev).unwrap();
        assert!(!q.ack(first), "a stale delivery cannot ack");
        assert!(!q.all_done());
        assert!(q.ack(second));
        assert!(q.all_done());
    }

    #[test]
    fn a_timed_out_delivery_still_acks_until_the_job_is_handed_on() {
        let (a, b) = (WorkerId(0), WorkerId(1));
        let mut q = QueueCore::new(2, 100);
        let mut ev = Vec::new();
        q.enqueue(JOB, &mut ev);
        q.enqueue(Job { id: JobId(2), merchant: MerchantId(1) }, &mut ev);
        let first = q.receive(a, 0, &mut ev).unwrap();
        q.receive(b, 50, &mut ev).unwrap();
        ev.clear();
        q.tick(100, &mut ev);
        assert_eq!(
            ev,
            vec![QueueEvent::VisibilityExpired { job: JobId(1), worker: a, receipt: 1, at_ms: 100 }]
        );
        assert!(q.ack(first), "nobody took the job again: the holder's ack stands");
        assert!(!q.ack(first), "acked once");
        assert!(q.receive(a, 101, &mut ev).is_none(), "the job is done, not delivered again");
        assert_eq!(q.open_jobs().count(), 1);
    }

    #[test]
    fn the_previous_holder_gets_the_job_back_only_if_nobody_else_is_idle() {
        let (a, b) = (WorkerId(0), WorkerId(1));
        let mut q = QueueCore::new(2, 100);
        let mut ev = Vec::new();
        q.enqueue(JOB, &mut ev);
        q.receive(a, 0, &mut ev).unwrap();
        q.receive(b, 0, &mut ev); // b idle, waiting
                                  // b becomes busy elsewhere? no: a second job keeps it busy
        q.enqueue(Job { id: JobId(2), merchant: MerchantId(1) }, &mut ev);
        q.receive(b, 1, &mut ev).unwrap();
        assert!(q.receive(a, 50, &mut ev).is_none()); // a idle again
        ev.clear();
        q.tick(100, &mut ev);
        assert!(ev.contains(&QueueEvent::Delivered { job: JobId(1), worker: a, receipt: 3, delivery: 2 }));
    }
}
