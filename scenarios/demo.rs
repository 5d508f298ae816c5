//! The teaching demo: the worked example told second by second under the fence, then the
//! same faults under the TTL lease alone, with what each really did.

use crate::narrate::{render_story, story};
use crate::runner::{run, Outcome, DEFAULT_SEED};
use crate::scenario::worked_example;
use fencesim_model::{group_thousands, Cents, Mechanism};
use fencesim_sim::GatewayMode;
use std::fmt::Write as _;

/// The four runs of the comparison: each mechanism with each gateway mode.
pub fn comparison(seed: u64) -> Result<Vec<Outcome>, String> {
    let mut outcomes = Vec::new();
    for mechanism in [Mechanism::Fenced, Mechanism::TtlOnly] {
        for gateway in GatewayMode::ALL {
            outcomes.push(run(&worked_example().with_strategy(mechanism, gateway), seed)?);
        }
    }
    Ok(outcomes)
}

/// The outcome table, as Markdown.
pub fn outcome_table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| strategy | gateway | refunds sent | gateway refunds | EUR moved | double refunds | stale confirms | rows claimed by two leases | fence rejections | violations |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for o in outcomes {
        let t = o.tally();
        let broken: Vec<&str> = o.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            o.scenario.world.mechanism,
            o.scenario.world.gateway_mode,
            group_thousands(t.refunds_sent as u64),
            group_thousands(t.gateway_refunds as u64),
            Cents(t.refunded_cents),
            t.double_refunds,
            t.stale_confirms,
            t.rows_claimed_by_two,
            t.fence_rejections,
            if broken.is_empty() { "none".to_owned() } else { broken.join(", ") },
        );
    }
    out
}

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

/// The whole demo, as text.
pub fn render(seed: u64) -> Result<String, String> {
    let outcomes = comparison(seed)?;
    let fenced = &outcomes[0];
    let ttl_only = &outcomes[3];
    let mut out = String::new();
    let _ = writeln!(out, "fencesim demo: a lock with a TTL, with and without a fencing token\n");
    out.push_str(INTRO);

    let _ = writeln!(out, "\n1. With the fence (strategy fenced, idempotent gateway)\n");
    out.push_str(&render_story(fenced, &story(fenced), usize::MAX));
    let t = fenced.tally();
    let _ = writeln!(
        out,
        "\n   {} refunds sent, {} gateway refunds, {} moved; the store turned A away {} time(s); no invariant broken: {}.",
        group_thousands(t.refunds_sent as u64),
        group_thousands(t.gateway_refunds as u64),
        Cents(t.refunded_cents),
        t.fence_rejections,
        if fenced.passed() { "yes" } else { "NO" },
    );

    let _ =
        writeln!(out, "\n2. The same faults, TTL lease alone (strategy ttl-only, non-idempotent gateway)\n");
    let lines = story(ttl_only);
    let wake = lines.iter().position(|l| l.text.contains("resumes")).unwrap_or(0);
    out.push_str(&render_story(ttl_only, &lines[wake..], 14));
    let _ = writeln!(out, "\n   What the checkers found:");
    out.push_str(&ttl_only.breach_lines("   - ", true));

    let _ = writeln!(out, "\n3. Outcomes, seed {seed}\n");
    out.push_str(&outcome_table(&outcomes));
    out.push('\n');
    out.push_str(MORAL);
    Ok(out)
}

/// The seed the demo uses unless told otherwise.
pub const DEMO_SEED: u64 = DEFAULT_SEED;
