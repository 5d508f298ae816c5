//! Each process of a live run writes what it did as JSON Lines, one event a line with the
//! wall-clock microsecond it happened at; the coordinator reads every file back and merges
//! them into one history in time order.

use crate::live::clock::wall_us;
use fencesim_sim::EventKind;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, LineWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One line of a process's event file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogLine {
    pub at_us: u64,
    pub happened: EventKind,
    /// For a refund call that landed late, or a row write a program's statement made: the
    /// wall-clock microsecond it was sent at (a late call's epoch is the sender's then, as
    /// the simulation records it; so is a write a killed process sent before it died).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_us: Option<u64>,
}

/// A process's event file. Every line is written through at once: a process that is
/// stopped or killed leaves every event it recorded behind.
pub struct EventLog {
    path: PathBuf,
    out: Mutex<LineWriter<File>>,
}

impl EventLog {
    pub fn create(path: &Path) -> Result<EventLog, String> {
        let file = File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(EventLog { path: path.to_owned(), out: Mutex::new(LineWriter::new(file)) })
    }

    /// Records `happened` now.
    pub fn record(&self, happened: EventKind) {
        self.record_at(wall_us(), happened);
    }

    pub fn record_at(&self, at_us: u64, happened: EventKind) {
        self.write(LogLine { at_us, happened, sent_us: None });
    }

    /// Records now a refund call that was sent at `sent_us` and lands late.
    pub fn record_late(&self, sent_us: u64, happened: EventKind) {
        self.write(LogLine { at_us: wall_us(), happened, sent_us: Some(sent_us) });
    }

    fn write(&self, line: LogLine) {
        let mut line = serde_json::to_vec(&line).expect("an event is JSON");
        line.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk loses the line; the checkers then see a history with a hole, which
        // they report, rather than a worker that stops for a log.
        let _ = out.write_all(&line);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Every line of every file, in wall-clock order (lines of one instant keep their file's
/// order, files the order given).
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<LogLine>, String> {
    let mut lines = Vec::new();
    for (source, path) in paths.iter().enumerate() {
        let Ok(file) = File::open(path) else { continue };
        for (number, text) in BufReader::new(file).lines().enumerate() {
            let text = text.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let line: LogLine = serde_json::from_str(&text)
                .map_err(|e| format!("{} line {}: {e}", path.display(), number + 1))?;
            lines.push((line.at_us, source, number, line));
        }
    }
    lines.sort_by_key(|&(at_us, source, number, _)| (at_us, source, number));
    Ok(lines.into_iter().map(|(_, _, _, line)| line).collect())
}
