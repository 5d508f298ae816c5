//! The one table of invariants. A name and a kind live here and nowhere else: reports,
//! explorations and the matrix list the invariants from this table, in its order.

use crate::check::chain::{self, Chain};
use crate::check::facts::{Breach, Facts};
use crate::check::{lease, liveness, money, order, rows, settlement};
use serde::Serialize;

/// When an invariant must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    Always,
    AtRest,
    OnceHealed,
    /// Shown, never failed: it breaks by design under pauses.
    Diagnostic,
}

/// One invariant: its name, when it must hold, and the checker that finds its breaches.
pub struct Invariant {
    pub name: &'static str,
    /// When it holds, in words: the guide's table of invariants says the same (a test
    /// keeps the two equal), and a page's glossary says it of each name it shows.
    pub holds: &'static str,
    pub kind: CheckKind,
    pub check: fn(&Facts<'_>) -> Vec<Breach>,
    /// How a breach's chain is found, from the fault (or the bug's act) to the breach.
    pub chain: fn(&Facts<'_>, &Breach) -> Chain,
}

/// Every invariant of the design, in the order reports list them.
pub const INVARIANTS: [Invariant; 13] = [
    Invariant {
        name: "no-double-refund",
        holds: "the gateway ledger moves money at most once per refund id, for that row's amount",
        kind: CheckKind::Always,
        check: money::no_double_refund,
        chain: chain::double_refund_chain,
    },
    Invariant {
        name: "no-stale-confirm",
        holds: "a row reaches `sent` only by the lease (epoch) that made its last accepted claim",
        kind: CheckKind::Always,
        check: rows::no_stale_confirm,
        chain: chain::row_chain,
    },
    Invariant {
        name: "monotonic-fences",
        holds: "per row, accepted writes never go back to an older epoch and the stored fence never goes down; tokens only rise",
        kind: CheckKind::Always,
        check: rows::monotonic_fences,
        chain: chain::row_chain,
    },
    Invariant {
        name: "token-order",
        holds: "per lock key, in grant order, each lease's accepted writes carry a larger token than any earlier lease's",
        kind: CheckKind::Always,
        check: order::token_order,
        chain: chain::token_chain,
    },
    Invariant {
        name: "state-machine",
        holds: "rows move only `pending -> sending -> sent`, and the table at the end is what the writes left",
        kind: CheckKind::Always,
        check: rows::state_machine,
        chain: chain::row_chain,
    },
    Invariant {
        name: "lease-integrity",
        holds: "a lease key is taken only by `SET NX`, extended or removed only by its holder (or removed by expiry), and no worker goes on as a holder without a majority's grant",
        kind: CheckKind::Always,
        check: lease::lease_integrity,
        chain: chain::lease_chain,
    },
    Invariant {
        name: "ledger-matches-rows",
        holds: "every `sent` row has exactly one ledger entry, and the sums agree to the cent",
        kind: CheckKind::AtRest,
        check: money::ledger_matches_rows,
        chain: chain::ledger_chain,
    },
    Invariant {
        name: "rows-settled",
        holds: "every row is `sent`, or its job is still open; a row left behind an acked job is dropped work",
        kind: CheckKind::AtRest,
        check: liveness::rows_settled,
        chain: chain::settled_chain,
    },
    Invariant {
        name: "progress",
        holds: "every job completes within the settle bound after the last fault; a stall names its cause (the last fence violation, or the last batch given up and why)",
        kind: CheckKind::OnceHealed,
        check: liveness::progress,
        chain: chain::progress_chain,
    },
    Invariant {
        name: "posted-once",
        holds: "the second store (the settlement ledger) posts each refund at most once, for its row's amount ([second-store.md](second-store.md))",
        kind: CheckKind::Always,
        check: settlement::posted_once,
        chain: chain::posting_chain,
    },
    Invariant {
        name: "balance-matches-sent",
        holds: "the settlement ledger's balance is the sum of its merchant's `sent` rows, to the cent",
        kind: CheckKind::AtRest,
        check: settlement::balance_matches_sent,
        chain: chain::balance_chain,
    },
    Invariant {
        name: "single-holder",
        holds: "at most one worker believes it holds a lease (breaks by design under pauses; shown, never failed)",
        kind: CheckKind::Diagnostic,
        check: lease::single_holder,
        chain: chain::single_holder_chain,
    },
    Invariant {
        name: "writes-after-lease-end",
        holds: "accepted writes made after the writer's own lease ended: fencing may make them harmless, a run shows them",
        kind: CheckKind::Diagnostic,
        check: order::writes_after_lease_end,
        chain: chain::row_chain,
    },
];

impl Invariant {
    /// This invariant's verdict over one run.
    pub fn judge(&self, facts: &Facts<'_>) -> Check {
        Check { invariant: self.name, kind: self.kind, breaches: (self.check)(facts) }
    }

    /// Whether a breach fails a run.
    pub fn fails_runs(&self) -> bool {
        self.kind.fails_runs()
    }
}

impl CheckKind {
    pub fn fails_runs(self) -> bool {
        match self {
            CheckKind::Always | CheckKind::AtRest | CheckKind::OnceHealed => true,
            CheckKind::Diagnostic => false,
        }
    }
}

/// The invariant of this name, from the table.
pub fn invariant(name: &str) -> Option<&'static Invariant> {
    INVARIANTS.iter().find(|invariant| invariant.name == name)
}

/// The table's own name for `name`, or why it has none (a shard's or a file's name read
/// back by this build).
pub fn known_invariant(name: &str) -> Result<&'static str, String> {
    invariant(name)
        .map(|invariant| invariant.name)
        .ok_or_else(|| format!("'{name}' is not an invariant of this build"))
}

/// The verdict of one invariant over one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub invariant: &'static str,
    pub kind: CheckKind,
    pub breaches: Vec<Breach>,
}

impl Check {
    pub fn holds(&self) -> bool {
        self.breaches.is_empty()
    }

    /// A violation fails the run; a diagnostic does not.
    pub fn is_violation(&self) -> bool {
        !self.holds() && self.kind.fails_runs()
    }
}

/// Every invariant's verdict, in the table's order.
pub fn check_all(facts: &Facts<'_>) -> Vec<Check> {
    INVARIANTS.iter().map(|invariant| invariant.judge(facts)).collect()
}

/// The first breach of every invariant that does not hold, as the run's violations.
pub fn violations(checks: &[Check]) -> impl Iterator<Item = (&Check, &Breach)> {
    checks.iter().filter(|check| check.is_violation()).map(|check| (check, &check.breaches[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_invariant_has_a_name_of_its_own_and_only_the_diagnostic_never_fails_a_run() {
        let names: std::collections::BTreeSet<&str> =
            INVARIANTS.iter().map(|invariant| invariant.name).collect();
        assert_eq!(names.len(), INVARIANTS.len());
        assert!(INVARIANTS
            .iter()
            .all(|entry| invariant(entry.name).is_some_and(|found| found.name == entry.name)));
        let shown: Vec<&str> = INVARIANTS
            .iter()
            .filter(|invariant| !invariant.fails_runs())
            .map(|invariant| invariant.name)
            .collect();
        assert_eq!(shown, ["single-holder", "writes-after-lease-end"]);
    }
}
