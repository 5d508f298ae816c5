//! `fencesim bench -- COMMAND`: how many runs a second a team's worker program gets through
//! on this machine, controlled (`fencesim worker --controlled`) and in real time, on one
//! small world: 20 refunds of one merchant, two workers, and a pause of A longer than the
//! lease after its third claim. Each way runs `--runs` times in processes of its own (a
//! controlled run holds its process's clock): the controlled runs in `jobs` processes at
//! once and in one, the real-time runs in one. A process's first run also starts its
//! PostgreSQL cluster (a second), so the rate is counted in the steady state: the runs
//! that end while every process is past its first run, over the time they took.

use crate::files::replay_file::ReplayFile;
use crate::scenario::small::SmallWorld;
use crate::scenario::Scenario;
use fencesim_model::{Mechanism, StepKind, WorkerId};
use fencesim_sim::{Fault, FaultKind, GatewayMode, Trigger};
use serde::Serialize;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The figures of one program.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramBench {
    pub command: Vec<String>,
    pub runs_per_process: usize,
    pub jobs: usize,
    /// Controlled runs a second with `jobs` processes at once.
    pub controlled_per_second: f64,
    /// Controlled runs a second in one process.
    pub controlled_one_per_second: f64,
    /// Real-time runs a second in one process, at the default time scale.
    pub real_time_per_second: f64,
    /// The story's length of the world, in milliseconds (a real-time run takes a quarter
    /// of it, and its start and end besides).
    pub story_ms: u64,
}

/// The bench's world: 20 refunds, two workers, A paused past its lease after its third claim.
pub fn bench_world() -> Scenario {
    let pause = Fault {
        kind: FaultKind::Pause { worker: WorkerId(0), duration_ms: 400 },
        trigger: Trigger::Step { worker: WorkerId(0), step: StepKind::AfterClaim, nth: 3 },
    };
    let small = SmallWorld { workers: 2, rows: 20, ttl_ms: 300, latency_ms: 20, faults: vec![pause] };
    let mut scenario = small.scenario(Mechanism::Fenced, GatewayMode::Idempotent);
    scenario.world.replica = None;
    scenario.world.settlement = None;
    scenario
}

/// Times `command` through the bench's world.
pub fn bench_program(command: &[String], runs: usize, jobs: usize) -> Result<ProgramBench, String> {
    let scenario = bench_world();
    let outcome = crate::runner::run_with(&scenario, 1, None)?;
    let dir = std::env::temp_dir().join(format!("fencesim-bench-program-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let file = ReplayFile::from_outcome(&outcome).write_as(&dir.join("world.json"))?;
    let measured = (|| -> Result<(f64, f64, f64), String> {
        let controlled = rate(&file, command, runs, jobs, true)?;
        let controlled_one = rate(&file, command, runs, 1, true)?;
        let real_time = rate(&file, command, runs, 1, false)?;
        Ok((controlled, controlled_one, real_time))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (controlled_per_second, controlled_one_per_second, real_time_per_second) = measured?;
    Ok(ProgramBench {
        command: command.to_vec(),
        runs_per_process: runs,
        jobs,
        controlled_per_second,
        controlled_one_per_second,
        real_time_per_second,
        story_ms: outcome.record.ended_at_ms,
    })
}

/// Runs `runs` runs in each of `jobs` processes and counts the runs a second in the
/// steady state.
fn rate(file: &Path, command: &[String], runs: usize, jobs: usize, controlled: bool) -> Result<f64, String> {
    if runs < 3 {
        return Err(format!("--runs {runs}: a program's rate needs at least 3 runs a process"));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find fencesim's own program: {e}"))?;
    let started: Vec<_> = (0..jobs).map(|_| start(&exe, file, command, runs, controlled)).collect();
    let mut ends: Vec<Vec<Instant>> = Vec::new();
    for process in started {
        ends.push(process?.join().map_err(|_| "a bench process's reader stopped".to_owned())??);
    }
    let from = ends.iter().map(|each| each[0]).max().expect("one process at least");
    let to =
        ends.iter().map(|each| *each.last().expect("every run ended")).min().expect("one process at least");
    let within = ends.iter().flatten().filter(|end| **end > from && **end <= to).count();
    let seconds = to.duration_since(from).as_secs_f64();
    if within == 0 || seconds <= 0.0 {
        return Err("the bench's processes did not overlap: ask for more --runs".to_owned());
    }
    Ok(within as f64 / seconds)
}

type Ends = std::thread::JoinHandle<Result<Vec<Instant>, String>>;

/// One process of `fencesim worker`, and when each of its runs ended (its `run i of N` lines).
fn start(
    exe: &PathBuf,
    file: &Path,
    command: &[String],
    runs: usize,
    controlled: bool,
) -> Result<Ends, String> {
    let mut worker = Command::new(exe);
    worker.arg("worker").arg("--replay").arg(file).args(["--runs", &runs.to_string()]);
    if controlled {
        worker.arg("--controlled");
    }
    let mut child = worker
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `fencesim worker`: {e}"))?;
    let err = child.stderr.take().expect("its errors are piped");
    Ok(std::thread::spawn(move || {
        let (mut ends, mut said) = (Vec::new(), Vec::new());
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            match line.starts_with("run ") {
                true => ends.push(Instant::now()),
                false => said.push(line),
            }
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        // a run that breaks an invariant exits 1: the bench times it all the same
        if ends.len() != runs || !matches!(status.code(), Some(0 | 1)) {
            return Err(format!(
                "`fencesim worker` ended after {} of {runs} runs: {}",
                ends.len(),
                said.join("\n")
            ));
        }
        Ok(ends)
    }))
}
