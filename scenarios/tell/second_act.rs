//! The demo's second act: the worked example in a world where the batch writes two
//! stores, the refund rows and the merchant's settlement ledger, told from A's freeze on,
//! with the ledger unfenced and then fenced like the rows.

use crate::check::Check;
use crate::runner::{run, Outcome};
use crate::scenario::worked_example::{worked_example_two_stores, A};
use crate::tell::story::{render_story, story};
use fencesim_model::Mechanism;
use fencesim_sim::{Actor, GatewayMode};
use std::fmt::Write as _;

const INTRO: &str = "
4. A second store

   Now the batch writes two stores: after the gateway call, and before the confirm, each
   refund is posted to the merchant's settlement ledger (a database of its own: one entry
   per refund, and the merchant's running balance). The article: each store needs its own
   fence column, and a write to a store without one is unprotected however careful the
   other store is. The same fault plan, twice: the ledger unfenced, then fenced with the
   same token by the same rule (a holder takes the ledger's fence when its batch begins).
";

/// The lines of the story about the ledger and A's own steps, from A's wake-up on.
fn from_the_wake_up(outcome: &Outcome, limit: usize) -> String {
    let lines = story(outcome);
    let settlement = Actor::Settlement.to_string();
    let woke = lines.iter().position(|line| line.text.contains("resumes")).unwrap_or(0);
    let told: Vec<_> = lines[woke..]
        .iter()
        .filter(|line| line.actor == settlement || line.actor == A.to_string() || line.text.starts_with("A "))
        .take(limit)
        .cloned()
        .collect();
    render_story(outcome, &told, usize::MAX)
}

fn verdict(outcome: &Outcome) -> String {
    let broken: Vec<&Check> = outcome.checks.iter().filter(|check| check.is_violation()).collect();
    match broken.first() {
        None => "   Invariants: every invariant held, the second store's included.\n".to_owned(),
        Some(_) => {
            let mut out = String::from("   Invariants:\n");
            for check in broken {
                let _ = writeln!(out, "   - {}: {}", check.invariant, check.breaches[0].detail);
            }
            out
        }
    }
}

/// Part 4 of the demo.
pub fn second_act(seed: u64) -> Result<String, String> {
    let mut out = String::from(INTRO);
    for (mechanism, title) in [
        (Mechanism::FencedOneStore, "the ledger unfenced (mechanism fenced-one-store)"),
        (Mechanism::Fenced, "both stores fenced (mechanism fenced)"),
    ] {
        let scenario = worked_example_two_stores().with_mechanism(mechanism, GatewayMode::Idempotent);
        let outcome = run(&scenario, seed)?;
        let _ = writeln!(out, "\n   {title}, from A's wake-up:\n");
        out.push_str(&from_the_wake_up(&outcome, 6));
        out.push_str(&verdict(&outcome));
    }
    Ok(out)
}
