//! The time scale a live replay runs at when none is asked for. A shrunk world's story
//! can turn on a millisecond (a lease's TTL of 12 ms, a fault a millisecond before a
//! grant), while a live worker's request costs a real fraction of one on top of the
//! latency the story gives it (the real command, its event line, the runtime's waking).
//! So the story is stretched until its shortest interval is several requests' worth of
//! this machine's lag: the interval from the simulated run's chains (the events from the
//! fault to each breach, which is the order the verdict rests on) and from the windows its
//! faults held open, the lag measured here on the database the run uses.

use crate::live::postgres::PgRefunds;
use crate::live::store::Refunds;
use crate::runner::Outcome;
use crate::search::widen::{race_margin, WIDE_ENOUGH_MS};
use fencesim_model::{MerchantId, SqliteRefunds};
use fencesim_sim::{EventKind, FaultKind};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The scales a default is chosen from (the largest keeps a minute's story in ten). None
/// is below 5: measured here, at 1 a PostgreSQL worker fell behind the story even where the
/// shortest interval was 9 to 114 ms (a statement there costs more than the lag measured
/// below), while at 5 every such file agreed.
const SCALES: [f64; 2] = [5.0, 10.0];

/// How many requests' lag the shortest interval is to outlast. Measured here at scale 1: a
/// live worker is one to two story milliseconds behind the simulated one by its fifth
/// request, which is two to six times the lag per request on SQLite that `measure_lag_on`
/// measures (0.23 to 0.57 ms here; without the statement's round trip it was 0.2 ms, and
/// twenty of those were asked for), so ten is about twice what a race a few requests into
/// a batch has lost. On PostgreSQL a request cost 0.56 to 1.32 ms here, and a story that
/// turns on a millisecond is stretched tenfold.
const REQUESTS: f64 = 10.0;

/// The default and what it was chosen from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chosen {
    pub scale: f64,
    /// The shortest gap between two steps of a violation's chain, in the story (a gap of
    /// no time counts as a millisecond); none when the simulated run breaks nothing.
    pub interval_ms: Option<u64>,
    /// This machine's lag per request on the run's database, measured.
    pub lag: Duration,
}

impl Chosen {
    pub fn describe(&self) -> String {
        let lag = format!("{:.2} ms", self.lag.as_secs_f64() * 1000.0);
        match self.interval_ms {
            Some(ms) => format!(
                "time scale {} (the shortest interval the story's verdict rests on is {ms} ms; this machine's lag per request is {lag})",
                self.scale
            ),
            None => format!("time scale {} (the simulated run breaks nothing to time)", self.scale),
        }
    }
}

/// The shortest interval the verdict rests on: the shortest gap between consecutive steps
/// of a violation's chain that two parties took, or between two workers' store operations
/// on the same rows while the chains go on (`widen::race_margin`: one worker's own steps
/// keep their order at any speed), or, if there is no such pair, between any two steps; or
/// a fault's window, if one is shorter.
pub fn shortest_interval(simulated: &Outcome) -> Option<u64> {
    let any_gap = || {
        let chains = simulated.chains();
        let gaps =
            chains.iter().flat_map(|(_, chain)| chain.steps.windows(2).map(|p| p[1].at_ms - p[0].at_ms));
        gaps.min()
    };
    let gap = race_margin(simulated).map(|(gap, _)| gap).or_else(any_gap);
    let shortest = match (gap, shortest_window(simulated)) {
        (Some(gap), Some(window)) => Some(gap.min(window)),
        (gap, window) => gap.or(window),
    };
    shortest.map(|ms| ms.max(1))
}

/// The shortest window a fault that fired held open for every worker: a gateway outage, a
/// spell of conflicts, a lookup reading a lagging copy. A request must fall inside it, and
/// a chain shows the request, not the window (a refused call at 5 ms, not the outage from
/// 5 to 6 ms that refused it).
fn shortest_window(simulated: &Outcome) -> Option<u64> {
    let window = |kind: &EventKind| match kind {
        EventKind::FaultFired {
            fault:
                FaultKind::GatewayOutage { for_ms }
                | FaultKind::GatewayConflicts { for_ms }
                | FaultKind::LookupLag { for_ms },
            ..
        } => Some(*for_ms),
        _ => None,
    };
    simulated.record.events.iter().filter_map(|event| window(&event.kind)).min()
}

