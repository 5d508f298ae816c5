//! The timeline page: a run (or runs of the same fault plan under several mechanisms) on
//! one time axis, as one self-contained HTML file that opens from disk. This module turns
//! a run's recorded history into what the page draws (`RunView`); `lanes` derives the
//! bars and marks, `page` writes the file, and `page.js` draws it in the browser.

mod lanes;
mod page;

pub use lanes::Lanes;
pub use page::timeline_page;

use crate::runner::{run_with, Outcome};
use crate::tell::story::story;
use crate::tell::write::write_whole;
use fencesim_model::Mechanism;
use serde::Serialize;
use std::path::Path;

/// A span of time on one worker's lane: a belief, a lease, a pause or crash, or a
/// folded stretch of routine rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bar {
    pub worker: usize,
    pub from: u64,
    pub to: u64,
    pub label: String,
    /// The event that opened it.
    pub event: usize,
}

/// One event drawn as a mark, on a worker's lane or a shared one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mark {
    pub at: u64,
    /// `write` (on its worker's lane), `money` (the gateway's lane) or `fault` (the faults' lane).
    pub lane: &'static str,
    pub worker: usize,
    /// How it is drawn: `ok`, `rejected`, `paid`, `paid-again`, `replayed`, `found`, `none`.
    pub kind: &'static str,
    pub label: String,
    pub event: usize,
    /// The folded stretch it belongs to, if any: drawn only when that fold is open.
    pub fold: Option<usize>,
}

/// A row whose history was not routine: its state and fence after each accepted write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RowView {
    pub refund: String,
    /// `[at, state, fence, event]` after each accepted write; it starts pending.
    pub changes: Vec<(u64, &'static str, i64, usize)>,
}

/// One breach of an invariant or a diagnostic, where it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BreachView {
    pub invariant: &'static str,
    /// A diagnostic is shown, but does not fail a run.
    pub diagnostic: bool,
    pub at: u64,
    pub detail: String,
    /// The first event at that moment.
    pub event: usize,
    /// The story line told at (or last before) that moment.
    pub line: usize,
}

/// One line of the run's story, with the first event at its moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoryLine {
    pub at: u64,
    pub actor: String,
    pub text: String,
    pub event: usize,
}

/// Everything the page draws of one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    pub title: String,
    pub mechanism: String,
    pub gateway: String,
    pub seed: u64,
    pub trace_hash: String,
    pub passed: bool,
    pub replay: String,
    /// The wall-clock time of the simulation's zero, in milliseconds since midnight.
    pub base: u64,
    pub end: u64,
    pub workers: Vec<String>,
    #[serde(flatten)]
    pub lanes: Lanes,
    pub breaches: Vec<BreachView>,
    pub story: Vec<StoryLine>,
    /// Every event, as a line of the trace (`fencesim run --trace`).
    pub events: Vec<String>,
}

/// The first event at or after `at_ms` (events are in time order).
fn event_at(outcome: &Outcome, at_ms: u64) -> usize {
    let events = &outcome.record.events;
    events.partition_point(|event| event.at_ms < at_ms).min(events.len().saturating_sub(1))
}

fn story_lines(outcome: &Outcome) -> Vec<StoryLine> {
    story(outcome)
        .into_iter()
        .map(|line| StoryLine {
            at: line.at_ms,
            event: event_at(outcome, line.at_ms),
            actor: line.actor,
            text: line.text,
        })
        .collect()
}

/// Every breach of every check that does not hold, in time order, each with its story line.
fn breaches(outcome: &Outcome, story: &[StoryLine]) -> Vec<BreachView> {
    let mut all: Vec<BreachView> = outcome
        .checks
        .iter()
        .flat_map(|check| {
            check.breaches.iter().map(|breach| BreachView {
                invariant: check.invariant,
                diagnostic: !check.kind.fails_runs(),
                at: breach.at_ms,
                detail: breach.detail.clone(),
                event: event_at(outcome, breach.at_ms),
                line: story.partition_point(|line| line.at <= breach.at_ms).saturating_sub(1),
            })
        })
        .collect();
    all.sort_by_key(|breach| breach.at);
    all
}

/// What the page draws of `outcome`, under `title`.
pub fn run_view(outcome: &Outcome, title: &str) -> RunView {
    let world = &outcome.scenario.world;
    let story = story_lines(outcome);
    let lanes = lanes::lanes(outcome);
    let events = String::from_utf8(outcome.trace_bytes()).expect("the trace is JSON, so UTF-8");
    RunView {
        title: title.to_owned(),
        mechanism: world.mechanism.to_string(),
        gateway: world.gateway_mode.to_string(),
        seed: outcome.record.seed,
        trace_hash: format!("{:016x}", outcome.trace_hash),
        passed: outcome.passed(),
        replay: outcome.replay_command(),
        base: outcome.scenario.base.0,
        end: outcome.record.ended_at_ms,
        workers: (0..world.workers).map(|worker| fencesim_model::WorkerId(worker).to_string()).collect(),
        lanes,
        breaches: breaches(outcome, &story),
        story,
        events: events.lines().map(str::to_owned).collect(),
    }
}

