//! The names a run's page uses that the fixed glossary cannot know: its mechanism (what it
//! promises, and where its tokens come from) and every invariant or diagnostic its checks
//! name (when each holds), from the catalogues that define them.

use crate::check::table::invariant;
use crate::runner::Outcome;
use fencesim_model::mechanism::TokenPolicy;
use fencesim_model::Mechanism;
use serde::Serialize;

/// A glossary entry: the id a link names (`#term-<id>`), the term, its words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Term {
    pub id: String,
    pub term: String,
    pub words: String,
}

/// Where `mechanism`'s tokens come from, in words.
pub fn token_source(mechanism: Mechanism) -> &'static str {
    match mechanism.spec().tokens {
        TokenPolicy::None => "it takes no token: its writes carry none, and no fence is compared",
        TokenPolicy::RedisIncr => {
            "its tokens come from a counter in Redis (INCR on the merchant's counter key)"
        }
        TokenPolicy::DbSequence => "its tokens come from a sequence in the refund database, not from Redis",
    }
}

/// The mechanism's entry, then one for each invariant or diagnostic the run's checks name.
pub fn terms(outcome: &Outcome) -> Vec<Term> {
    let mechanism = outcome.scenario.world.mechanism;
    let mut terms = vec![Term {
        id: format!("mechanism-{}", mechanism.name()),
        term: format!("{} (mechanism)", mechanism.name()),
        words: format!(
            "{}. {}.",
            capitalised(mechanism.spec().promise),
            capitalised(token_source(mechanism))
        ),
    }];
    for check in outcome.checks.iter().filter(|check| !check.breaches.is_empty()) {
        let Some(found) = invariant(check.invariant) else { continue };
        let kind = if check.kind.fails_runs() { "invariant" } else { "diagnostic" };
        terms.push(Term {
            id: format!("invariant-{}", found.name),
            term: format!("{} ({kind})", found.name),
            words: format!("Holds when {}.", found.holds.replace('`', "")),
        });
    }
    terms
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
