//! The timeline page: a run (or runs of the same fault plan under several mechanisms) on
//! one time axis, as one self-contained HTML file that opens from disk. This module turns
//! a run's recorded history into what the page draws (`RunView`); `lanes` derives the
//! bars and marks, `page` writes the file, and `page.js` draws it in the browser.

mod lanes;
mod page;
mod spans;
mod terms;

pub use lanes::{Lanes, LeaseBar};
pub use page::timeline_page;

use crate::check::chain::Chain;
use crate::files::write::write_whole;
use crate::runner::{run_with, Outcome};
use crate::tell::story::story;
use fencesim_model::Mechanism;
use serde::Serialize;
use std::collections::BTreeSet;
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
    /// How it is drawn: `ok`, `rejected`, `paid`, `paid-again`, `replayed`, `found`, `lied`,
    /// `none`.
    pub kind: &'static str,
    /// Its words; empty inside a routine fold, where the page tells it from its event.
    pub label: String,
    pub event: usize,
    /// The folded stretch it belongs to, if any: drawn only when that fold is open.
    pub fold: Option<usize>,
    /// For a write: `claim` or `confirm`, the token it carried, the row's fence just
    /// before it, and (outside the routine folds) the protocol's rule with how the write
    /// fared by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence_before: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// A folded stretch of one worker's routine rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fold {
    #[serde(flatten)]
    pub bar: Bar,
    /// `settled` (claimed, paid and confirmed) or `skipped` (found already sent).
    pub kind: &'static str,
}

/// A request or a reply held up on a worker's hop, or a Redis instance that refuses
/// connections while it restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    /// The worker whose request it holds up (none for a Redis instance's downtime).
    pub worker: Option<usize>,
    /// `redis`, `database` or `gateway`; the instance, for a downtime.
    pub hop: String,
    pub from: u64,
    pub to: u64,
    pub label: String,
    /// The fault that caused it.
    pub event: usize,
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
    /// The event that broke it; for a check of the state at rest, the first event at the
    /// moment it was checked.
    pub event: usize,
    /// The story line that tells that event, or the last one before it.
    pub line: usize,
}

/// One line of the run's story, with the event it tells.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoryLine {
    pub at: u64,
    pub actor: String,
    pub text: String,
    pub event: usize,
}

/// The chain of a violated invariant's first breach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainView {
    pub invariant: &'static str,
    /// The breach it explains, in `breaches`.
    pub breach: usize,
    pub found: bool,
    pub summary: String,
    pub steps: Vec<ChainStepView>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainStepView {
    pub event: usize,
    pub at: u64,
    pub text: String,
}

