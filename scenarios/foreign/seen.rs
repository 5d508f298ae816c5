//! Everything the components saw of a team's worker program in one run, as the
//! simulation's events: the Redis proxies' records, the database proxies' records and the
//! row trigger's rows. The gateway, the queue, Redis's expiries and the supervisor write
//! their own events as the live arm's do.

use crate::foreign::redis_seen::{self, Keys};
use crate::foreign::rows_seen::{self, RowChange};
use crate::live::clock::LiveClock;
use crate::live::log::LogLine;
use crate::live::pgproxy::{PgObserved, PgProxy};
use crate::live::postgres::PgRefunds;
use crate::live::proxy::{Observed, RedisProxy};
use crate::scenario::Scenario;
use fencesim_model::{Token, WorkerId};
use fencesim_sim::EventKind;
use std::collections::BTreeMap;

/// What a proxy records when a party opens with a TLS handshake.
const TLS: &str = "(a TLS handshake)";

/// The events the proxies and the trigger saw; refused when a copy spoke TLS to a proxy.
pub fn seen(
    scenario: &Scenario,
    redis: &[RedisProxy],
    database: &[PgProxy],
    store: &PgRefunds,
    clock: LiveClock,
) -> Result<Vec<LogLine>, String> {
    let (redis_seen, rows_seen) = by_worker(redis, database);
    if let Some((worker, _)) = redis_seen.iter().find(|(_, o)| o.request == TLS) {
        return Err(tls_refusal(*worker, "Redis", "FENCESIM_REDIS_URL"));
    }
    if let Some((worker, _)) = rows_seen.iter().find(|(_, o)| o.sql == TLS) {
        return Err(tls_refusal(*worker, "the database", "FENCESIM_DATABASE_URL"));
    }
    let mut lines = redis_seen::events(&redis_seen, &Keys::of(&scenario.world), clock.scale);
    lines.extend(rows_seen::tokens(&rows_seen));
    let mut tokens: BTreeMap<WorkerId, Vec<(u64, Token)>> = BTreeMap::new();
    for line in &lines {
        if let EventKind::TokenIssued { worker, token, .. } = &line.happened {
            tokens.entry(*worker).or_default().push((line.at_us, *token));
        }
    }
    lines.extend(rows_seen::events(&rows_seen, &changes(store)?, &tokens));
    Ok(lines)
}

/// Each worker's Redis records and database records, each with its worker.
pub type ByWorker = (Vec<(WorkerId, Observed)>, Vec<(WorkerId, PgObserved)>);

/// Every record of each worker's proxies (worker `i`'s are the `i`-th), with its worker.
pub fn by_worker(redis: &[RedisProxy], database: &[PgProxy]) -> ByWorker {
    let of = |i: usize| WorkerId(i as u32);
    let redis = redis.iter().enumerate().flat_map(|(i, p)| p.observed().into_iter().map(move |o| (of(i), o)));
    let database =
        database.iter().enumerate().flat_map(|(i, p)| p.observed().into_iter().map(move |o| (of(i), o)));
    (redis.collect(), database.collect())
}

fn tls_refusal(worker: WorkerId, what: &str, variable: &str) -> String {
    format!(
        "worker {worker} opened its connection to {what} with a TLS handshake; the run's proxies speak plain \
         text only: connect to ${variable} without TLS"
    )
}

/// The row trigger's rows, read on the harness's connection.
fn changes(store: &PgRefunds) -> Result<Vec<RowChange>, String> {
    let rows = store
        .run(|client| client.query(rows_seen::CHANGES, &[]))?
        .map_err(|e| format!("the row trigger's table: {e}"))?;
    Ok(rows
        .iter()
        .map(|row| RowChange {
            pid: row.get(0),
            at_us: row.get::<_, i64>(1) as u64,
            id: row.get(2),
            state: row.get(3),
            fence: row.get(4),
        })
        .collect())
}
