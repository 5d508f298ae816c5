//! `fencesim worker --random N`: a team's program through many random worlds, each judged,
//! counted per invariant, and beside the simulation when asked. With `--jobs J`, J
//! processes of fencesim's own each take a share of the seeds: a controlled run puts its
//! process on the run's clock, so two runs at once need two processes. Each share says
//! each world's result as one JSON line, and the worlds are told in seed order whatever
//! share finishes first, so that the same seeds print the same lines.

use crate::cli::{bad_input, verdict};
use crate::files::replay_file::{ReplayFile, WorkerProgram};
use crate::foreign::controlled::Control;
use crate::foreign::kept::Kept;
use crate::foreign::{run_foreign_kept, ForeignConfig, ForeignRun};
use crate::model::Mechanism;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// What `--random` was asked for, besides the run's own configuration.
pub struct RandomAsk<'a> {
    /// The worlds' seeds, in the order they are told.
    pub seeds: Vec<u64>,
    pub beside: Option<Mechanism>,
    pub save: Option<&'a Path>,
    pub twice: bool,
    pub jobs: u32,
    /// Say each world as a JSON line for the process that started this one, and no more.
    pub share: bool,
    /// The arguments that start a share like this one, but for its seeds.
    pub again: Vec<String>,
}

/// One world's run, as a share says it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorldRun {
    pub seed: u64,
    pub workers: u32,
    pub faults: usize,
    pub broken: Vec<String>,
    pub simulated: Option<Vec<String>>,
    /// The command that replays the world's saved file.
    pub saved: Option<String>,
    /// With `--twice`: whether the second run's history was the first's.
    pub same_history: Option<bool>,
    /// Where the two histories parted, in words.
    pub parting: Option<String>,
    /// Whether the verdict from the program's own events agreed, when it wrote any.
    pub own_agrees: Option<bool>,
    /// Lines told under the world's: copies that left early, the program's own verdict.
    pub notes: Vec<String>,
}

/// Runs the program through one world (twice with `--twice`).
fn one_world(
    config: &ForeignConfig,
    seed: u64,
    ask: &RandomAsk,
    kept: &mut Kept,
) -> Result<WorldRun, String> {
    let scenario = crate::foreign::worlds::random_world(seed, config.gateway);
    let (workers, faults) = (scenario.world.workers, scenario.world.faults.faults.len());
    let simulated = ask.beside.map(|mechanism| simulated_under(&scenario, seed, mechanism)).transpose()?;
    let control = config.control.map(|control| Control { seed, ..control });
    let keep = config.keep.as_ref().map(|dir| dir.join(format!("seed-{seed}")));
    let this = ForeignConfig { replay: Some((scenario, seed)), control, keep, ..config.clone() };
    let ForeignRun { outcome, own, left_early, history, behind_ms, .. } = run_foreign_kept(&this, kept)?;
    let mut notes: Vec<String> = left_early.iter().map(ToString::to_string).collect();
    notes.extend(super::worker::behind_words(&behind_ms));
    let broken: Vec<String> = outcome.broken().iter().map(|name| (*name).to_owned()).collect();
    let own_agrees = own.as_ref().map(|own| own.broken() == outcome.broken());
    if let (Some(false), Some(own)) = (own_agrees, &own) {
        notes.push(super::worker::own_words(&outcome.broken(), &own.broken()));
    }
    let (mut same_history, mut parting) = (None, None);
    if let Some(first) = history.as_ref().filter(|_| ask.twice) {
        let again = ForeignConfig { keep: super::worker::again_dir(&this.keep), ..this.clone() };
        let second = run_foreign_kept(&again, kept).map_err(|e| format!("run again: {e}"))?;
        parting = second
            .history
            .and_then(|second| first.parting(&second))
            .map(|p| super::worker::parting_words(&p));
        same_history = Some(parting.is_none());
    }
    let saved = match ask.save.filter(|_| !broken.is_empty()) {
        Some(dir) => {
            let program = WorkerProgram {
                command: config.command.clone(),
                time_scale: config.time_scale,
                controlled: this.control.map(|control| control.seed),
                run_clock: this.control.is_some_and(|control| control.program_clock),
            };
            let path = ReplayFile::of_worker(&outcome, program).write_into_as(dir, "worker")?;
            Some(ReplayFile::command(&path))
        }
        None => None,
    };
    Ok(WorldRun { seed, workers, faults, broken, simulated, saved, same_history, parting, own_agrees, notes })
}

/// The invariants the simulation breaks in `scenario`'s world under `mechanism`.
fn simulated_under(
    scenario: &crate::scenario::Scenario,
    seed: u64,
    mechanism: Mechanism,
) -> Result<Vec<String>, String> {
    let mut scenario = scenario.clone();
    scenario.world.mechanism = mechanism;
    let outcome = crate::runner::run_with(&scenario, seed, None)?;
    Ok(outcome.broken().iter().map(|name| (*name).to_owned()).collect())
}

/// What the worlds told so far add up to.
#[derive(Default)]
struct Tally {
    broken: BTreeMap<String, u32>,
    agreed: u32,
    same: u32,
    own: super::worker::OwnCount,
}

