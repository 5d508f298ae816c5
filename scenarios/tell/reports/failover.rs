//! The guarantees report's failover section: the fenced mechanisms on a Redis with a
//! replica, with and without a wait for it, each first failure shrunk.

use crate::search::failover::{failover_file, FailoverRow, FAILOVER_SCENARIO};
use crate::search::matrix::ShrunkFailure;
use std::fmt::Write as _;

/// The section's text: one row per mechanism, then each first failure shrunk.
pub fn failover_section(rows: &[FailoverRow], shrunk: &[ShrunkFailure]) -> String {
    let mut out = String::from(
        "\n## A replica and a failover\n\nThe replicated scenario: each seed's random world with a replica always \
         (asynchronous, lagging the primary by up to a tenth of the TTL; a failover takes up to half the TTL to \
         switch the clients over), and its swarm plan without restarts, so that a counter goes back only when a \
         failover promotes a replica that had not received its last increments. Idempotent gateway. \
         `fenced-wait-replica` waits for the replica (`WAIT 1 timeout`) after its `SET` and its `INCR`; the others \
         do not.\n\n\
         | failover mechanism | seeds | a failover fired | broken | first failing seed | invariant | trace hash | command |\n\
         |---|---:|---:|---:|---:|---|---|---|\n",
    );
    for row in rows {
        let (seed, invariant, hash) = match row.first {
            Some((seed, invariant, hash)) => (seed.to_string(), invariant, format!("{hash:016x}")),
            None => ("-".to_owned(), "-", "-".to_owned()),
        };
        let command = match row.first {
            Some((seed, ..)) => format!(
                "`fencesim run --scenario {FAILOVER_SCENARIO} --mechanism {} --seed {seed}`",
                row.mechanism
            ),
            None => format!(
                "`fencesim explore --scenario {FAILOVER_SCENARIO} --mechanism {} --seeds {}`",
                row.mechanism, row.seeds
            ),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {seed} | {invariant} | {hash} | {command} |",
            row.mechanism, row.seeds, row.failed_over, row.broken
        );
    }
    out.push_str(
        "\nEach first failure, shrunk while it still breaks the same invariant (`fencesim replay FILE` tells it):\n\n\
         | failover mechanism | invariant | seed | faults | workers | rows | replay file |\n\
         |---|---|---:|---:|---:|---:|---|\n",
    );
    for failure in shrunk {
        let world = &failure.outcome.scenario.world;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | `{}` |",
            failure.mechanism,
            failure.invariant,
            failure.seed,
            world.faults.faults.len(),
            world.workers,
            world.rows.len(),
            failover_file(failure.mechanism)
        );
    }
    out
}
