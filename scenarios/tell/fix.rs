//! The one change that would have stopped a failing run's chain, as its page and its
//! terminal story suggest it: for a planted bug, the bug's own fix (from the mutant
//! catalogue); else what the broken invariant and the mechanism's own settings point to,
//! with the mechanism that has the change and the field of the mechanism file it
//! concerns (its line, for a built-in's file under `mechanisms/`).

use crate::mechanism_file::builtin::{file_name, text_of};
use crate::runner::Outcome;
use fencesim_model::mechanism::{LeaseKind, ReleasePolicy, TokenPolicy};
use fencesim_model::Mechanism;
use fencesim_sim::{EventKind, GatewayMode};
use serde::Serialize;

/// A change that would have stopped the breach of `invariant`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fix {
    pub invariant: &'static str,
    /// The change, in the protocol's words.
    pub change: String,
    /// What it concerns: the planted bug, the gateway, or a field of the mechanism file
    /// (with its line in a built-in's file).
    pub concerns: String,
}

/// Where `[section] field` is in `mechanism`'s file: a built-in's file and line, or the
/// field of the team's own file.
fn field(mechanism: Mechanism, section: &str, field: &str) -> String {
    if matches!(mechanism, Mechanism::File(_)) {
        return format!("`[{section}] {field}` in the mechanism file");
    }
    let text = text_of(mechanism);
    let header = format!("[{section}]");
    let start = text.lines().position(|line| line.trim() == header);
    let line = start.and_then(|start| {
        let rest = text.lines().enumerate().skip(start + 1);
        rest.take_while(|(_, line)| !line.starts_with('['))
            .find(|(_, line)| line.starts_with(&format!("{field} =")))
    });
    match line {
        Some((number, text)) => {
            format!("mechanisms/{} line {}: `[{section}] {}`", file_name(mechanism), number + 1, text.trim())
        }
        None => format!("`[{section}] {field}` in mechanisms/{}", file_name(mechanism)),
    }
}

/// The mechanism that keeps what `mechanism` lost, with the same kind of lease.
fn safe_one(mechanism: Mechanism) -> Mechanism {
    match mechanism.spec().lease {
        LeaseKind::Redlock => Mechanism::RedlockFenced,
        LeaseKind::Single => Mechanism::FencedDbSequence,
    }
}

/// The kind of the event that first broke `invariant`.
fn breaking_event<'a>(outcome: &'a Outcome, invariant: &str) -> Option<&'a EventKind> {
    let check = outcome.checks.iter().find(|check| check.invariant == invariant)?;
    let index = check.breaches.first()?.event?;
    Some(&outcome.record.events.get(index)?.kind)
}

fn lease_fix(outcome: &Outcome, mechanism: Mechanism) -> (String, String) {
    let (script, change) = match breaking_event(outcome, "lease-integrity") {
        Some(EventKind::LeaseExtended { .. } | EventKind::LeaseRearmed { .. }) => (
            "renew",
            "renew only a key that still holds this worker's value (compare, then extend, in one script)",
        ),
        Some(EventKind::LeaseSet { .. }) => {
            ("acquire", "take the lease only with SET NX, never over another holder's key")
        }
        _ => (
            "release",
            "release with compare-and-delete: delete the key only if it still holds this worker's value",
        ),
    };
    let concerns = match mechanism.spec().release {
        ReleasePolicy::PlainDel => format!("{}; `fenced` releases so", field(mechanism, "scripts", script)),
        _ => field(mechanism, "scripts", script),
    };
    (change.to_owned(), concerns)
}

/// A token where there was none, or from the database where Redis's counter could go
/// back; none is known for tokens already from the database.
fn token_fix(mechanism: Mechanism) -> Option<(String, String)> {
    let safe = safe_one(mechanism);
    let change = match mechanism.spec().tokens {
        TokenPolicy::None => format!(
            "take a fencing token with every lease and check it in every claim and confirm, as `{safe}` does: a stale holder's write then matches no row"
        ),
        _ if !mechanism.spec().check_after_token => {
            let change = "read the lease again once the token is taken, and give the batch up if it is no longer ours: a token is then only used if it was issued while its holder's lease was live";
            return Some((change.to_owned(), field(mechanism, "lease", "check-after-token")));
        }
        TokenPolicy::RedisIncr if mechanism.spec().counter_key.contains("{worker}") => {
            let change = "count every worker's tokens on one key per merchant (`fence:settle:{merchant}`): a counter per worker rises for its own worker alone, and a later holder's token can be lower than an earlier one's";
            return Some((change.to_owned(), field(mechanism, "token", "key")));
        }
        TokenPolicy::RedisIncr => format!(
            "take the tokens from a sequence in the refund database, as `{safe}` does: a Redis restart or failover can then never hand out a token again"
        ),
        TokenPolicy::DbSequence => return None,
    };
    Some((change, field(mechanism, "token", "source")))
}

/// The change that would have stopped the breach of `invariant` in `outcome`, if one is known.
pub fn fix_for(outcome: &Outcome, invariant: &'static str) -> Option<Fix> {
    let world = &outcome.scenario.world;
    let mechanism = world.mechanism;
    let spec = mechanism.spec();
    let (change, concerns) = if let Some(mutant) = outcome.mutant {
        (mutant.fix().to_owned(), format!("the planted bug `{mutant}`, in {}", mutant.planted_in()))
    } else {
        match invariant {
            "no-double-refund" if world.gateway_mode == GatewayMode::NonIdempotent => (
                "send the refund id as the gateway call's idempotency key: the fence cannot see the call between claim and confirm, the key makes a second call harmless".to_owned(),
                "the gateway call, `--gateway idempotent`".to_owned(),
            ),
            "lease-integrity" => lease_fix(outcome, mechanism),
            "posted-once" | "balance-matches-sent" if !spec.fence_settlement => (
                "fence the settlement ledger's posting with the same token: every store the batch writes needs a fence of its own".to_owned(),
                field(mechanism, "writes", "fence-settlement"),
            ),
            "no-stale-confirm" | "monotonic-fences" | "token-order" | "state-machine" | "no-double-refund"
            | "posted-once" | "progress" => token_fix(mechanism)?,
            _ => return None,
        }
    };
    Some(Fix { invariant, change, concerns })
}

/// "   What would have stopped it:" and one line per change, each with the invariants it
/// would have kept and what it concerns; empty when the run broke nothing or no change
/// is known.
pub fn fix_lines(outcome: &Outcome, indent: &str) -> String {
    let broken = outcome.checks.iter().filter(|check| check.is_violation());
    let mut kept: Vec<(Vec<&'static str>, Fix)> = Vec::new();
    for fix in broken.filter_map(|check| fix_for(outcome, check.invariant)) {
        match kept.iter_mut().find(|(_, other)| other.change == fix.change && other.concerns == fix.concerns)
        {
            Some((names, _)) => names.push(fix.invariant),
            None => kept.push((vec![fix.invariant], fix)),
        }
    }
    if kept.is_empty() {
        return String::new();
    }
    let mut out = format!("{indent}What would have stopped it:\n");
    for (names, fix) in kept {
        out.push_str(&format!("{indent}- {}: {} (where: {})\n", names.join(", "), fix.change, fix.concerns));
    }
    out
}
