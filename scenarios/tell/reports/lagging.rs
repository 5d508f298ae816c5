//! The guarantees report's section on lookups answered from a lagging copy: the rows of
//! `search::lagging`, each first failure shrunk, and the table read back for the tests.

use crate::search::lagging::{lag_file, Lag, LagRow, ShrunkLag, LAG_MECHANISMS};
use fencesim_model::Mechanism;
use fencesim_sim::GatewayMode;
use std::fmt::Write as _;

pub const LAGGING_HEADING: &str = "## A lookup from a lagging copy";

fn pct(count: u64, of: u64) -> String {
    format!("{:.1}%", 100.0 * count as f64 / of.max(1) as f64)
}

fn rows_table(out: &mut String, rows: &[LagRow]) {
    out.push_str(
        "| lag | mechanism | gateway | seeds | a lookup lied | double refunds | of them through a lie | seed | trace hash | command |\n\
         |---|---|---|---:|---:|---:|---:|---:|---|---|\n",
    );
    for row in rows {
        let (seed, hash) = row.first_by_lie.or(row.first).unwrap_or((1, row.seed_one_hash.unwrap_or(0)));
        let command = match row.first_by_lie.or(row.first) {
            Some((seed, _)) => format!("`{}`", row.lag.command(row.mechanism, row.gateway, seed)),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} ({}) | {} ({}) | {} | {seed} | {hash:016x} | {command} |",
            row.lag.name(),
            row.mechanism,
            row.gateway,
            row.seeds,
            row.lied,
            pct(row.lied, row.seeds),
            row.doubled,
            pct(row.doubled, row.seeds),
            row.doubled_by_lie,
        );
    }
}

fn shrunk_table(out: &mut String, shrunk: &[ShrunkLag]) {
    out.push_str(
        "\nEach row's first double refund (the first that came of a lying lookup, where one did), shrunk while it \
         still pays a refund twice, through a lying lookup where the first did:\n\n\
         | lag | mechanism | gateway | seed | through a lie | faults | workers | rows | replay file |\n\
         |---|---|---|---:|---|---:|---:|---:|---|\n",
    );
    for failure in shrunk {
        let world = &failure.outcome.scenario.world;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | `{}` |",
            failure.row.lag.name(),
            failure.row.mechanism,
            failure.row.gateway,
            failure.seed,
            if failure.by_lie { "yes" } else { "no" },
            world.faults.faults.len(),
            world.workers,
            world.rows.len(),
            lag_file(&failure.row)
        );
    }
}

fn rate(rows: &[LagRow], lag: Lag, gateway: GatewayMode, count: impl Fn(&LagRow) -> u64) -> String {
    let chosen = rows.iter().filter(|row| row.lag == lag && row.gateway == gateway);
    let (counted, seeds) =
        chosen.fold((0, 0), |(counted, seeds), row| (counted + count(row), seeds + row.seeds));
    format!("{counted} of {seeds}")
}

