//! What the outcome table's columns count, and why the TTL alone leaves fewer stale
//! confirms with an idempotent gateway than without: sentences whose every figure is read
//! from the runs the table shows.

use crate::runner::Outcome;
use fencesim_model::{group_thousands, GatewayRef, RefundId, Step, Token, WorkerId, WriteKind};
use fencesim_sim::{CallOutcome, EventKind, GatewayMode, WallMs};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// How wide the explanation's lines are.
const WIDTH: usize = 100;

/// How the worker that was frozen came back: its first gateway call after waking, and
/// when its next write to that refund (its confirm, once the call answered) came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comeback {
    pub worker: WorkerId,
    pub woke_ms: u64,
    pub refund: RefundId,
    pub called_ms: u64,
    pub outcome: CallOutcome,
    pub gateway_ref: u32,
    /// When its next write to that refund (the confirm) reached the store.
    pub answered_ms: u64,
}

/// The rows two workers both claimed after the frozen one woke.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Race {
    pub rows: usize,
    /// Rows whose two claims came in the same millisecond.
    pub same_ms: usize,
    /// Rows claimed first by one worker, by so many ms: how many of each.
    pub ahead: BTreeMap<(WorkerId, u64), usize>,
    /// Rows whose two workers' confirms (accepted or not) came in the same millisecond.
    pub confirmed_same_ms: usize,
    /// Rows whose accepted confirm came from a lease other than the last to claim.
    pub stale: usize,
}

/// Every row's accepted claims (epoch, worker, time), accepted confirms (epoch) and the
/// times of every confirm, accepted or not.
#[derive(Default)]
struct RowWrites {
    claims: Vec<(Option<u32>, WorkerId, u64)>,
    confirms: Vec<Option<u32>>,
    confirm_times: Vec<u64>,
}

/// The frozen worker's comeback, when a worker resumed and then called the gateway.
pub fn comeback(outcome: &Outcome) -> Option<Comeback> {
    let events = &outcome.record.events;
    let (woke_at, worker, woke_ms) = events.iter().enumerate().find_map(|(at, event)| match event.kind {
        EventKind::Resumed { worker } => Some((at, worker, event.at_ms)),
        _ => None,
    })?;
    let mut after = events[woke_at..].iter();
    let (refund, called_ms, call_outcome, gateway_ref) = after.find_map(|event| match &event.kind {
        EventKind::RefundCalled { worker: caller, refund, outcome, gateway_ref, .. } if *caller == worker => {
            Some((*refund, event.at_ms, *outcome, *gateway_ref))
        }
        _ => None,
    })?;
    let answered_ms = after.find_map(|event| match &event.kind {
        EventKind::Write { worker: writer, refund: written, .. }
            if *writer == worker && *written == refund =>
        {
            Some(event.at_ms)
        }
        _ => None,
    })?;
    Some(Comeback { worker, woke_ms, refund, called_ms, outcome: call_outcome, gateway_ref, answered_ms })
}

/// The race after `from_ms`: rows claimed by two workers whose later claim came from
/// then on.
pub fn race(outcome: &Outcome, from_ms: u64) -> Race {
    let mut rows: BTreeMap<RefundId, RowWrites> = BTreeMap::new();
    for event in &outcome.record.events {
        let EventKind::Write { worker, epoch, write, refund, rows: changed, .. } = &event.kind else {
            continue;
        };
        let row = rows.entry(*refund).or_default();
        match write {
            WriteKind::Claim if *changed > 0 => row.claims.push((*epoch, *worker, event.at_ms)),
            WriteKind::Claim => {}
            WriteKind::Confirm => {
                row.confirm_times.push(event.at_ms);
                if *changed > 0 {
                    row.confirms.push(*epoch);
                }
            }
        }
    }
    let mut race = Race::default();
    for row in rows.values() {
        let workers: BTreeSet<WorkerId> = row.claims.iter().map(|claim| claim.1).collect();
        let (Some(first), Some(last)) = (row.claims.first(), row.claims.last()) else { continue };
        if workers.len() < 2 || last.2 < from_ms {
            continue;
        }
        race.rows += 1;
        if first.2 == last.2 {
            race.same_ms += 1;
        } else {
            *race.ahead.entry((first.1, last.2 - first.2)).or_default() += 1;
        }
        let together = row.confirm_times.windows(2).all(|pair| pair[0] == pair[1]);
        race.confirmed_same_ms += usize::from(row.confirm_times.len() > 1 && together);
        race.stale += row.confirms.iter().filter(|epoch| **epoch != last.0).count();
    }
    race
}

