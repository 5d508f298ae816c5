//! The copies of a team's worker program: each started in a process group of its own with
//! its environment (the addresses of its proxies and services), its output kept in a file;
//! stopped for a pause and continued when it is over, killed by a crash and started again
//! when its restart is due, and killed if still running when the run ends, whatever ended
//! it. A fault that fires on a request or a reply (`foreign::faults`) signals the group at
//! once and leaves its order here; the supervisor's next look takes it up.

use crate::live::log::EventLog;
use fencesim_model::WorkerId;
use fencesim_sim::EventKind;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Life {
    Running,
    /// Stopped for a pause; continued at this instant.
    Stopped(Instant),
    /// Killed by a crash; started again at this instant.
    Crashed(Instant),
    /// Left with this status (a signal's number, negated).
    Exited(i32),
}

/// What a fault that fired outside the supervisor did to a copy, for the supervisor to take up.
#[derive(Clone, Copy, Debug)]
pub enum Order {
    Paused { worker: WorkerId, until: Instant },
    Crashed { worker: WorkerId, restart_at: Instant },
}

/// The process group of each worker's running copy, shared with the faults that signal it,
/// and the orders they leave.
#[derive(Clone, Default)]
pub struct Groups {
    pids: Arc<Mutex<BTreeMap<WorkerId, libc::pid_t>>>,
    orders: Arc<Mutex<Vec<Order>>>,
}

impl Groups {
    /// The process group of `worker`'s running copy, or of every running copy (`None`).
    pub fn of(&self, worker: Option<WorkerId>) -> Vec<libc::pid_t> {
        let pids = self.pids.lock().unwrap_or_else(|p| p.into_inner());
        pids.iter().filter(|(w, _)| worker.is_none_or(|only| **w == only)).map(|(_, pid)| *pid).collect()
    }

    /// Stops `worker`'s copy now, to be continued at `until`.
    pub fn stop(&self, worker: WorkerId, until: Instant) {
        if let Some(&pid) = self.pids.lock().unwrap_or_else(|p| p.into_inner()).get(&worker) {
            // SAFETY: a signal to the process group of our own child.
            unsafe { libc::killpg(pid, libc::SIGSTOP) };
            self.orders.lock().unwrap_or_else(|p| p.into_inner()).push(Order::Paused { worker, until });
        }
    }

    /// Kills `worker`'s copy now, to be started again at `restart_at`.
    pub fn kill(&self, worker: WorkerId, restart_at: Instant) {
        if let Some(pid) = self.pids.lock().unwrap_or_else(|p| p.into_inner()).remove(&worker) {
            // SAFETY: a signal to the process group of our own child.
            unsafe { libc::killpg(pid, libc::SIGKILL) };
            self.orders.lock().unwrap_or_else(|p| p.into_inner()).push(Order::Crashed { worker, restart_at });
        }
    }

