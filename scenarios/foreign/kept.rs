//! What one process keeps from one run of a team's program to the next: the PostgreSQL
//! cluster, which takes about a second to make and start where the rest of a small
//! controlled run takes half that, the harness's one connection to it (a connection costs
//! the server about 7 ms of processor time, a tenth of a small run's), and the clock file
//! a controlled run's servers read their time from. Each run gets the cluster emptied:
//! every other session of the run before ended and the refund tables, the row trigger and
//! its record dropped and the refund tables made again, as on a new cluster. Redis starts
//! anew with each run (a few milliseconds): a restart fault kills it, and each world has
//! its own persistence.

use crate::live::faketime::FakeClock;
use crate::live::postgres::{schema, PgRefunds, PostgresServer};

/// The cluster kept, whether it runs on the controlled clock, and the harness's connection.
struct KeptDatabase {
    server: PostgresServer,
    on_the_clock: bool,
    harness: PgRefunds,
}

/// The servers and the clock kept between runs; dropped at the end, the cluster stopped.
#[derive(Default)]
pub struct Kept {
    database: Option<KeptDatabase>,
    clock: Option<FakeClock>,
}

/// Ends every other session and drops what a run made in the database.
const EMPTY: &str = "
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE pid <> pg_backend_pid() AND backend_type = 'client backend';
DROP SCHEMA public CASCADE;
CREATE SCHEMA public;
";

impl Kept {
    pub fn new() -> Kept {
        Kept::default()
    }

    /// The clock a controlled run's servers read their time from, made on first use.
    pub fn clock(&mut self) -> Result<FakeClock, String> {
        if let Some(clock) = &self.clock {
            return Ok(clock.clone());
        }
        let clock = FakeClock::new("controlled").map_err(|why| {
            format!("a controlled run puts Redis and PostgreSQL on its clock with libfaketime: {why}")
        })?;
        self.clock = Some(clock.clone());
        Ok(clock)
    }

    /// The address of a database for the next run, with the refund tables and nothing
    /// else, and the harness's connection to it: the kept cluster emptied, or a new one (on
    /// `clock`, when given) if none is kept or the one kept runs on the other clock.
    pub fn database(&mut self, clock: Option<&FakeClock>) -> Result<(String, PgRefunds), String> {
        let on_the_clock = clock.is_some();
        if let Some(kept) = self.database.take_if(|kept| kept.on_the_clock == on_the_clock) {
            match empty(&kept.harness) {
                Ok(()) => {
                    let given = (kept.server.url(), kept.harness.clone());
                    self.database = Some(kept);
                    return Ok(given);
                }
                // a cluster that cannot be emptied is let go, and a new one made
                Err(_) => drop(kept),
            }
        }
        self.database = None;
        let env = clock.map_or(&[][..], |clock| &clock.env[..]);
        let server = PostgresServer::start_in("worker", env)?;
        let url = server.url();
        let harness = PgRefunds::connect(&url)?;
        self.database = Some(KeptDatabase { server, on_the_clock, harness: harness.clone() });
        Ok((url, harness))
    }
}

/// Empties the kept database on the harness's connection (the one session `EMPTY` leaves)
/// and makes the refund tables again.
fn empty(harness: &PgRefunds) -> Result<(), String> {
    let sql = format!("{EMPTY}{};", schema());
    harness
        .run(move |client| client.batch_execute(&sql))?
        .map_err(|e| format!("emptying the kept database: {e}"))
}
