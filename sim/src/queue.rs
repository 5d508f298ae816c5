//! The simulated job queue: at-least-once delivery with a visibility timeout.
//!
//! Workers form one consumer group. The core hands a visible job to an idle worker by a
//! fixed rule (a worker that did not hold the job last, then the one idle longest, then
//! the lowest id), so the choice never depends on which task the scheduler polls first.
//! An unacked delivery becomes visible again when its timeout passes.

use fencesim_model::{Delivery, Job, JobId, WorkerId};

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

#[derive(Clone, Debug)]
pub struct QueueCore {
    jobs: Vec<JobSlot>,
    consumers: Vec<Consumer>,
    visibility_timeout_ms: u64,
    next_receipt: u32,
    closed: bool,
}

impl QueueCore {
    pub fn new(workers: usize, visibility_timeout_ms: u64) -> QueueCore {
        QueueCore {
            jobs: Vec::new(),
            consumers: vec![Consumer::Idle { since_ms: 0 }; workers],
            visibility_timeout_ms,
            next_receipt: 1,
            closed: false,
        }
    }

    pub fn enqueue(&mut self, job: Job, out: &mut Vec<QueueEvent>) {
        self.jobs.push(JobSlot { job, state: JobState::Visible, last_holder: None, deliveries: 0 });
        self.assign(out);
    }

    /// Makes timed-out deliveries visible again and hands visible jobs to idle workers.
    pub fn tick(&mut self, now_ms: u64, out: &mut Vec<QueueEvent>) {
        for slot in &mut self.jobs {
            if let JobState::InFlight { worker, receipt, visible_at_ms } = slot.state {
                if visible_at_ms <= now_ms {
                    slot.state = JobState::Visible;
                    out.push(QueueEvent::VisibilityExpired {
                        job: slot.job.id,
                        worker,
                        receipt,
                        at_ms: visible_at_ms,
                    });
                }
            }
        }
        self.assign(out);
    }

    fn assign(&mut self, out: &mut Vec<QueueEvent>) {
        for slot in &mut self.jobs {
            if slot.state != JobState::Visible {
                continue;
            }
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
            slot.deliveries += 1;
            slot.last_holder = Some(worker);
            slot.state = JobState::Assigned { worker, receipt };
            self.consumers[worker.0 as usize] = Consumer::Busy;
            out.push(QueueEvent::Delivered { job: slot.job.id, worker, receipt, delivery: slot.deliveries });
        }
    }

    /// The worker asks for a job: its assigned delivery if it has one (the visibility
    /// timeout starts now), else it becomes idle and may be handed a visible job.
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
        let timeout = self.visibility_timeout_ms;
        self.jobs.iter_mut().find_map(|slot| match slot.state {
            JobState::Assigned { worker: w, receipt } if w == worker => {
                slot.state = JobState::InFlight { worker, receipt, visible_at_ms: now_ms + timeout };
                Some(Delivery { job: slot.job, receipt })
            }
            _ => None,
        })
    }

    /// Is a delivery waiting for this worker?
    pub fn has_assigned(&self, worker: WorkerId) -> bool {
        self.jobs.iter().any(|s| matches!(s.state, JobState::Assigned { worker: w, .. } if w == worker))
    }

    /// Acks a delivery. Refused (`false`) unless it is a current one.
    pub fn ack(&mut self, delivery: Delivery) -> bool {
        let current = self
            .jobs
            .iter_mut()
            .find(|s| matches!(s.state, JobState::InFlight { receipt, .. } if receipt == delivery.receipt));
        match current {
            Some(slot) => {
                slot.state = JobState::Done;
                true
            }
            None => false,
        }
    }

    /// The queue gives up on `worker`'s delivery now, as if its timeout had passed.
    pub fn redeliver_from(&mut self, worker: WorkerId, now_ms: u64, out: &mut Vec<QueueEvent>) -> bool {
        let mut any = false;
        for slot in &mut self.jobs {
            if let JobState::InFlight { worker: w, receipt, .. } = slot.state {
                if w == worker {
                    slot.state = JobState::Visible;
                    out.push(QueueEvent::VisibilityExpired {
                        job: slot.job.id,
                        worker,
                        receipt,
                        at_ms: now_ms,
                    });
                    any = true;
                }
            }
        }
        self.assign(out);
        any
    }

    /// The queue delivers `worker`'s job a second time, to someone else, while the first
    /// delivery is still in flight.
    pub fn duplicate_from(&mut self, worker: WorkerId, out: &mut Vec<QueueEvent>) -> bool {
        let held: Vec<(Job, u32)> = self
            .jobs
            .iter()
            .filter(|s| matches!(s.state, JobState::InFlight { worker: w, .. } if w == worker))
            .map(|s| (s.job, s.deliveries))
            .collect();
        for (job, deliveries) in &held {
            self.jobs.push(JobSlot {
                job: *job,
                state: JobState::Visible,
                last_holder: Some(worker),
                deliveries: *deliveries,
            });
        }
        self.assign(out);
        !held.is_empty()
    }

    /// When the next in-flight delivery times out.
    pub fn next_deadline(&self) -> Option<u64> {
        self.jobs
            .iter()
            .filter_map(|s| match s.state {
                JobState::InFlight { visible_at_ms, .. } => Some(visible_at_ms),
                _ => None,
            })
            .min()
    }

    pub fn all_done(&self) -> bool {
        self.jobs.iter().all(|s| s.state == JobState::Done)
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
