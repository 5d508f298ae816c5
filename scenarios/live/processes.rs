//! The worker processes of a live run, from the coordinator's side: started with their
//! specs, watched (stopped for a pause, resumed when it is over, killed by a crash and
//! started again when its restart is due, exited), and killed if they are still running
//! when the run ends, whatever ended it.

use crate::live::clock::LiveClock;
use crate::live::faults::Progress;
use crate::live::log::EventLog;
use crate::live::plan::LivePlan;
use crate::live::worker::WorkerSpec;
use fencesim_model::WorkerId;
use fencesim_sim::{EventKind, FaultKind, WorldConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Life {
    Running,
    /// Stopped for a pause; resumed at this instant.
    Stopped(Instant),
    /// Killed by a crash of the plan; a new process starts at this instant.
    Crashed(Instant),
    /// Exited with this status (a signal's number, negated).
    Exited(i32),
}

struct Child {
    spec: WorkerSpec,
    pid: libc::pid_t,
    life: Life,
    stderr: PathBuf,
}

/// The worker processes (the latest of each worker); any still alive when this is
/// dropped are killed.
pub struct Children {
    children: Vec<Child>,
    program: PathBuf,
    dir: PathBuf,
    /// Every event file a process of the run wrote, in the order they were started.
    logs: Vec<PathBuf>,
}

/// The files of one process of a worker: its events and what it said on stderr.
fn files(dir: &Path, worker: WorkerId, incarnation: u32) -> (PathBuf, PathBuf) {
    let name = match incarnation {
        1 => format!("worker-{worker}"),
        n => format!("worker-{worker}-{n}"),
    };
    (dir.join(format!("{name}.jsonl")), dir.join(format!("{name}.err")))
}

fn start(program: &Path, spec: &WorkerSpec, stderr: &Path) -> Result<libc::pid_t, String> {
    let err = std::fs::File::create(stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
    let json = serde_json::to_string(spec).expect("a spec is JSON");
    let child = Command::new(program)
        .arg("live-worker")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start worker {} ({}): {e}", spec.worker, program.display()))?;
    Ok(child.id() as libc::pid_t)
}

impl Children {
    pub fn spawn(program: &Path, specs: &[WorkerSpec], dir: &Path) -> Result<Children, String> {
        let mut children = Children {
            children: Vec::new(),
            program: program.to_owned(),
            dir: dir.to_owned(),
            logs: Vec::new(),
        };
        for spec in specs {
            let (_, stderr) = files(dir, spec.worker, spec.incarnation);
            let pid = start(program, spec, &stderr)?;
            children.logs.push(spec.log.clone());
            children.children.push(Child { spec: spec.clone(), pid, life: Life::Running, stderr });
        }
        Ok(children)
    }

    /// The story starts on `clock`: a process started again after a crash is told so.
    pub fn begin(&mut self, clock: LiveClock) {
        for child in &mut self.children {
            child.spec.clock = clock;
        }
    }

    /// What the first worker process that has already exited said, if one has: before the
    /// story starts, none should have.
    pub fn exited_early(&mut self) -> Option<String> {
        for child in &mut self.children {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid pointer to an int.
            if unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG) } == child.pid {
                child.life = exited(status);
                let said = std::fs::read_to_string(&child.stderr).unwrap_or_default();
                return Some(format!(
                    "worker {} ended before the story began: {}",
                    child.spec.worker,
                    said.trim()
                ));
            }
        }
        None
    }

    /// Every event file the run's worker processes wrote.
    pub fn logs(&self) -> &[PathBuf] {
        &self.logs
    }

    /// Notes what each process did since the last look (stopped itself for a pause, was
    /// killed by its crash, exited); resumes a stopped one whose pause is over, and starts
    /// a new process for a crashed one whose restart is due.
    pub fn look(
        &mut self,
        plan: &LivePlan,
        world: &WorldConfig,
        clock: LiveClock,
        log: &EventLog,
    ) -> Result<(), String> {
        for child in &mut self.children {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid pointer to an int.
            let changed = unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG | libc::WUNTRACED) };
            if changed == child.pid && child.life == Life::Running {
                child.life = taken(child, status, plan, world, clock);
            }
        }
        let now = Instant::now();
        for index in 0..self.children.len() {
            match self.children[index].life {
                Life::Stopped(until) if now >= until => {
                    let child = &mut self.children[index];
                    // SAFETY: a signal to our own child.
                    unsafe { libc::kill(child.pid, libc::SIGCONT) };
                    log.record(EventKind::Resumed { worker: child.spec.worker });
                    child.life = Life::Running;
                }
                Life::Crashed(at) if now >= at => self.restart(index, log)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// A new process for the crashed worker at `index`, counting on from the last one.
    fn restart(&mut self, index: usize, log: &EventLog) -> Result<(), String> {
        let child = &mut self.children[index];
        let mut spec = child.spec.clone();
        spec.incarnation += 1;
        spec.progress = Progress::read(&spec.progress_file)?;
        let (events, stderr) = files(&self.dir, spec.worker, spec.incarnation);
        spec.log = events;
        log.record(EventKind::Restarted { worker: spec.worker, incarnation: spec.incarnation });
        child.pid = start(&self.program, &spec, &stderr)?;
        self.logs.push(spec.log.clone());
        *child = Child { spec, pid: child.pid, life: Life::Running, stderr };
        Ok(())
    }

    fn child(&mut self, worker: WorkerId) -> Option<&mut Child> {
        self.children.iter_mut().find(|child| child.spec.worker == worker)
    }

    /// A pause the coordinator gives `worker` until `until`, unless it is already stopped
    /// or crashed (the simulation ignores such a pause too).
    pub fn pause(&mut self, worker: WorkerId, until: Instant) {
        if let Some(child) = self.child(worker).filter(|child| child.life == Life::Running) {
            let mut status = 0;
            // SAFETY: a signal to our own child, and a wait for its report (reaped here, so
            // that a later look does not take it for a pause the worker gave itself).
            let reaped = unsafe {
                libc::kill(child.pid, libc::SIGSTOP);
                libc::waitpid(child.pid, &mut status, libc::WUNTRACED)
            };
            child.life = match reaped == child.pid && !libc::WIFSTOPPED(status) {
                true => exited(status),
                false => Life::Stopped(until),
            };
        }
    }

    /// A crash the coordinator gives `worker`, with its restart at `restart_at`, unless it
    /// is already crashed or gone.
    pub fn crash(&mut self, worker: WorkerId, restart_at: Instant) {
        if let Some(child) =
            self.child(worker).filter(|child| matches!(child.life, Life::Running | Life::Stopped(_)))
        {
            // SAFETY: a signal to and a blocking wait on our own child.
            unsafe {
                libc::kill(child.pid, libc::SIGKILL);
                libc::waitpid(child.pid, std::ptr::null_mut(), 0);
            }
            child.life = Life::Crashed(restart_at);
        }
    }

    /// Whether every worker's process has left for good (none is waiting for a restart).
    pub fn all_exited(&self) -> bool {
        self.children.iter().all(|child| matches!(child.life, Life::Exited(_)))
    }

    /// Each worker that did not end cleanly, with what it said.
    pub fn failures(&self) -> Vec<String> {
        let failed = self.children.iter().filter(|child| child.life != Life::Exited(0));
        failed
            .map(|child| {
                let said = std::fs::read_to_string(&child.stderr).unwrap_or_default();
                format!("worker {} ended {:?}: {}", child.spec.worker, child.life, said.trim())
            })
            .collect()
    }
}

/// A process that left, with its exit status as a wait reported it (-1: not by exiting).
fn exited(status: i32) -> Life {
    Life::Exited(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 })
}