/// `1 ms`, or `1 to 3 ms`.
fn span_ms(gaps: &BTreeSet<u64>) -> String {
    match (gaps.first(), gaps.last()) {
        (Some(low), Some(high)) if low == high => format!("{} ms", group_thousands(*low)),
        (Some(low), Some(high)) => format!("{} to {} ms", group_thousands(*low), group_thousands(*high)),
        _ => "0 ms".to_owned(),
    }
}

/// `293`, or `none`.
fn count(n: usize) -> String {
    if n == 0 {
        "none".to_owned()
    } else {
        group_thousands(n as u64)
    }
}

/// How the frozen worker came back, in one sentence.
fn comeback_words(outcome: &Outcome, back: &Comeback) -> String {
    let at = |ms: u64| -> WallMs { outcome.scenario.base.plus(ms) };
    let (who, refund, gateway_ref) = (back.worker, back.refund, GatewayRef(back.gateway_ref));
    let call = match back.outcome {
        CallOutcome::Created => format!("paid it again ({gateway_ref})"),
        CallOutcome::Replayed => {
            format!("was answered from the gateway's record ({gateway_ref}, no money moved)")
        }
        CallOutcome::Conflict => "met a conflict".to_owned(),
    };
    let wait = match back.answered_ms - back.called_ms {
        0 => "at once".to_owned(),
        ms => format!("{} ms later", group_thousands(ms)),
    };
    format!(
        "{who} woke at {}; its repeat call for {refund} {call}, and {who}'s confirm of {refund} followed {wait}, at {}.",
        at(back.woke_ms),
        at(back.answered_ms)
    )
}

/// One run's race, in two sentences.
fn race_words(outcome: &Outcome, back: &Comeback, race: &Race) -> String {
    let mut parts = Vec::new();
    if race.same_ms > 0 {
        parts.push(format!(
            "{} with both claims in the same millisecond",
            group_thousands(race.same_ms as u64)
        ));
    }
    for ((leader, gap), rows) in &race.ahead {
        parts.push(format!(
            "{} claimed first by {leader}, {} ms ahead",
            group_thousands(*rows as u64),
            group_thousands(*gap)
        ));
    }
    let total = outcome.tally().stale_confirms;
    let of_total = if race.stale == total {
        format!("all {} of the run's stale confirms", group_thousands(total as u64))
    } else {
        format!(
            "{} of the run's {} stale confirms",
            group_thousands(race.stale as u64),
            group_thousands(total as u64)
        )
    };
    let tally = outcome.tally();
    format!(
        "{} {} rows (of the run's {} claimed by two leases) were claimed by both workers, the later claim after {} woke: {}; {} had both confirms in the same millisecond. In {} the worker that claimed first also confirmed first, over the other's later claim: {of_total}.",
        comeback_words(outcome, back),
        group_thousands(race.rows as u64),
        group_thousands(tally.rows_claimed_by_two as u64),
        back.worker,
        parts.join(", "),
        count(race.confirmed_same_ms),
        count(race.stale),
    )
}

