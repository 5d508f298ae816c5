//! The teaching demo: the worked example told second by second under the fence, then the
//! same faults under the TTL lease alone, with what each really did.

use crate::check::Check;
use crate::runner::{Outcome, DEFAULT_SEED};
use crate::tell::outcomes::explain;
use crate::tell::reports::worked_example::{comparison, outcome_table, WORKED_EXAMPLE_PAGE};
use crate::tell::story::{render_story, story, Line};
use fencesim_model::{group_thousands, Cents, RefundId, Statements, Step, WorkerId, WriteKind};
use fencesim_sim::{EventKind, FaultKind};
use std::collections::BTreeSet;
use std::fmt::Write as _;

const INTRO: &str = "\
Merchant m_4471 has 1,200 refunds to settle, 84,300.00 EUR in all. Two workers, A and B,
take the settlement job from a queue. Whoever holds the Redis key lock:settle:m_4471 may
work; the key has a TTL of 30 seconds so that a crashed worker cannot block the merchant
for ever. Under the fence, the holder also takes a token from INCR fence:settle:m_4471 and
every write to a refund row carries it: a claim needs a token above the row's fence, a
confirm needs the very token that claimed.
";

const EPOCHS: &str = "
The story numbers the leases Redis really grants, in the order it grants them, and calls
each an epoch: epoch 1 is the first lease granted, epoch 2 the next, whichever worker holds
it and whatever token it carries. Every write counts against the epoch of its writer's own
lease, whatever the writer believes; the checkers judge by the epochs.

At 10:00:26 worker A stalls right after claiming r_815, before it calls the gateway: a
stop-the-world pause of 8 seconds. Nothing else is scripted; every time below comes out
of the simulation.
";

const MORAL: &str = "\
Why the TTL alone fails: the key expired at 10:00:30 and nothing told A. When A woke at
10:00:34 it still believed it held the lock, and without a fence nothing in the database
could tell its writes from B's. A longer TTL only moves the window: a pause longer than
the TTL, or a crash that blocks the merchant for the whole TTL, is always possible.
The fence decides who owns a row; the idempotency key on the gateway decides what the
outside world does about the one call the fence cannot see.
";

/// How many lines of the race part 2 shows once the frozen worker is back.
const RACE_LINES: usize = 30;

/// The two statements the fence rests on, as the store executes them.
fn fence_sql() -> String {
    let mut out = String::from(
        "\nThe fence is these two statements, as the store runs them (?1 is the token, ?2 the refund id);\n\
         a write that matches no row changes nothing, and the worker hears 0 rows:\n\n",
    );
    for (name, sql) in
        [("claim", Statements::SQLITE.claim_fenced), ("confirm", Statements::SQLITE.confirm_fenced)]
    {
        for (at, line) in sql.lines().enumerate() {
            let label = if at == 0 { format!("{name}:") } else { String::new() };
            let indent = if at == 0 { "" } else { "  " };
            let _ = writeln!(out, "   {label:<9}{indent}{}", line.trim());
        }
    }
    out
}

/// `once`, `twice` or `3 times`.
pub(crate) fn times(count: usize) -> String {
    match count {
        1 => "once".to_owned(),
        2 => "twice".to_owned(),
        _ => format!("{} times", group_thousands(count as u64)),
    }
}

use crate::tell::money::money_view;

/// The money the run moved, the invariants it broke (or that every one held), and what
/// would have stopped each breach.
fn invariant_lines(outcome: &Outcome) -> String {
    let broken: Vec<&Check> = outcome.checks.iter().filter(|check| check.is_violation()).collect();
    let money =
        format!("   Money: {}.\n", crate::tell::money::money_words(&money_view(&outcome.record.events)));
    if broken.is_empty() {
        return format!("{money}   Invariants: every invariant held.\n");
    }
    let names: Vec<&str> = broken.iter().map(|check| check.invariant).collect();
    let mut out = format!("{money}   Invariants: broke {}.\n", names.join(", "));
    for check in broken {
        out.push_str(&breach_line(outcome, check));
    }
    out.push_str(&crate::tell::fix::fix_lines(outcome, "   "));
    out
}

