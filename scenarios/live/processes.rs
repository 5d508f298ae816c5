//! The worker processes of a live run, from the coordinator's side: started with their
//! specs, watched (stopped for a pause, resumed when it is over, exited), and killed if
//! they are still running when the run ends, whatever ended it.

use crate::live::log::EventLog;
use crate::live::queue;
use crate::live::worker::WorkerSpec;
use fencesim_model::WorkerId;
use fencesim_sim::EventKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Life {
    Running,
    /// Stopped itself for a pause; resumed at this instant.
    Stopped(Instant),
    /// Exited with this status (a signal's number, negated).
    Exited(i32),
}

struct Child {
    worker: WorkerId,
    pid: libc::pid_t,
    life: Life,
    stderr: PathBuf,
}

/// The worker processes; any still alive when this is dropped are killed.
pub struct Children(Vec<Child>);

impl Children {
    pub fn spawn(program: &Path, specs: &[WorkerSpec], dir: &Path) -> Result<Children, String> {
        let mut children = Children(Vec::new());
        for spec in specs {
            let stderr = dir.join(format!("worker-{}.err", spec.worker));
            let err = std::fs::File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
            let json = serde_json::to_string(spec).expect("a spec is JSON");
            let child = Command::new(program)
                .arg("live-worker")
                .arg(json)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(err)
                .spawn()
                .map_err(|e| format!("cannot start worker {} ({}): {e}", spec.worker, program.display()))?;
            children.0.push(Child {
                worker: spec.worker,
                pid: child.id() as libc::pid_t,
                life: Life::Running,
                stderr,
            });
        }
        Ok(children)
    }

    /// Notes what each process did since the last look: stopped itself, exited; resumes a
    /// stopped one whose pause is over.
    fn look(&mut self, pauses: &[(WorkerId, Duration)], log: &EventLog) {
        for child in &mut self.0 {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid pointer to an int.
            let changed = unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG | libc::WUNTRACED) };
            if changed == child.pid {
                if libc::WIFSTOPPED(status) {
                    let pause =
                        pauses.iter().find(|(w, _)| *w == child.worker).map_or(Duration::ZERO, |p| p.1);
                    child.life = Life::Stopped(Instant::now() + pause);
                } else if libc::WIFEXITED(status) {
                    child.life = Life::Exited(libc::WEXITSTATUS(status));
                } else if libc::WIFSIGNALED(status) {
                    child.life = Life::Exited(-libc::WTERMSIG(status));
                }
            }
            if let Life::Stopped(until) = child.life {
                if Instant::now() >= until {
                    // SAFETY: a signal to our own child.
                    unsafe { libc::kill(child.pid, libc::SIGCONT) };
                    log.record(EventKind::Resumed { worker: child.worker });
                    child.life = Life::Running;
                }
            }
        }
    }

    fn all_exited(&self) -> bool {
        self.0.iter().all(|child| matches!(child.life, Life::Exited(_)))
    }

    /// Each worker that did not end cleanly, with what it said.
    pub fn failures(&self) -> Vec<String> {
        let failed = self.0.iter().filter(|child| child.life != Life::Exited(0));
        failed
            .map(|child| {
                let said = std::fs::read_to_string(&child.stderr).unwrap_or_default();
                format!("worker {} ended {:?}: {}", child.worker, child.life, said.trim())
            })
            .collect()
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for child in self.0.iter().filter(|child| !matches!(child.life, Life::Exited(_))) {
            // SAFETY: signals to and a blocking wait on our own child.
            unsafe {
                libc::kill(child.pid, libc::SIGKILL);
                libc::waitpid(child.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Watches the workers until every one has left (`true`) or the deadline passes (`false`):
/// resumes paused ones, closes the queue once every job is acked.
pub fn supervise(
    children: &mut Children,
    pauses: &[(WorkerId, Duration)],
    con: &mut redis::Connection,
    jobs: u64,
    deadline: Instant,
    log: &EventLog,
) -> Result<bool, String> {
    let mut closed = false;
    let mut asked = Instant::now();
    while !children.all_exited() {
        if Instant::now() > deadline {
            return Ok(false);
        }
        children.look(pauses, log);
        // The queue is asked every 10 ms, the processes every half millisecond: a resume is
        // due to the millisecond, the end of the run is not.
        if !closed && asked.elapsed() >= Duration::from_millis(10) {
            asked = Instant::now();
            if queue::acked(con).map_err(|e| format!("the queue: {e}"))? >= jobs {
                queue::close(con).map_err(|e| format!("the queue: {e}"))?;
                closed = true;
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    Ok(true)
}