/// What a process that changed state did: stopped itself for the pause it fired, was
/// killed by the crash it fired, or exited.
fn taken(child: &Child, status: i32, plan: &LivePlan, world: &WorldConfig, clock: LiveClock) -> Life {
    let fired = || Progress::read(&child.spec.progress_file).ok().and_then(|p| p.fired.last().copied());
    if libc::WIFSTOPPED(status) {
        let pause = fired().map_or(0, |index| plan.pause_ms(index, world));
        return Life::Stopped(Instant::now() + clock.real(pause));
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let crash = fired().and_then(|index| match world.faults.faults.get(index)?.kind {
            FaultKind::Crash { restart_after_ms, .. } => Some(restart_after_ms),
            _ => None,
        });
        return match crash {
            Some(ms) if signal == libc::SIGKILL => Life::Crashed(Instant::now() + clock.real(ms)),
            _ => Life::Exited(-signal),
        };
    }
    exited(status)
}

impl Drop for Children {
    fn drop(&mut self) {
        let alive =
            self.children.iter().filter(|child| matches!(child.life, Life::Running | Life::Stopped(_)));
        for child in alive {
            // SAFETY: signals to and a blocking wait on our own child.
            unsafe {
                libc::kill(child.pid, libc::SIGKILL);
                libc::waitpid(child.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// The instant the story reaches `story_ms` on this machine.
pub fn instant_of(clock: LiveClock, story_ms: u64) -> Instant {
    let due_us = clock.start_us + clock.real(story_ms).as_micros() as u64;
    let now_us = crate::live::clock::wall_us();
    Instant::now() + Duration::from_micros(due_us.saturating_sub(now_us))
}