/// `   - name (3 times), first at 10:00:34.000: what happened`.
fn breach_line(outcome: &Outcome, check: &Check) -> String {
    let breach = &check.breaches[0];
    format!(
        "   - {} ({}), first at {}: {}\n",
        check.invariant,
        times(check.breaches.len()),
        outcome.scenario.base.plus(breach.at_ms),
        breach.detail
    )
}

/// Every diagnostic, broken or not, set apart from the invariants.
fn diagnostic_lines(outcome: &Outcome) -> String {
    let mut out = String::from(
        "   Diagnostics (these do not fail a run: they show what a pause did, which a fence can make harmless):\n",
    );
    for check in outcome.checks.iter().filter(|check| !check.kind.fails_runs()) {
        if check.holds() {
            let _ = writeln!(out, "   - {}: held", check.invariant);
        } else {
            out.push_str(&breach_line(outcome, check));
        }
    }
    out
}

/// Who the store turned away, and how often.
fn rejections(outcome: &Outcome) -> String {
    let workers: BTreeSet<WorkerId> = outcome
        .record
        .events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Step { worker, step: Step::FenceViolation { .. } } => Some(worker),
            _ => None,
        })
        .collect();
    let tally = outcome.tally();
    let finished = match tally.found_sent {
        0 => String::new(),
        n => format!(
            "; {n} write(s) found their row already sent by another holder, which no fence turned away"
        ),
    };
    if tally.fence_rejections == 0 {
        return format!("the store turned no write away{finished}");
    }
    let names: Vec<String> = workers.iter().map(ToString::to_string).collect();
    format!("the store turned {} away {}{finished}", names.join(" and "), times(tally.fence_rejections))
}

/// What a lookup that finds a refund does, when this run's lookups all found none.
fn lookup_note(outcome: &Outcome) -> Option<String> {
    let lookups: Vec<(u64, WorkerId, RefundId, Option<u32>)> = outcome
        .record
        .events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Lookup { worker, refund, found } => Some((event.at_ms, worker, refund, found)),
            _ => None,
        })
        .collect();
    let (at, worker, refund, _) = *lookups.first()?;
    if lookups.iter().any(|lookup| lookup.3.is_some()) {
        return None;
    }
    Some(format!(
        "   {worker} asked the gateway about {refund} at {} because it found the row in sending: a call for\n   \
         it may already have gone out. Had the gateway named a refund, {worker} would have claimed the row and\n   \
         confirmed it without paying again; no lookup in this run found one.\n",
        outcome.scenario.base.plus(at),
    ))
}

/// Part 1: the fenced run, whole, and what it added up to.
fn with_the_fence(out: &mut String, fenced: &Outcome) {
    let _ = writeln!(out, "\n1. With the fence (mechanism fenced, idempotent gateway)\n");
    out.push_str(&render_story(fenced, &story(fenced), usize::MAX));
    let tally = fenced.tally();
    let _ = writeln!(
        out,
        "\n   {} refunds sent, {} gateway refunds, {} moved; {}.",
        group_thousands(tally.refunds_sent as u64),
        group_thousands(tally.gateway_refunds as u64),
        Cents(tally.refunded_cents),
        rejections(fenced),
    );
    out.push_str(&invariant_lines(fenced));
    out.push_str(&diagnostic_lines(fenced));
    if let Some(note) = lookup_note(fenced) {
        out.push('\n');
        out.push_str(&note);
    }
}

/// The frozen worker, when it froze and for how long, and when it resumed.
struct Freeze {
    worker: WorkerId,
    at_ms: u64,
    duration_ms: u64,
    resumed_ms: u64,
}

fn freeze(outcome: &Outcome) -> Option<Freeze> {
    let events = &outcome.record.events;
    let (worker, at_ms, duration_ms) = events.iter().find_map(|event| match event.kind {
        EventKind::FaultFired { fault: FaultKind::Pause { worker, duration_ms }, .. } => {
            Some((worker, event.at_ms, duration_ms))
        }
        _ => None,
    })?;
    let resumed_ms = events.iter().find_map(|event| match event.kind {
        EventKind::Resumed { worker: resumed } if resumed == worker => Some(event.at_ms),
        _ => None,
    })?;
    Some(Freeze { worker, at_ms, duration_ms, resumed_ms })
}