impl Tally {
    /// Tells one world and counts it.
    fn tell(&mut self, world: &WorldRun) {
        let verdict =
            super::worker::verdict_words(&world.broken.iter().map(String::as_str).collect::<Vec<_>>());
        let mut line =
            format!("seed {}: {} workers, {} fault(s): {verdict}", world.seed, world.workers, world.faults);
        for name in &world.broken {
            *self.broken.entry(name.clone()).or_default() += 1;
        }
        if let Some(simulated) = &world.simulated {
            self.agreed += u32::from(*simulated == world.broken);
            let simulated: Vec<&str> = simulated.iter().map(String::as_str).collect();
            line += &format!("; simulated: {}", super::worker::verdict_words(&simulated));
        }
        if let Some(saved) = &world.saved {
            line += &format!(" ({saved})");
        }
        println!("{line}");
        for note in &world.notes {
            println!("  {note}");
        }
        if let Some(parting) = &world.parting {
            println!("  run again: {parting}");
        }
        self.same += u32::from(world.same_history == Some(true));
        self.own.note(world.own_agrees);
    }

    fn summary(&self, config: &ForeignConfig, ask: &RandomAsk) -> ExitCode {
        let count = ask.seeds.len();
        if ask.twice {
            println!("the same history run twice in {} of {count} worlds", self.same);
        }
        let told: Vec<String> = self.broken.iter().map(|(name, n)| format!("{name} in {n}")).collect();
        let broken =
            if told.is_empty() { "nothing broken".to_owned() } else { format!("broke {}", told.join(", ")) };
        println!("`{}`, {count} random worlds: {broken}", config.command.join(" "));
        if let Some(mechanism) = ask.beside {
            println!(
                "the same verdict as the simulation under {mechanism} in {} of {count} worlds",
                self.agreed
            );
        }
        self.own.tell(count as u32);
        verdict(self.broken.is_empty())
    }
}

/// Runs the program through the random worlds: in this process, or in `jobs` shares.
pub fn random(config: &ForeignConfig, ask: &RandomAsk) -> ExitCode {
    if ask.jobs > 1 && !ask.share {
        return in_shares(config, ask);
    }
    let (mut tally, mut kept) = (Tally::default(), Kept::new());
    for &seed in &ask.seeds {
        let world = match one_world(config, seed, ask, &mut kept) {
            Ok(world) => world,
            Err(error) => return bad_input(format!("seed {seed}: {error}")),
        };
        match ask.share {
            true => println!("{}", serde_json::to_string(&world).expect("a world's run serializes")),
            false => tally.tell(&world),
        }
    }
    match ask.share {
        true => ExitCode::SUCCESS,
        false => tally.summary(config, ask),
    }
}

/// The seeds of share `index` of `jobs`: every `jobs`-th seed from its own first, so that
/// each share meets worlds of every size.
fn share_seeds(ask: &RandomAsk, index: u32) -> Vec<u64> {
    ask.seeds.iter().copied().skip(index as usize).step_by(ask.jobs as usize).collect()
}

/// Starts the shares, tells each world in seed order as soon as all before it are told,
/// and sums them up.
fn in_shares(config: &ForeignConfig, ask: &RandomAsk) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return bad_input(format!("cannot find fencesim's own program to start the shares: {e}")),
    };
    let (told, heard) = std::sync::mpsc::channel::<Result<WorldRun, String>>();
    let mut children = Vec::new();
    for index in 0..ask.jobs.min(ask.seeds.len() as u32) {
        match start_share(&exe, ask, index, told.clone()) {
            Ok(child) => children.push(child),
            Err(error) => return bad_input(error),
        }
    }
    drop(told);
    let (mut tally, mut waiting, mut next) = (Tally::default(), BTreeMap::new(), ask.seeds.iter().peekable());
    for world in heard {
        let world = match world {
            Ok(world) => world,
            Err(error) => return bad_input(error),
        };
        waiting.insert(world.seed, world);
        while let Some(world) = next.peek().and_then(|seed| waiting.remove(*seed)) {
            tally.tell(&world);
            next.next();
        }
    }
    for mut child in children {
        match child.wait() {
            Ok(status) if status.success() => {}
            _ => {
                return bad_input(
                    "a share of the worlds ended without telling them all (its words are above)",
                )
            }
        }
    }
    tally.summary(config, ask)
}

/// One share: `fencesim worker` again, for its seeds, each world's line sent on `told`.
fn start_share(
    exe: &PathBuf,
    ask: &RandomAsk,
    index: u32,
    told: std::sync::mpsc::Sender<Result<WorldRun, String>>,
) -> Result<std::process::Child, String> {
    let seeds = share_seeds(ask, index);
    let mut child = Command::new(exe)
        .arg("worker")
        .args(["--share-seeds", &seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(",")])
        .args(&ask.again)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start a share of the worlds: {e}"))?;
    let out = child.stdout.take().expect("the share's output is piped");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let world = serde_json::from_str::<WorldRun>(&line)
                .map_err(|e| format!("a share of the worlds said what is not a world's run ({e}): {line}"));
            if told.send(world).is_err() {
                return;
            }
        }
    });
    Ok(child)
}
