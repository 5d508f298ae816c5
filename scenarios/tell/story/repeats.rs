//! Attempts that repeat: a block of lines told again and again with only its numbers
//! changed (the job handed back, the lease refused, the worker stopping) is told once,
//! then one line says how many times more and until when. A block that moves money or
//! changes a row is never folded: those lines are the story.

use super::narrator::Line;
use crate::runner::Outcome;
use fencesim_sim::EventKind;

/// The most lines a repeating block may have.
const BLOCK: usize = 4;
/// The fewest repeats that are folded.
const FEWEST: usize = 3;

/// A line's actor and words with every run of digits as one `#`: two attempts that differ
/// only in their numbers have one shape.
fn shape(line: &Line) -> (String, String) {
    let mut words = String::with_capacity(line.text.len());
    for c in line.text.chars() {
        if !c.is_ascii_digit() {
            words.push(c);
        } else if !words.ends_with('#') {
            words.push('#');
        }
    }
    (line.actor.clone(), words)
}

/// Whether the line tells nothing that moved money or changed a row.
fn idle(outcome: &Outcome, line: &Line) -> bool {
    let kind = outcome.record.events.get(line.event).map(|event| &event.kind);
    !matches!(kind, Some(EventKind::Write { rows: 1.., .. } | EventKind::RefundCalled { .. }))
}

/// How many times the block of `len` lines at `from` is told again right after itself.
fn repeats(shapes: &[(String, String)], from: usize, len: usize) -> usize {
    let mut count = 0;
    while from + (count + 2) * len <= shapes.len()
        && (0..len).all(|j| shapes[from + j] == shapes[from + (count + 1) * len + j])
    {
        count += 1;
    }
    count
}

/// The story with each run of idle repeats folded into one line after its first telling.
pub(super) fn fold_repeats(outcome: &Outcome, lines: Vec<Line>) -> Vec<Line> {
    let shapes: Vec<(String, String)> = lines.iter().map(shape).collect();
    let foldable: Vec<bool> = lines.iter().map(|line| idle(outcome, line)).collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut at = 0;
    while at < lines.len() {
        let best = (1..=BLOCK)
            .filter(|len| at + len <= lines.len() && foldable[at..at + len].iter().all(|idle| *idle))
            .map(|len| (len, repeats(&shapes, at, len)))
            .filter(|(_, count)| *count >= FEWEST)
            .max_by_key(|(len, count)| len * count);
        let Some((len, count)) = best else {
            out.push(lines[at].clone());
            at += 1;
            continue;
        };
        out.extend(lines[at..at + len].iter().cloned());
        let (first, last) = (&lines[at + len], &lines[at + (count + 1) * len - 1]);
        let told = if len == 1 { "the same line".to_owned() } else { format!("the same {len} lines") };
        // the last block's line whose numbers moved on, as the example of the last repeat
        let changed = (0..len).find(|&j| lines[at + j].text != lines[at + count * len + j].text).unwrap_or(0);
        let text = format!(
            "... {told} {count} more times, with other numbers, until {}; the last: {}",
            outcome.scenario.base.plus(last.at_ms),
            lines[at + count * len + changed].text
        );
        out.push(Line {
            at_ms: first.at_ms,
            event: first.event,
            actor: first.actor.clone(),
            text,
            diagram: vec![],
        });
        at += (count + 1) * len;
    }
    out
}
