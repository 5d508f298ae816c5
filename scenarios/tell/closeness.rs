//! How close a failing run came, told: a sentence naming where the failure became likely,
//! the curve as lines of text under the story, and as a chart on the run's page.

use crate::runner::Outcome;
use crate::search::closeness::{closeness, turning_point, Closeness, Moment, TRIES};
use crate::search::Pool;
use crate::sim::WallMs;
use crate::tell::chart::{escape, number, point_panels, Axis, Panel, Point, Series};
use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;

/// How many moments the curve is drawn at.
pub const MOMENTS: usize = 10;

static NOT_INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The curve of a failing run on every core the machine has; `None` for a run that broke
/// nothing.
pub fn curve_of(outcome: &Outcome) -> Result<Option<Closeness>, String> {
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    closeness(outcome, TRIES, MOMENTS, &Pool { jobs, interrupted: &NOT_INTERRUPTED })
}

fn clock(outcome: &Outcome, at_ms: u64) -> String {
    WallMs(outcome.scenario.base.0 + at_ms).to_string()
}

fn faults(count: usize) -> String {
    match count {
        1 => "1 fault".to_owned(),
        _ => format!("{count} faults"),
    }
}

fn percent(moment: &Moment) -> String {
    format!("{:.0}%", moment.share() * 100.0)
}

/// The sentence that says where the failure became likely.
pub fn summary(outcome: &Outcome, curve: &Closeness) -> String {
    let broke = match curve.invariants.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("one of {}", many.join(", ")),
    };
    let start = &curve.moments[0];
    let mut said = format!(
        "Replayed to each moment with fresh faults after it, {} of {} continuations from the start broke {broke} again",
        start.failed, start.tried
    );
    match turning_point(curve) {
        Some((moment, before)) => {
            let _ = write!(
                said,
                "; the failure became likely at {} ({} of the plan fired by then), where the share rose from {:.0}% to {}.",
                clock(outcome, moment.at_ms),
                faults(moment.kept),
                before * 100.0,
                percent(moment)
            );
        }
        None => said.push_str("; the share never rose before the breach."),
    }
    said
}

/// The curve as text: a line for the sentence, then one per moment.
pub fn closeness_lines(outcome: &Outcome, curve: &Closeness) -> String {
    let mut out = format!("how close it came: {}\n", summary(outcome, curve));
    for moment in &curve.moments {
        let _ = writeln!(
            out,
            "  {}  {} of {} continuations broke it ({}), {} of the plan kept",
            clock(outcome, moment.at_ms),
            moment.failed,
            moment.tried,
            percent(moment),
            faults(moment.kept)
        );
    }
    out
}

/// The curve as a section of the run's page: a heading, the sentence and the chart;
/// `which` names the run on a page of several ("run 3"), `id` is the section's.
pub fn closeness_section(outcome: &Outcome, curve: &Closeness, (which, id): (&str, &str)) -> String {
    let seconds: Vec<f64> = curve.moments.iter().map(|m| m.at_ms as f64 / 1000.0).collect();
    let points = curve
        .moments
        .iter()
        .map(|moment| Point {
            x: moment.at_ms as f64 / 1000.0,
            y: moment.share() * 100.0,
            upper: None,
            title: format!(
                "{}: {} of {} continuations broke it, {} of the plan kept",
                clock(outcome, moment.at_ms),
                moment.failed,
                moment.tried,
                faults(moment.kept)
            ),
        })
        .collect();
    let panel = Panel {
        title: format!("{} fresh continuations at each moment", number(f64::from(TRIES))),
        x: Axis::linear("seconds into the run", &seconds, "s"),
        y: Axis::linear("continuations that broke it", &[0.0, 100.0], "%"),
        series: vec![Series { name: "share that broke it again".to_owned(), points }],
    };
    let heading = format!("How close {which} came");
    let chart = point_panels(&heading, 720.0, 360.0, &[panel], &[]);
    format!(
        "<section id=\"{id}\" class=\"closeness\"><h2>{heading}</h2>\n<p>{}</p>\n{chart}</section>\n",
        escape(&summary(outcome, curve))
    )
}