fn chain_views(chains: Vec<(&'static str, Chain)>, breaches: &[BreachView]) -> Vec<ChainView> {
    let first = |invariant: &str| breaches.iter().position(|breach| breach.invariant == invariant);
    chains
        .into_iter()
        .filter_map(|(invariant, chain)| {
            Some(ChainView {
                invariant,
                breach: first(invariant)?,
                found: chain.found,
                summary: chain.summary,
                steps: chain
                    .steps
                    .into_iter()
                    .map(|step| ChainStepView { event: step.event, at: step.at_ms, text: step.text })
                    .collect(),
            })
        })
        .collect()
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
    pub money: crate::tell::money::MoneyView,
    /// For each invariant the run broke, the change that would have stopped it, if known.
    pub fixes: Vec<crate::tell::fix::Fix>,
    /// The glossary's entries for the names this run's page uses: its mechanism, the
    /// invariants and diagnostics it names.
    pub terms: Vec<terms::Term>,
    /// The wall-clock time of the simulation's zero, in milliseconds since midnight.
    pub base: u64,
    pub end: u64,
    pub workers: Vec<String>,
    #[serde(flatten)]
    pub lanes: Lanes,
    pub breaches: Vec<BreachView>,
    /// Why each violated invariant broke: its first breach's chain.
    pub chains: Vec<ChainView>,
    pub story: Vec<StoryLine>,
    /// Every event, as a line of the trace (`fencesim run --trace`).
    /// Every event the page can select, by its index in the history, as a line of the
    /// trace (`fencesim run --trace`): each mark's, bar's, row change's, breach's, story
    /// line's and chain step's. The routine steps between them are left out, which keeps
    /// a page of three long runs small; the whole trace is one `--trace` away.
    /// Each other event is an empty line.
    pub events: Vec<String>,
    /// How many events the history holds in all.
    pub event_count: usize,
}

/// The first event at or after `at_ms` (events are in time order).
fn event_at(outcome: &Outcome, at_ms: u64) -> usize {
    let events = &outcome.record.events;
    events.partition_point(|event| event.at_ms < at_ms).min(events.len().saturating_sub(1))
}

/// The run's story, and a line of its own for each chain step the story leaves untold (a
/// routine read, say): a click on any step then selects a line that tells that step.
fn story_lines(outcome: &Outcome, chains: &[(&'static str, Chain)]) -> Vec<StoryLine> {
    let mut lines: Vec<StoryLine> = story(outcome)
        .into_iter()
        .map(|line| StoryLine { at: line.at_ms, event: line.event, actor: line.actor, text: line.text })
        .collect();
    let told: BTreeSet<usize> = lines.iter().map(|line| line.event).collect();
    let mut untold: Vec<StoryLine> = (chains.iter())
        .flat_map(|(_, chain)| &chain.steps)
        .filter(|step| !told.contains(&step.event))
        .map(|step| StoryLine {
            at: step.at_ms,
            actor: outcome.record.events[step.event].kind.actor().to_string(),
            text: step.text.clone(),
            event: step.event,
        })
        .collect();
    untold.sort_by_key(|line| line.event);
    untold.dedup_by_key(|line| line.event);
    for line in untold {
        let at = lines.partition_point(|told| told.event <= line.event);
        lines.insert(at, line);
    }
    lines
}

/// The story line that tells `event`, or the last one before it.
pub(crate) fn line_of(story: &[StoryLine], event: usize) -> usize {
    story
        .iter()
        .position(|line| line.event == event)
        .unwrap_or_else(|| story.iter().rposition(|line| line.event <= event).unwrap_or(0))
}

/// Every breach of every check that does not hold, in time order, each with its story line.
fn breaches(outcome: &Outcome, story: &[StoryLine]) -> Vec<BreachView> {
    let mut all: Vec<BreachView> = outcome
        .checks
        .iter()
        .flat_map(|check| {
            check.breaches.iter().map(|breach| {
                let event = breach.event.unwrap_or_else(|| event_at(outcome, breach.at_ms));
                BreachView {
                    invariant: check.invariant,
                    diagnostic: !check.kind.fails_runs(),
                    at: breach.at_ms,
                    detail: breach.detail.clone(),
                    event,
                    line: line_of(story, event),
                }
            })
        })
        .collect();
    all.sort_by_key(|breach| breach.at);
    all
}

/// The events the page can select.
fn selectable(
    lanes: &Lanes,
    breaches: &[BreachView],
    story: &[StoryLine],
    chains: &[ChainView],
) -> BTreeSet<usize> {
    let leases = lanes.leases.iter().flat_map(|lease| [lease.bar.event, lease.until]);
    let bars = [&lanes.believed, &lanes.bands].into_iter().flatten().map(|bar| bar.event).chain(leases);
    let folds = lanes.folds.iter().map(|fold| fold.bar.event);
    let spans = lanes.delays.iter().chain(&lanes.downtime).map(|span| span.event);
    let marks = lanes.marks.iter().map(|mark| mark.event);
    let rows = lanes.rows.iter().flat_map(|row| row.changes.iter().map(|change| change.3));
    let told = breaches.iter().map(|breach| breach.event).chain(story.iter().map(|line| line.event));
    let chained = chains.iter().flat_map(|chain| chain.steps.iter().map(|step| step.event));
    bars.chain(folds).chain(spans).chain(marks).chain(rows).chain(told).chain(chained).collect()
}

/// What the page draws of `outcome`, under `title`.
pub fn run_view(outcome: &Outcome, title: &str) -> RunView {
    let world = &outcome.scenario.world;
    // the chains are found once: the story gives their untold steps a line, the page draws them
    let found = outcome.chains();
    let story = story_lines(outcome, &found);
    let lanes = lanes::lanes(outcome);
    let breaches = breaches(outcome, &story);
    let trace = String::from_utf8(outcome.trace_bytes()).expect("the trace is JSON, so UTF-8");
    let chains = chain_views(found, &breaches);
    let wanted = selectable(&lanes, &breaches, &story, &chains);
    let keep = |(index, line): (usize, &str)| match wanted.contains(&index) {
        true => line.to_owned(),
        false => String::new(),
    };
    let events = trace.lines().enumerate().map(keep).collect();
    RunView {
        title: title.to_owned(),
        mechanism: world.mechanism.to_string(),
        gateway: world.gateway_mode.to_string(),
        seed: outcome.record.seed,
        trace_hash: format!("{:016x}", outcome.trace_hash),
        passed: outcome.passed(),
        replay: outcome.replay_command(),
        money: crate::tell::money::money_view(&outcome.record.events),
        fixes: fixes(outcome),
        terms: terms::terms(outcome),
        base: outcome.scenario.base.0,
        end: outcome.record.ended_at_ms,
        workers: (0..world.workers).map(|worker| fencesim_model::WorkerId(worker).to_string()).collect(),
        lanes,
        chains,
        breaches,
        story,
        events,
        event_count: outcome.record.events.len(),
    }
}

/// The change that would have stopped each broken invariant, where one is known.
fn fixes(outcome: &Outcome) -> Vec<crate::tell::fix::Fix> {
    let broken = outcome.checks.iter().filter(|check| check.kind.fails_runs() && !check.breaches.is_empty());
    broken.filter_map(|check| crate::tell::fix::fix_for(outcome, check.invariant)).collect()
}

/// A failing run's page title, as a bug report's: what broke, under which mechanism and
/// planted bug, after which fault (the first that fired), and the seed.
pub fn page_title(outcome: &Outcome) -> String {
    page_title_of(outcome, &run_title(outcome))
}

/// `page_title`, naming what ran as `who` (a mechanism, or a team's program).
fn page_title_of(outcome: &Outcome, who: &str) -> String {
    let seed = format!("seed {} of scenario {}", outcome.record.seed, outcome.scenario.name);
    let broken: Vec<&str> = (outcome.checks.iter())
        .filter(|check| check.kind.fails_runs() && !check.breaches.is_empty())
        .map(|check| check.invariant)
        .collect();
    if broken.is_empty() {
        return format!("Every invariant held under {who}: {seed}");
    }
    let first = outcome.record.events.iter().find_map(|event| match &event.kind {
        fencesim_sim::EventKind::FaultFired { fault, .. } => Some((event.at_ms, fault)),
        _ => None,
    });
    let after = match first {
        Some((at, fault)) => format!(
            "after {} at {}",
            crate::fault_words::fault_words(fault).0,
            outcome.scenario.base.plus(at)
        ),
        None => "with no fault at all".to_owned(),
    };
    let names = match broken.as_slice() {
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        [] => unreachable!("a failing run broke something"),
    };
    format!("{names} broken under {who} {after}: {seed}")
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
    let again_beside = |mechanism| format!("{again} --html {} --beside {mechanism}", path.display());
    let curve = crate::tell::closeness::curve_of(outcome)?;
    let more = curve
        .map(|curve| crate::tell::closeness::closeness_section(outcome, &curve, ("the run", "closeness")))
        .unwrap_or_default();
    write_page(path, outcome, (&run_title(outcome), &more), beside, (again, &again_beside))
}

/// The page of a team's worker program's run (`fencesim worker`), the program named as what
/// ran, with the same world and plan simulated under `beside` drawn below it.
pub fn write_program_page(
    path: &Path,
    outcome: &Outcome,
    program: &str,
    beside: Option<Mechanism>,
    again: &str,
) -> Result<(), String> {
    let who = format!("the program `{program}` ({} gateway)", outcome.scenario.world.gateway_mode);
    write_page(path, outcome, (&who, ""), beside, (again, &|_| again.to_owned()))
}

/// `more`: sections under the runs. `again`: the command that draws the page again, as
/// told under the run and under the run beside it.
fn write_page(
    path: &Path,
    outcome: &Outcome,
    (who, more): (&str, &str),
    beside: Option<Mechanism>,
    (again, again_beside): (&str, &dyn Fn(Mechanism) -> String),
) -> Result<(), String> {
    let mut first = run_view(outcome, who);
    first.replay = again.to_owned();
    let mut runs = vec![first];
    if let Some(mechanism) = beside {
        let other = outcome.scenario.clone().with_mechanism(mechanism, outcome.scenario.world.gateway_mode);
        let other = run_with(&other, outcome.record.seed, outcome.mutant)?;
        let mut view = run_view(&other, &format!("The same fault plan under {}", run_title(&other)));
        view.replay = again_beside(mechanism);
        runs.push(view);
    }
    write_whole(path, timeline_page(&page_title_of(outcome, who), &runs, more).as_bytes())
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
    /// epoch 1 ends as its key goes, the millisecond after 10:00:30, A is frozen from 10:00:26 to 10:00:34, and r_815 goes
    /// sending with fence 33, then with B's 34, then sent with 34.
    #[test]
    fn the_worked_example_is_drawn_as_the_article_tells_it() {
        let scenario = worked_example().with_mechanism(Mechanism::Fenced, GatewayMode::Idempotent);
        let view = run_view(&run(&scenario, DEFAULT_SEED).unwrap(), "fenced");
        let a = &view.lanes.believed[0];
        assert_eq!((a.worker, a.from, a.to), (0, 0, 34_000));
        assert!(a.label.ends_with("token 33"), "{}", a.label);
        let epochs: Vec<(usize, u64, u64)> =
            view.lanes.leases.iter().map(|lease| (lease.bar.worker, lease.bar.from, lease.bar.to)).collect();
        assert_eq!(epochs[0], (0, 0, 30_001));
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
        let fold = &view.lanes.folds[0].bar;
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
