//! The guarantees report's last table: every seed's verdict over seeds 1 to the verdicts'
//! size, kept as a count and a digest per invariant (`search::verdicts`), and read back by
//! the test that runs the same seeds again.

use crate::search::matrix::Cell;
use crate::search::verdicts::{SeedSet, Verdicts};
use crate::tell::reports::{section, table_rows};
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use std::fmt::Write as _;

pub const VERDICTS_HEADING: &str = "## Every seed's verdict";
const HEADER: &str = "| mechanism | gateway | seeds | broken: invariant, seeds, digest |";

/// The section, from the cells' verdicts.
pub fn verdicts_section(out: &mut String, cells: &[Cell]) {
    let seeds = cells.first().map_or(0, |cell| cell.verdicts.seeds);
    let _ = writeln!(out, "\n{VERDICTS_HEADING}\n");
    let _ = writeln!(
        out,
        "Every mechanism and gateway mode over seeds 1 to {seeds} of the random scenario with every fault kind \
         (the table above shows the first of them): for each invariant some seed broke, how many seeds broke it \
         and a digest of which (the sum of a 64-bit mix of each seed, in hex), so that a test running the same \
         seeds tells when any one seed's verdict moves. A change meant to leave every verdict alone, a cheaper \
         store or a faster runtime, is held to it here.\n"
    );
    let _ = writeln!(out, "{HEADER}\n|---|---|---:|---|");
    for cell in cells {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            cell.mechanism,
            cell.gateway,
            cell.verdicts.seeds,
            broken_text(&cell.verdicts)
        );
    }
}

/// `invariant count digest; ...`, or `-` where every invariant held.
fn broken_text(verdicts: &Verdicts) -> String {
    let parts: Vec<String> = verdicts
        .broken
        .iter()
        .map(|(invariant, set)| format!("{invariant} {} {:016x}", set.count, set.digest))
        .collect();
    match parts.is_empty() {
        true => "-".to_owned(),
        false => parts.join("; "),
    }
}

/// One row of the section, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerdictLine {
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    pub verdicts: Verdicts,
}

/// The section's rows, as a report holds them.
pub fn parse_verdicts(report: &str) -> Vec<VerdictLine> {
    let section = section(report, VERDICTS_HEADING);
    table_rows(section, "| mechanism | gateway | seeds |")
        .iter()
        .filter_map(|row| {
            Some(VerdictLine {
                mechanism: row.get("mechanism")?.parse().ok()?,
                gateway: row.get("gateway")?.parse().ok()?,
                verdicts: Verdicts {
                    seeds: row.get("seeds")?.parse().ok()?,
                    broken: parse_broken(row.get("broken: invariant, seeds, digest")?)?,
                },
            })
        })
        .collect()
}

fn parse_broken(text: &str) -> Option<std::collections::BTreeMap<String, SeedSet>> {
    if text == "-" {
        return Some(Default::default());
    }
    text.split("; ")
        .map(|part| {
            let mut words = part.split(' ');
            let invariant = words.next()?.to_owned();
            let count = words.next()?.parse().ok()?;
            let digest = u64::from_str_radix(words.next()?, 16).ok()?;
            Some((invariant, SeedSet { count, digest }))
        })
        .collect()
}