fn run_title(outcome: &Outcome) -> String {
    let world = &outcome.scenario.world;
    let planted = outcome.mutant.map(|mutant| format!(", mutant {mutant} planted")).unwrap_or_default();
    format!("{} ({} gateway{planted})", world.mechanism, world.gateway_mode)
}

/// The page of one run, with the same fault plan under `beside` drawn below it (same
/// world, seed, gateway and planted bug): written whole at `path`. `again` is the command
/// that runs it again.
pub fn write_run_page(
    path: &Path,
    outcome: &Outcome,
    beside: Option<Mechanism>,
    again: &str,
) -> Result<(), String> {
    let mut first = run_view(outcome, &run_title(outcome));
    first.replay = again.to_owned();
    let mut runs = vec![first];
    if let Some(mechanism) = beside {
        let other = outcome.scenario.clone().with_mechanism(mechanism, outcome.scenario.world.gateway_mode);
        let other = run_with(&other, outcome.record.seed, outcome.mutant)?;
        let mut view = run_view(&other, &format!("The same fault plan under {}", run_title(&other)));
        view.replay = format!("{again} --html {} --beside {mechanism}", path.display());
        runs.push(view);
    }
    let title = format!("Seed {} of scenario {}", outcome.record.seed, outcome.scenario.name);
    write_whole(path, timeline_page(&title, &runs).as_bytes())
        .map_err(|e| format!("cannot write the page to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{run, DEFAULT_SEED};
    use crate::scenario::worked_example;
    use fencesim_sim::GatewayMode;

    /// The worked example under the fence, as the article tells it: A believes it holds
    /// the lease with token 33 from 10:00:00 until it is turned away at 10:00:34, Redis's
    /// epoch 1 ends at 10:00:30, A is frozen from 10:00:26 to 10:00:34, and r_815 goes
    /// sending with fence 33, then with B's 34, then sent with 34.
    #[test]
    fn the_worked_example_is_drawn_as_the_article_tells_it() {
        let scenario = worked_example().with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent);
        let view = run_view(&run(&scenario, DEFAULT_SEED).unwrap(), "fenced");
        let a = &view.lanes.believed[0];
        assert_eq!((a.worker, a.from, a.to), (0, 0, 34_000));
        assert!(a.label.ends_with("token 33"), "{}", a.label);
        let epochs: Vec<(usize, u64, u64)> =
            view.lanes.leases.iter().map(|bar| (bar.worker, bar.from, bar.to)).collect();
        assert_eq!(epochs[0], (0, 0, 30_000));
        assert_eq!((epochs[1].0, epochs[1].1), (1, 31_000));
        let pause: Vec<(usize, u64, u64)> =
            view.lanes.bands.iter().map(|bar| (bar.worker, bar.from, bar.to)).collect();
        assert_eq!(pause, [(0, 26_000, 34_000)]);
        assert_eq!(view.lanes.rows[0].refund, "r_815");
        let changes: Vec<(u64, &str, i64)> =
            view.lanes.rows[0].changes.iter().map(|c| (c.0, c.1, c.2)).collect();
        assert_eq!(changes, [(26_000, "sending", 33), (31_005, "sending", 34), (31_030, "sent", 34)]);
        let rejected: Vec<&Mark> = view.lanes.marks.iter().filter(|mark| mark.kind == "rejected").collect();
        assert_eq!(rejected.len(), 1);
        assert_eq!((rejected[0].at, rejected[0].worker, rejected[0].fold), (34_000, 0, None));
        assert!(
            view.events[rejected[0].event].contains("\"rows\":0"),
            "the mark's event is the rejected write"
        );
        // A's 814 routine rows are one folded band, and every mark in it belongs to it
        let fold = &view.lanes.folds[0];
        assert_eq!((fold.worker, fold.from), (0, 0));
        assert!(fold.label.starts_with("r_001 .. r_814: 814 routine rows"), "{}", fold.label);
        assert!(view.lanes.marks.iter().filter(|mark| mark.fold == Some(0)).all(|mark| mark.at <= fold.to));
        // each story line points at an event of its own moment
        for line in &view.story {
            let at = format!("\"at\":\"{}\"", fencesim_sim::WallMs(view.base).plus(line.at));
            assert!(
                view.events[line.event].contains(&at),
                "{} {}: {}",
                line.at,
                line.text,
                view.events[line.event]
            );
        }
    }
}