/// The scale for a story whose shortest interval is `interval_ms`, on a machine whose
/// lag per request is `lag`: the largest of `SCALES` for a race the shrinker's widening
/// did not get past `WIDE_ENOUGH_MS`, else the smallest that makes the interval outlast
/// `REQUESTS` requests' lag. Measured here (`fencesim fidelity --runs 2`): of the 34
/// playable files whose interval is 5 ms or less, 5 broke what the simulation breaks in
/// fewer than every run where the lag rule had chosen 5 (besides the two whose verdict
/// rests on a tie), among them `failure-taken-as-refunded` in 0 of 2 on SQLite and
/// `release-by-get-then-del` in 0 of 2 on both databases; at 10 those two agreed in 6 of 6
/// and 3 of 3. The lag rule counts a few requests' lag, and a race many requests into a
/// story has lost more.
pub fn choose(interval_ms: Option<u64>, lag: Duration) -> Chosen {
    let scale = match interval_ms {
        None => SCALES[0],
        Some(ms) if ms <= WIDE_ENOUGH_MS => SCALES[SCALES.len() - 1],
        Some(ms) => {
            let needed = REQUESTS * lag.as_secs_f64() * 1000.0 / ms as f64;
            SCALES.into_iter().find(|scale| *scale >= needed).unwrap_or(SCALES[SCALES.len() - 1])
        }
    };
    Chosen { scale, interval_ms, lag }
}

/// The database a lag is measured on.
#[derive(Clone, Copy, Debug)]
pub enum Probe<'a> {
    /// A SQLite file in WAL mode, as the live run's.
    Sqlite,
    /// The PostgreSQL database at this URL (its refund tables are made if missing).
    Postgres(&'a str),
}

/// This machine's lag per request of a live worker on `database`: what every request pays
/// (`measure_lag`) and a database statement's round trip, a committed update through the
/// store the workers use. Measured here, a PostgreSQL statement costs several times what
/// a SQLite one does, and a story that turns on a millisecond needs more stretching there.
pub fn measure_lag_on(database: Probe) -> Result<Duration, String> {
    let statement = match database {
        Probe::Sqlite => {
            let dir = std::env::temp_dir().join(format!("fencesim-lag-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let store = SqliteRefunds::open_file(&dir.join("lag.db"), true).map_err(|e| e.to_string());
            let lag = store.and_then(|store| statement_lag(&store));
            let _ = std::fs::remove_dir_all(&dir);
            lag?
        }
        Probe::Postgres(url) => statement_lag(&PgRefunds::connect(url)?)?,
    };
    Ok(measure_lag() + statement)
}

/// A committed update's round trip on `store`: the median of 15.
fn statement_lag(store: &dyn Refunds) -> Result<Duration, String> {
    let merchant = MerchantId(u32::MAX);
    store.set_sequence(merchant, 0)?;
    let mut tries = Vec::new();
    for _ in 0..15 {
        let started = Instant::now();
        store.next_sequence_token(merchant)?;
        tries.push(started.elapsed());
    }
    tries.sort();
    Ok(tries[tries.len() / 2])
}

/// This machine's lag per request, as a live worker pays it: a loopback round trip, a
/// line written through to a file, and how late a millisecond's sleep wakes. The median
/// of 15 tries.
pub fn measure_lag() -> Duration {
    let mut tries: Vec<Duration> = (0..15).filter_map(|_| one_try().ok()).collect();
    tries.sort();
    tries.get(tries.len() / 2).copied().unwrap_or(Duration::from_millis(1))
}

fn one_try() -> std::io::Result<Duration> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte)?;
        stream.write_all(&byte)
    });
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let file = std::env::temp_dir().join(format!("fencesim-lag-{}", std::process::id()));
    let mut out = std::fs::File::create(&file)?;
    let started = Instant::now();
    stream.write_all(b"x")?;
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte)?;
    out.write_all(b"{\"at_us\":0,\"happened\":{}}\n")?;
    out.flush()?;
    let asleep = Instant::now();
    std::thread::sleep(Duration::from_millis(1));
    let late = asleep.elapsed().saturating_sub(Duration::from_millis(1));
    let spent = asleep - started + late;
    let _ = echo.join();
    let _ = std::fs::remove_file(&file);
    Ok(spent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_story_turning_on_a_millisecond_is_stretched_until_it_outlasts_the_lag() {
        let lag = Duration::from_micros(300);
        // a race no wider than the widening's "wide enough" runs at the largest scale
        assert_eq!(choose(Some(1), lag).scale, 10.0);
        assert_eq!(choose(Some(WIDE_ENOUGH_MS), lag).scale, 10.0);
        // 10 requests of 0.3 ms: 3 ms, and no scale below 5
        assert_eq!(choose(Some(WIDE_ENOUGH_MS + 1), lag).scale, 5.0);
        assert_eq!(choose(Some(100), lag).scale, 5.0);
        // 10 requests of 1 ms (a PostgreSQL statement's): 10 ms
        assert_eq!(choose(Some(6), Duration::from_millis(1)).scale, 5.0);
        assert_eq!(choose(Some(6), Duration::from_millis(4)).scale, 10.0);
        assert_eq!(choose(Some(6), Duration::from_millis(9)).scale, 10.0, "capped");
        assert_eq!(choose(None, Duration::from_millis(5)).scale, 5.0, "nothing to time");
    }
}
