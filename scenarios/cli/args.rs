//! The parsers the subcommands share: each refuses a bad value with a message that says
//! what was expected and what it got.

use crate::model::Mechanism;
use crate::scenario;
use crate::sim::GatewayMode;

pub fn parse_scenario(text: &str) -> Result<String, String> {
    scenario::known(text).map(str::to_owned)
}

pub fn parse_mechanism(text: &str) -> Result<Mechanism, String> {
    scenario::mechanism_named(text)
}

/// A built-in mechanism by name, or one a mechanism file describes: a path (a word that
/// holds a `/` or ends in `.toml`), read and checked here.
pub fn parse_mechanism_or_file(text: &str) -> Result<Mechanism, String> {
    match text.contains('/') || text.ends_with(".toml") {
        true => crate::mechanism_file::load(std::path::Path::new(text)),
        false => parse_mechanism(text),
    }
}

/// How `mechanism` is written back on a command line for `parse_mechanism_or_file`: its
/// name, or the path of the file it was read from.
pub fn mechanism_or_file_word(mechanism: Mechanism) -> String {
    crate::mechanism_file::path_of(mechanism).unwrap_or_else(|| mechanism.to_string())
}

/// The mechanism a command runs: a built-in one by name, or one a file describes.
#[derive(clap::Args, Clone, Debug)]
#[group(required = true, multiple = false)]
pub struct MechanismChoice {
    /// The mechanism (`fencesim mechanisms` lists them), e.g. ttl-only or fenced
    #[arg(long, alias = "strategy", value_parser = parse_mechanism)]
    mechanism: Option<Mechanism>,
    /// Or a mechanism described in a file (docs/mechanism-files.md), checked before it runs
    #[arg(long, value_name = "FILE")]
    mechanism_file: Option<std::path::PathBuf>,
}

impl MechanismChoice {
    /// The one chosen (the group requires one): a file is read, checked and defined here.
    pub fn chosen(&self) -> Result<Mechanism, String> {
        chosen(self.mechanism, self.mechanism_file.as_deref())
    }
}

/// The mechanism a file names, when there is one, else the one named.
pub fn chosen(named: Option<Mechanism>, file: Option<&std::path::Path>) -> Result<Mechanism, String> {
    match file {
        Some(path) => crate::mechanism_file::load(path),
        None => Ok(named.unwrap_or(Mechanism::Fenced)),
    }
}

pub fn parse_gateway(text: &str) -> Result<GatewayMode, String> {
    text.parse()
}

pub fn parse_count(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(count) if count > 0 => Ok(count),
        _ => Err(format!("expected a positive whole number of seeds, got '{text}'")),
    }
}

pub fn parse_runs(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(runs) if runs > 0 => Ok(runs),
        _ => Err(format!("expected a positive number of runs, got '{text}'")),
    }
}

pub fn parse_jobs(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(jobs) if (1..=256).contains(&jobs) => Ok(jobs),
        _ => Err(format!("expected a number of threads from 1 to 256, got '{text}'")),
    }
}

pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

pub fn parse_seed(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("the seed must be a whole number from 0 to {}, got '{text}'", u64::MAX))
}

/// A TTL from 1 ms to the world's limit on durations (the same a replay file meets).
pub fn parse_ttl(text: &str) -> Result<u64, String> {
    let most = crate::sim::Limits::DURATION_MS;
    match text.parse::<i128>() {
        Ok(ms) if ms > 0 && ms <= i128::from(most) => Ok(ms as u64),
        Ok(ms) if ms > 0 => Err(format!("the TTL may be at most {most} ms (one day), got {ms}")),
        Ok(ms) => Err(format!("the TTL must be a positive number of milliseconds, got {ms}")),
        Err(_) => Err(format!("the TTL must be a whole number of milliseconds, got '{text}'")),
    }
}