/// What the frozen worker did before it froze, in one sentence.
fn before_the_freeze(outcome: &Outcome, freeze: &Freeze) -> String {
    let worker = freeze.worker;
    let mut confirmed = Vec::new();
    let mut claimed = None;
    for event in outcome.record.events.iter().filter(|event| event.at_ms <= freeze.at_ms) {
        if let EventKind::Write { worker: writer, write, refund, rows, .. } = &event.kind {
            match write {
                _ if *writer != worker || *rows == 0 => {}
                WriteKind::Claim => claimed = Some(*refund),
                WriteKind::Confirm => confirmed.push(*refund),
            }
        }
    }
    let settled = match (confirmed.first(), confirmed.last()) {
        (Some(first), Some(last)) => {
            format!(
                "{worker} settling {first} .. {last} ({} refunds)",
                group_thousands(confirmed.len() as u64)
            )
        }
        _ => format!("{worker} settling nothing"),
    };
    let claim =
        claimed.filter(|refund| !confirmed.contains(refund)).map(|refund| format!(" and claiming {refund}"));
    format!(
        "   Same fault plan, same start, but no token: up to {} this run goes as part 1 did,\n   \
         {settled}{}, then freezing for {} ms. From there:\n\n",
        outcome.scenario.base.plus(freeze.at_ms),
        claim.unwrap_or_default(),
        group_thousands(freeze.duration_ms),
    )
}

/// The story from the freeze to a stretch of the race after the frozen worker is back.
fn race_excerpt(outcome: &Outcome, lines: &[Line], freeze: &Freeze) -> String {
    let faults = fencesim_sim::Actor::Faults.to_string();
    let at = |ms: u64| lines.iter().position(|line| line.actor == faults && line.at_ms == ms);
    let from = at(freeze.at_ms).map_or(0, |index| index + 1);
    let until = at(freeze.resumed_ms).map_or(lines.len(), |index| index + RACE_LINES).min(lines.len());
    let mut out = render_story(outcome, &lines[from..until], usize::MAX);
    if let Some(last) = lines.last().filter(|_| until < lines.len()) {
        let _ = writeln!(
            out,
            "... and {} more lines, until {}: `{}` tells them all",
            group_thousands((lines.len() - until) as u64),
            outcome.scenario.base.plus(last.at_ms),
            outcome.replay_command()
        );
    }
    out
}

/// Part 2: the TTL alone, from the freeze on, and what the checkers found.
fn without_the_fence(out: &mut String, ttl_only: &Outcome) {
    let _ =
        writeln!(out, "\n2. The same faults, TTL lease alone (mechanism ttl-only, non-idempotent gateway)\n");
    let lines = story(ttl_only);
    match freeze(ttl_only) {
        Some(freeze) => {
            out.push_str(&before_the_freeze(ttl_only, &freeze));
            out.push_str(&race_excerpt(ttl_only, &lines, &freeze));
        }
        None => out.push_str(&render_story(ttl_only, &lines, usize::MAX)),
    }
    out.push('\n');
    out.push_str(&invariant_lines(ttl_only));
    out.push_str(&diagnostic_lines(ttl_only));
}

/// The whole demo, as text.
pub fn render(seed: u64) -> Result<String, String> {
    let outcomes = comparison(seed)?;
    let mut out = String::new();
    let _ = writeln!(out, "fencesim demo: a lock with a TTL, with and without a fencing token\n");
    out.push_str(INTRO);
    out.push_str(&fence_sql());
    out.push_str(EPOCHS);
    with_the_fence(&mut out, &outcomes[0]);
    without_the_fence(&mut out, &outcomes[3]);
    let _ = writeln!(out, "\n3. Outcomes, seed {seed}\n");
    out.push_str(&outcome_table(&outcomes));
    out.push('\n');
    out.push_str(&explain(&outcomes));
    out.push_str(&crate::tell::second_act::second_act(seed)?);
    out.push('\n');
    out.push_str(MORAL);
    let _ = writeln!(out, "\nSee it on one time axis: {WORKED_EXAMPLE_PAGE} (written by `fencesim report`)");
    Ok(out)
}

/// The seed the demo uses unless told otherwise.
pub const DEMO_SEED: u64 = DEFAULT_SEED;