    fn take_orders(&self) -> Vec<Order> {
        std::mem::take(&mut *self.orders.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn set(&self, worker: WorkerId, pid: Option<libc::pid_t>) {
        let mut pids = self.pids.lock().unwrap_or_else(|p| p.into_inner());
        match pid {
            Some(pid) => pids.insert(worker, pid),
            None => pids.remove(&worker),
        };
    }
}

struct Copy {
    worker: WorkerId,
    pid: libc::pid_t,
    life: Life,
    incarnation: u32,
    output: PathBuf,
}

/// The command, what each copy is given, and the copies.
pub struct Programs {
    command: Vec<String>,
    env: Vec<Vec<(String, String)>>,
    dir: PathBuf,
    copies: Vec<Copy>,
    pub groups: Groups,
}

/// The command in words, as a person would type it.
pub fn told(command: &[String]) -> String {
    command.join(" ")
}

impl Programs {
    /// Starts one copy of `command` per worker, each with its own environment (`env[i]`
    /// for worker `i`); its output goes to a file in `dir`.
    pub fn spawn(
        command: &[String],
        env: Vec<Vec<(String, String)>>,
        dir: &Path,
        groups: Groups,
    ) -> Result<Programs, String> {
        let mut programs =
            Programs { command: command.to_vec(), env, dir: dir.to_owned(), copies: Vec::new(), groups };
        for worker in (0..programs.env.len() as u32).map(WorkerId) {
            let (pid, output) = programs.start(worker, 1)?;
            programs.copies.push(Copy { worker, pid, life: Life::Running, incarnation: 1, output });
        }
        Ok(programs)
    }

    fn start(&self, worker: WorkerId, incarnation: u32) -> Result<(libc::pid_t, PathBuf), String> {
        let output = self.dir.join(match incarnation {
            1 => format!("program-{worker}.out"),
            n => format!("program-{worker}-{n}.out"),
        });
        let file = std::fs::File::create(&output).map_err(|e| format!("{}: {e}", output.display()))?;
        let err = file.try_clone().map_err(|e| format!("{}: {e}", output.display()))?;
        let (program, args) = self.command.split_first().ok_or("no worker program was given")?;
        let child = Command::new(program)
            .args(args)
            .envs(self.env[worker.0 as usize].iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the worker program `{}`: {e}", told(&self.command)))?;
        let pid = child.id() as libc::pid_t;
        self.groups.set(worker, Some(pid));
        Ok((pid, output))
    }

    /// What the copy of `worker` wrote so far, its last lines.
    pub fn said(&self, worker: WorkerId) -> String {
        let Some(copy) = self.copies.iter().find(|c| c.worker == worker) else { return String::new() };
        let text = std::fs::read_to_string(&copy.output).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        match lines.is_empty() {
            true => "(nothing)".to_owned(),
            false => lines[lines.len().saturating_sub(5)..].join("\n"),
        }
    }

    /// Takes up the faults' orders, notes which copies left, continues a stopped copy whose
    /// pause is over and starts a crashed one whose restart is due.
    pub fn look(&mut self, log: &EventLog) -> Result<(), String> {
        for order in self.groups.take_orders() {
            let (worker, life) = match order {
                Order::Paused { worker, until } => (worker, Life::Stopped(until)),
                Order::Crashed { worker, restart_at } => (worker, Life::Crashed(restart_at)),
            };
            if let Some(copy) = self.copies.iter_mut().find(|c| c.worker == worker) {
                copy.life = life;
            }
        }
        for copy in &mut self.copies {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid pointer to an int.
            let changed = unsafe { libc::waitpid(copy.pid, &mut status, libc::WNOHANG) };
            if changed == copy.pid && !matches!(copy.life, Life::Crashed(_)) {
                copy.life = exited(status);
                self.groups.set(copy.worker, None);
            }
        }
        let now = Instant::now();
        for index in 0..self.copies.len() {
            match self.copies[index].life {
                Life::Stopped(until) if now >= until => {
                    let copy = &mut self.copies[index];
                    // SAFETY: a signal to the process group of our own child.
                    unsafe { libc::killpg(copy.pid, libc::SIGCONT) };
                    log.record(EventKind::Resumed { worker: copy.worker });
                    copy.life = Life::Running;
                }
                Life::Crashed(at) if now >= at => self.restart(index, log)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn restart(&mut self, index: usize, log: &EventLog) -> Result<(), String> {
        let (worker, incarnation) = (self.copies[index].worker, self.copies[index].incarnation + 1);
        log.record(EventKind::Restarted { worker, incarnation });
        let (pid, output) = self.start(worker, incarnation)?;
        self.copies[index] = Copy { worker, pid, life: Life::Running, incarnation, output };
        Ok(())
    }

    /// Starts `worker`'s killed copy again now (a controlled run's driver, when its
    /// restart is due on the run's clock); whether it did (a copy a later crash's restart
    /// already brought back is left running).
    pub fn restart_now(&mut self, worker: WorkerId, log: &EventLog) -> Result<bool, String> {
        self.look(log)?;
        let crashed =
            self.copies.iter().position(|c| c.worker == worker && matches!(c.life, Life::Crashed(_)));
        match crashed {
            Some(index) => self.restart(index, log).map(|()| true),
            None => Ok(false),
        }
    }

    /// A pause given at a time: stopped now, continued at `until`.
    pub fn pause(&mut self, worker: WorkerId, until: Instant) {
        if self.copies.iter().any(|c| c.worker == worker && c.life == Life::Running) {
            self.groups.stop(worker, until);
        }
    }

    /// A crash given at a time: killed now, started again at `restart_at`.
    pub fn crash(&mut self, worker: WorkerId, restart_at: Instant) {
        if self
            .copies
            .iter()
            .any(|c| c.worker == worker && matches!(c.life, Life::Running | Life::Stopped(_)))
        {
            self.groups.kill(worker, restart_at);
        }
    }

    /// Whether every copy has left for good (none waits for a restart).
    pub fn all_exited(&self) -> bool {
        self.copies.iter().all(|copy| matches!(copy.life, Life::Exited(_)))
    }

    /// The workers whose copy is running or stopped.
    pub fn running(&self) -> Vec<WorkerId> {
        let alive = self.copies.iter().filter(|c| matches!(c.life, Life::Running | Life::Stopped(_)));
        alive.map(|copy| copy.worker).collect()
    }

    /// The workers whose copy has left for good, with its status.
    pub fn exited(&self) -> Vec<(WorkerId, i32)> {
        self.copies
            .iter()
            .filter_map(|copy| match copy.life {
                Life::Exited(status) => Some((copy.worker, status)),
                _ => None,
            })
            .collect()
    }
}

/// A process that left, with its exit status as a wait reported it (a signal's number,
/// negated, when a signal ended it).
fn exited(status: i32) -> Life {
    if libc::WIFEXITED(status) {
        Life::Exited(libc::WEXITSTATUS(status))
    } else {
        Life::Exited(-libc::WTERMSIG(status))
    }
}

impl Drop for Programs {
    fn drop(&mut self) {
        for copy in self.copies.iter().filter(|c| !matches!(c.life, Life::Exited(_))) {
            // SAFETY: a signal to the process group of our own child (a group that has left
            // already is harmless to signal: the call fails), then a wait for the child.
            unsafe {
                libc::killpg(copy.pid, libc::SIGKILL);
                libc::waitpid(copy.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}
