//! The guarantees report's section on the second store: `fenced` with the settlement
//! ledger unfenced (`fenced-one-store`) against both stores fenced (`fenced`), under each
//! fault kind alone, with each first failure shrunk.

use crate::search::second_store::{
    store_command, store_shrunk_file, StoreRow, StoreShrunk, STORE_INVARIANTS, STORE_MECHANISMS,
};
use crate::tell::reports::{section, table_rows};
use fencesim_model::Mechanism;
use std::fmt::Write as _;

pub const STORE_HEADING: &str = "## A batch that writes two stores";

fn pct(count: u64, of: u64) -> String {
    format!("{:.1}%", 100.0 * count as f64 / of.max(1) as f64)
}

/// The section's text.
pub fn second_store_section(out: &mut String, rows: &[StoreRow], shrunk: &[StoreShrunk]) {
    let _ = writeln!(out, "\n{STORE_HEADING}\n");
    let _ = writeln!(
        out,
        "Settling a refund also posts it to a second SQL store, the merchant's settlement ledger (a SQLite \
         database of its own, on its own hop), between the gateway call and the confirm. `{}` fences the refund \
         rows and posts to the ledger without a fence; `{}` gives the ledger its own fence column per merchant, \
         checked with the same token by the same rule. Over the same {} seeds of the random scenario with an \
         idempotent gateway: first with no fault at all (`none`: a batch that outlasts its TTL by itself, which \
         the random worlds' short TTLs make common), then one fault kind on at a time (every other kind off, so \
         that each row says what that kind alone does). *Second store broken* counts the seeds that broke {}; *other invariants* what else \
         broke, the first store's included. *Seed* is the first that broke the second store, or seed 1 where none \
         did; its trace hash is what the run gives today.\n",
        STORE_MECHANISMS[0],
        STORE_MECHANISMS[1],
        rows.first().map_or(0, |row| row.seeds),
        STORE_INVARIANTS.map(|name| format!("`{name}`")).join(" or "),
    );
    out.push_str(
        "| fault kind | mechanism | second store broken | other invariants | seed | trace hash | command |\n",
    );
    out.push_str("|---|---|---:|---|---:|---|---|\n");
    for row in rows {
        let others: Vec<String> = row
            .invariants
            .iter()
            .filter(|(name, _)| !STORE_INVARIANTS.contains(&name.as_str()))
            .map(|(name, count)| format!("{name} ({count})"))
            .collect();
        let (seed, hash) =
            row.first.as_ref().map_or((1, row.seed_one_hash.unwrap_or(0)), |(s, h, _)| (*s, *h));
        let command = match &row.first {
            Some((seed, _, _)) => format!("`{}`", store_command(&row.kind, row.mechanism, *seed)),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {seed} | {hash:016x} | {command} |",
            row.kind,
            row.mechanism,
            row.broken,
            pct(row.broken, row.seeds),
            if others.is_empty() { "-".to_owned() } else { others.join(", ") },
        );
    }
    let broke =
        |mechanism: Mechanism| rows.iter().filter(move |row| row.mechanism == mechanism && row.broken > 0);
    let kinds =
        |mechanism: Mechanism| broke(mechanism).map(|row| format!("`{}`", row.kind)).collect::<Vec<_>>();
    let (one, both) = (kinds(STORE_MECHANISMS[0]), kinds(STORE_MECHANISMS[1]));
    let _ = writeln!(
        out,
        "\nThe article says a batch that spans two stores needs a fence on each, and that the store without one is \
         unprotected however careful the other is. Measured: with the ledger unfenced, {} of {} rows broke it{}; \
         with both fenced, {} did{}. A shrunk failure with no fault left is the batch outlasting its TTL: the \
         fault kind of its row was not needed.",
        one.len(),
        rows.len() / STORE_MECHANISMS.len(),
        if one.is_empty() { String::new() } else { format!(" ({})", one.join(", ")) },
        both.len(),
        if both.is_empty() { String::new() } else { format!(" ({})", both.join(", ")) },
    );
    shrunk_table(out, shrunk);
}

fn shrunk_table(out: &mut String, shrunk: &[StoreShrunk]) {
    out.push_str(
        "\nEach first failure of the second store, shrunk by the matrix's shrinker while it still breaks the same \
         invariant; `fencesim replay FILE` tells it.\n\n\
         | fault kind | mechanism | invariant | seed | faults | workers | rows | replay file |\n|---|---|---|---:|---:|---:|---:|---|\n",
    );
    for failure in shrunk {
        let world = &failure.outcome.scenario.world;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | `{}` |",
            failure.kind,
            failure.mechanism,
            failure.invariant,
            failure.seed,
            world.faults.faults.len(),
            world.workers,
            world.rows.len(),
            store_shrunk_file(&failure.kind, failure.mechanism)
        );
    }
}

/// One row of the section's table, as a test reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreLine {
    pub kind: String,
    pub mechanism: Mechanism,
    pub broken: u64,
    /// The first seed that broke the second store, or seed 1 where none did.
    pub seed: u64,
    pub trace_hash: String,
}

/// The section's rows of a report.
pub fn parse_second_store(report: &str) -> Vec<StoreLine> {
    let section = section(report, STORE_HEADING);
    let read = |row: &crate::tell::reports::TableRow| {
        Some(StoreLine {
            kind: row.get("fault kind")?.to_owned(),
            mechanism: row.get("mechanism")?.parse().ok()?,
            broken: row.get("second store broken")?.split(' ').next()?.parse().ok()?,
            seed: row.get("seed")?.parse().ok()?,
            trace_hash: row.get("trace hash")?.to_owned(),
        })
    };
    table_rows(section, "| fault kind | mechanism | second store broken |").iter().filter_map(read).collect()
}

/// The shrunk files the section lists, with their fault kind, mechanism and invariant.
pub fn parse_store_shrunk(report: &str) -> Vec<(String, Mechanism, String, String)> {
    let section = section(report, STORE_HEADING);
    let read = |row: &crate::tell::reports::TableRow| {
        let file = row.get("replay file")?.strip_prefix('`')?.strip_suffix('`')?;
        Some((
            row.get("fault kind")?.to_owned(),
            row.get("mechanism")?.parse().ok()?,
            row.get("invariant")?.to_owned(),
            file.to_owned(),
        ))
    };
    table_rows(section, "| fault kind | mechanism | invariant |").iter().filter_map(read).collect()
}