/// The section's text.
pub fn lagging_section(out: &mut String, rows: &[LagRow], shrunk: &[ShrunkLag]) {
    let _ = writeln!(out, "\n{LAGGING_HEADING}\n");
    let mechanisms: Vec<String> = LAG_MECHANISMS.iter().map(|m| format!("`{m}`")).collect();
    let _ = writeln!(
        out,
        "A worker that finds a row in `sending` asks the gateway whether its refund exists before it pays. Here the \
         gateway answers that lookup from a copy of its ledger that lags it (a read replica, a search index): {} \
         with both gateways over the same {} seeds of the random scenario, with the lag *off* (lookups read the \
         ledger, no `lookup-lag` faults) and *on* (the `random-lagging` scenario: the same worlds and plans, with \
         lookups read from a copy 100 to 800 ms behind, and `lookup-lag` faults in the seeds whose swarm has them). \
         *A lookup lied*: seeds where a lookup said no for a refund the ledger had. *Through a lie*: double \
         refunds whose chain passes through such a lookup. *Seed* is the first double refund through a lie, else \
         the first, else seed 1.\n",
        mechanisms.join(" and "),
        rows.first().map_or(0, |row| row.seeds),
    );
    rows_table(out, rows);
    let by_lie = |row: &LagRow| row.doubled_by_lie;
    let doubled = |row: &LagRow| row.doubled;
    let _ = writeln!(
        out,
        "\nWith the idempotent gateway the key saves the money when the lookup lies: the second call is answered \
         from the first refund's record (double refunds through a lie with the lag on: {}). With the \
         non-idempotent gateway nothing does: {} seeds paid a refund twice through a lying lookup with the lag on \
         ({} with it off, where no lookup lies).",
        rate(rows, Lag::On, GatewayMode::Idempotent, by_lie),
        rate(rows, Lag::On, GatewayMode::NonIdempotent, by_lie),
        rate(rows, Lag::Off, GatewayMode::NonIdempotent, by_lie),
    );
    let _ = writeln!(
        out,
        "\nEvery double refund with the non-idempotent gateway, whatever its chain: {} seeds with the lag off, {} \
         with it on. With the idempotent gateway: {} and {}.",
        rate(rows, Lag::Off, GatewayMode::NonIdempotent, doubled),
        rate(rows, Lag::On, GatewayMode::NonIdempotent, doubled),
        rate(rows, Lag::Off, GatewayMode::Idempotent, doubled),
        rate(rows, Lag::On, GatewayMode::Idempotent, doubled),
    );
    shrunk_table(out, shrunk);
}

/// One row of the section's table, as a test reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LagLine {
    pub lag: Lag,
    pub mechanism: Mechanism,
    pub gateway: GatewayMode,
    pub seeds: u64,
    pub lied: u64,
    pub doubled: u64,
    pub doubled_by_lie: u64,
    pub seed: u64,
    pub trace_hash: String,
}

/// The section's rows of a report.
pub fn parse_lagging(report: &str) -> Vec<LagLine> {
    let Some(start) = report.find(LAGGING_HEADING) else { return Vec::new() };
    let section = &report[start..];
    let end =
        section[LAGGING_HEADING.len()..].find("\n## ").map_or(section.len(), |at| at + LAGGING_HEADING.len());
    let count = |cell: &str| cell.split(' ').next().and_then(|n| n.parse().ok());
    section[..end]
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let lag = Lag::all().find(|lag| cells.get(1) == Some(&lag.name()))?;
            Some(LagLine {
                lag,
                mechanism: cells.get(2)?.parse().ok()?,
                gateway: cells.get(3)?.parse().ok()?,
                seeds: cells.get(4)?.parse().ok()?,
                lied: count(cells.get(5)?)?,
                doubled: count(cells.get(6)?)?,
                doubled_by_lie: cells.get(7)?.parse().ok()?,
                seed: cells.get(8)?.parse().ok()?,
                trace_hash: (*cells.get(9)?).to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_back_as_the_numbers_it_shows() {
        let row = LagRow {
            lag: Lag::On,
            mechanism: Mechanism::Fenced,
            gateway: GatewayMode::NonIdempotent,
            seeds: 40,
            lied: 9,
            doubled: 6,
            doubled_by_lie: 4,
            first: Some((3, 0xab)),
            first_by_lie: Some((5, 0xcd)),
            seed_one_hash: Some(1),
        };
        let mut text = String::new();
        lagging_section(&mut text, std::slice::from_ref(&row), &[]);
        text.push_str("\n## Next\n| off | fenced | idempotent | 1 | 0 (0%) | 0 (0%) | 0 | 1 | 00 | - |\n");
        let lines = parse_lagging(&text);
        let expected = LagLine {
            lag: Lag::On,
            mechanism: Mechanism::Fenced,
            gateway: GatewayMode::NonIdempotent,
            seeds: 40,
            lied: 9,
            doubled: 6,
            doubled_by_lie: 4,
            seed: 5,
            trace_hash: format!("{:016x}", 0xcd),
        };
        assert_eq!(lines, [expected], "{text}");
        assert!(text.contains("4 of 40 seeds paid a refund twice through a lying lookup"), "{text}");
    }
}
