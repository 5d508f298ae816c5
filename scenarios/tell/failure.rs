//! A failure told as a story, and where two runs of one plan part.

use crate::check::violations;
use crate::runner::Outcome;
use crate::tell::story::{render_story, story};
use fencesim_sim::{write_trace, Event};
use std::fmt::Write as _;

/// The failure as a story: the events that led to the first violation, in words, then
/// what each broken invariant says and the chain that made it. A run that broke nothing is
/// told whole.
pub fn tell_failure(outcome: &Outcome, lines_before: usize) -> String {
    let mut out = String::new();
    let lines = story(outcome);
    let first = violations(&outcome.checks).map(|(_, breach)| breach.at_ms).min();
    let Some(first_at) = first else {
        out.push_str(&render_story(outcome, &lines, usize::MAX));
        out.push_str("no invariant was broken\n");
        return out;
    };
    let upto: Vec<_> = lines.into_iter().filter(|line| line.at_ms <= first_at).collect();
    let skip = upto.len().saturating_sub(lines_before);
    if skip > 0 {
        let _ = writeln!(out, "... {skip} earlier lines");
    }
    out.push_str(&render_story(outcome, &upto[skip..], usize::MAX));
    out.push_str(&violations_told(outcome));
    let money = crate::tell::money::money_words(&crate::tell::money::money_view(&outcome.record.events));
    let _ = writeln!(out, "money: {money}");
    out.push_str(&crate::tell::fix::fix_lines(outcome, ""));
    out
}

/// Each violation's line, and under it the chain that made it: a sentence, then its
/// events, each with its time.
pub fn violations_told(outcome: &Outcome) -> String {
    let mut out = String::new();
    for check in outcome.checks.iter().filter(|check| check.is_violation()) {
        let breach = &check.breaches[0];
        let _ = writeln!(
            out,
            "VIOLATION {} ({}), first at {}: {}",
            check.invariant,
            crate::tell::demo::times(check.breaches.len()),
            outcome.scenario.base.plus(breach.at_ms),
            breach.detail
        );
        let Some(chain) = outcome.chain(check) else { continue };
        let _ = writeln!(out, "  why: {}", chain.summary);
        for (number, step) in chain.steps.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:>2}. {}  {}",
                number + 1,
                outcome.scenario.base.plus(step.at_ms),
                step.text
            );
        }
    }
    out
}

/// Where two histories of the same run part, if they do.
pub fn first_difference(first: &Outcome, second: &Outcome) -> Option<String> {
    let (one, two) = (&first.record.events, &second.record.events);
    let index = (0..one.len().max(two.len())).find(|&i| one.get(i) != two.get(i))?;
    let show = |outcome: &Outcome, event: Option<&Event>| match event {
        Some(event) => {
            let mut bytes = Vec::new();
            write_trace(std::slice::from_ref(event), outcome.scenario.base, &mut bytes).expect("in memory");
            String::from_utf8_lossy(&bytes).trim_end().to_owned()
        }
        None => "(no event: the history ended)".to_owned(),
    };
    Some(format!(
        "event {index} differs:\n  first run:  {}\n  second run: {}",
        show(first, one.get(index)),
        show(second, two.get(index))
    ))
}