/// `text` cut into lines of at most `width` characters where it has spaces, every line
/// after the first indented by `hang`.
pub fn wrap(text: &str, width: usize, hang: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = hang.to_owned();
        } else if !line.is_empty() && line != hang {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The refunds paid more than once in a run, with who paid again, when and as what.
fn paid_again(outcome: &Outcome) -> Vec<String> {
    let mut paid: BTreeSet<RefundId> = BTreeSet::new();
    let mut again = Vec::new();
    for event in &outcome.record.events {
        if let EventKind::RefundCalled {
            worker, refund, outcome: CallOutcome::Created, gateway_ref, ..
        } = &event.kind
        {
            if !paid.insert(*refund) {
                again.push(format!(
                    "{refund}, paid again by {worker} at {} ({})",
                    outcome.scenario.base.plus(event.at_ms),
                    GatewayRef(*gateway_ref)
                ));
            }
        }
    }
    again
}

/// The rows claimed by two workers, and how, and the writes a fence turned away.
fn claimed_twice_and_rejected(outcome: &Outcome) -> (Vec<String>, Vec<String>) {
    let mut claimers: BTreeMap<RefundId, Vec<(WorkerId, Option<Token>)>> = BTreeMap::new();
    let mut rejections = Vec::new();
    for event in &outcome.record.events {
        match &event.kind {
            EventKind::Write { worker, write: WriteKind::Claim, refund, rows, token, .. } if *rows > 0 => {
                claimers.entry(*refund).or_default().push((*worker, *token));
            }
            EventKind::Step { worker, step: Step::FenceViolation { violation } } => rejections.push(format!(
                "{worker}'s {} of {} with token {} at {}",
                violation.write,
                violation.refund,
                violation.token,
                outcome.scenario.base.plus(event.at_ms)
            )),
            _ => {}
        }
    }
    let twice = claimers
        .iter()
        .filter(|(_, claims)| claims.iter().map(|claim| claim.0).collect::<BTreeSet<_>>().len() > 1)
        .map(|(refund, claims)| {
            let by: Vec<String> = claims
                .iter()
                .map(|(worker, token)| match token {
                    Some(token) => format!("{worker} with token {token}"),
                    None => format!("{worker} without a token"),
                })
                .collect();
            format!("{refund} ({})", by.join(", then "))
        })
        .collect();
    (twice, rejections)
}

/// `; under fenced, non-idempotent: r_815 ...`, for the runs with at most `few` examples;
/// the gateway modes of one mechanism named together when their examples are the same.
fn examples(outcomes: &[Outcome], few: usize, of: impl Fn(&Outcome) -> Vec<String>) -> String {
    let mut found: Vec<(String, Vec<String>, String)> = Vec::new();
    for outcome in outcomes {
        let these = of(outcome).join(", ");
        if these.is_empty() || of(outcome).len() > few {
            continue;
        }
        let world = &outcome.scenario.world;
        let (mechanism, mode) = (world.mechanism.to_string(), world.gateway_mode.to_string());
        match found.last_mut() {
            Some((same, modes, text)) if *same == mechanism && *text == these => modes.push(mode),
            _ => found.push((mechanism, vec![mode], these)),
        }
    }
    let mut out = String::new();
    for (mechanism, modes, text) in found {
        let _ = write!(out, "; under {mechanism}, {}: {text}", modes.join(" and "));
    }
    out
}

/// What the columns that are not obvious count, with the runs' own examples where there
/// are few.
fn columns(outcomes: &[Outcome]) -> String {
    let bullets = [
        format!(
            "double refunds: money that left the gateway more than once for one refund{}.",
            examples(outcomes, 3, paid_again)
        ),
        "stale confirms: rows marked sent by a lease (epoch) other than the one that made the row's last accepted claim."
            .to_owned(),
        format!(
            "rows claimed by two leases: rows with accepted claims from two epochs{}.",
            examples(outcomes, 3, |outcome| claimed_twice_and_rejected(outcome).0)
        ),
        format!(
            "fence rejections: writes the store turned away because their token did not fit the row's fence, each ending its writer's batch{}.",
            examples(outcomes, 3, |outcome| claimed_twice_and_rejected(outcome).1)
        ),
    ];
    let mut out = String::from("What the columns count:\n");
    for bullet in bullets {
        out.push_str(&wrap(&format!("- {bullet}"), WIDTH, "  "));
    }
    out
}

/// The explanation printed under the outcome table: `outcomes` are the comparison's runs.
pub fn explain(outcomes: &[Outcome]) -> String {
    let mut out = columns(outcomes);
    let races: Vec<(&Outcome, Comeback, Race)> = outcomes
        .iter()
        .filter_map(|outcome| {
            let back = comeback(outcome)?;
            let race = race(outcome, back.woke_ms);
            (race.rows > 0).then_some((outcome, back, race))
        })
        .collect();
    if races.is_empty() {
        return out;
    }
    out.push_str("\nWhere the stale confirms come from:\n");
    for (outcome, back, race) in &races {
        let world = &outcome.scenario.world;
        let bullet =
            format!("- {}, {}: {}", world.mechanism, world.gateway_mode, race_words(outcome, back, race));
        out.push_str(&wrap(&bullet, WIDTH, "  "));
    }
    out.push_str(&why_idempotent_is_fewer(&races));
    out
}

/// The reason, said only when these runs show it: the idempotent gateway's run had fewer
/// stale confirms, most of its rows claimed by both workers in the same millisecond, and
/// the other run none, the same worker ahead on every row and confirming first on each.
fn why_idempotent_is_fewer(races: &[(&Outcome, Comeback, Race)]) -> String {
    let mode =
        |mode: GatewayMode| races.iter().find(|(outcome, ..)| outcome.scenario.world.gateway_mode == mode);
    let (Some((_, woke, lockstep)), Some((_, woke_again, behind))) =
        (mode(GatewayMode::Idempotent), mode(GatewayMode::NonIdempotent))
    else {
        return String::new();
    };
    let leaders: BTreeSet<WorkerId> = behind.ahead.keys().map(|(leader, _)| *leader).collect();
    let gaps: BTreeSet<u64> = behind.ahead.keys().map(|(_, gap)| *gap).collect();
    let shown = lockstep.stale < behind.stale
        && (woke.worker, woke.refund) == (woke_again.worker, woke_again.refund)
        && woke.answered_ms == woke.called_ms
        && woke_again.answered_ms > woke_again.called_ms
        && lockstep.same_ms * 2 > lockstep.rows
        && lockstep.stale < lockstep.rows
        && lockstep.confirmed_same_ms == lockstep.rows
        && behind.same_ms == 0
        && behind.stale == behind.rows
        && leaders.len() == 1
        && !leaders.contains(&woke.worker);
    let Some(leader) = leaders.first().filter(|_| shown) else { return String::new() };
    let why = format!(
        "Why fewer with the idempotent gateway: it answers a repeat call with the first call's answer, at once \
         when that call has finished, else when it finishes. So {who} lost no time on {refund}, and from then on the two \
         workers confirmed each row in the same millisecond. Within one millisecond the simulation's seeded \
         scheduler picks who runs first, so the worker that claimed first confirmed first on only some rows (another \
         --seed may give another count). Without idempotency every call waits out its own latency: {who}'s repeat call \
         for {refund} paid again and put {who} {} behind {leader}, where it stayed, and {leader} confirmed first on \
         every row.",
        span_ms(&gaps),
        who = woke.worker,
        refund = woke.refund,
    );
    format!("\n{}", wrap(&why, WIDTH, ""))
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_cuts_at_spaces_and_indents_every_line_after_the_first() {
        assert_eq!(wrap("- one two three four", 10, "  "), "- one two\n  three\n  four\n");
        assert_eq!(wrap("short", 10, "  "), "short\n");
        assert_eq!(wrap("a-word-longer-than-the-width b", 5, ""), "a-word-longer-than-the-width\nb\n");
    }
}
