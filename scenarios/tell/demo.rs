//! The teaching demo: the worked example told second by second under the fence, then the
//! same faults under the TTL lease alone, with what each really did.

use crate::runner::{Outcome, DEFAULT_SEED};
use crate::tell::reports::worked_example::{comparison, outcome_table};
use crate::tell::story::{render_story, story};
use fencesim_model::{group_thousands, Cents};
use std::fmt::Write as _;

const INTRO: &str = "\
Merchant m_4471 has 1,200 refunds to settle, 84,300.00 EUR in all. Two workers, A and B,
take the settlement job from a queue. Whoever holds the Redis key lock:settle:m_4471 may
work; the key has a TTL of 30 seconds so that a crashed worker cannot block the merchant
for ever. Under the fence, the holder also takes a token from INCR fence:settle:m_4471 and
every write to a refund row carries it: a claim needs a token above the row's fence, a
confirm needs the very token that claimed.

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

/// Part 1: the fenced run, whole, and what it added up to.
fn with_the_fence(out: &mut String, fenced: &Outcome) {
    let _ = writeln!(out, "\n1. With the fence (mechanism fenced, idempotent gateway)\n");
    out.push_str(&render_story(fenced, &story(fenced), usize::MAX));
    let tally = fenced.tally();
    let _ = writeln!(
        out,
        "\n   {} refunds sent, {} gateway refunds, {} moved; the store turned A away {} time(s); no invariant broken: {}.",
        group_thousands(tally.refunds_sent as u64),
        group_thousands(tally.gateway_refunds as u64),
        Cents(tally.refunded_cents),
        tally.fence_rejections,
        if fenced.passed() { "yes" } else { "NO" },
    );
}

/// Part 2: the TTL alone, from A's wake-up, and what the checkers found.
fn without_the_fence(out: &mut String, ttl_only: &Outcome) {
    let _ =
        writeln!(out, "\n2. The same faults, TTL lease alone (mechanism ttl-only, non-idempotent gateway)\n");
    let lines = story(ttl_only);
    let wake = lines.iter().position(|line| line.text.contains("resumes")).unwrap_or(0);
    out.push_str(&render_story(ttl_only, &lines[wake..], 14));
    let _ = writeln!(out, "\n   What the checkers found:");
    out.push_str(&ttl_only.breach_lines("   - ", true));
}

/// The whole demo, as text.
pub fn render(seed: u64) -> Result<String, String> {
    let outcomes = comparison(seed)?;
    let mut out = String::new();
    let _ = writeln!(out, "fencesim demo: a lock with a TTL, with and without a fencing token\n");
    out.push_str(INTRO);
    with_the_fence(&mut out, &outcomes[0]);
    without_the_fence(&mut out, &outcomes[3]);
    let _ = writeln!(out, "\n3. Outcomes, seed {seed}\n");
    out.push_str(&outcome_table(&outcomes));
    out.push('\n');
    out.push_str(MORAL);
    Ok(out)
}

/// The seed the demo uses unless told otherwise.
pub const DEMO_SEED: u64 = DEFAULT_SEED;
