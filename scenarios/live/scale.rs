//! The time scale a live replay runs at when none is asked for. A shrunk world's story
//! can turn on a millisecond (a lease's TTL of 12 ms, a fault a millisecond before a
//! grant), while a live worker's request costs a real fraction of one on top of the
//! latency the story gives it (the real command, its event line, the runtime's waking).
//! So the story is stretched until its shortest interval is several requests' worth of
//! this machine's lag: the interval from the simulated run's chains (the events from the
//! fault to each breach, which is the order the verdict rests on), the lag measured here.

use crate::runner::Outcome;
use crate::search::widen::race_margin;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The scales a default is chosen from (the largest keeps a minute's story in ten). None
/// is below 5: measured here, at 1 a PostgreSQL worker fell behind the story even where the
/// shortest interval was 9 to 114 ms (a statement there costs more than the lag measured
/// below), while at 5 every such file agreed.
const SCALES: [f64; 2] = [5.0, 10.0];

/// How many requests' lag the shortest interval is to outlast. Measured here at scale 1: a
/// live worker is one to two story milliseconds behind the simulated one by its fifth
/// request (five to ten times the lag this module measures, 0.2 ms), so twenty is about
/// twice what a race a few requests into a batch has lost.
const REQUESTS: f64 = 20.0;

/// The default and what it was chosen from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chosen {
    pub scale: f64,
    /// The shortest gap between two steps of a violation's chain, in the story (a gap of
    /// no time counts as a millisecond); none when the simulated run breaks nothing.
    pub interval_ms: Option<u64>,
    /// This machine's lag per request, measured.
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

/// The shortest gap between consecutive steps of a violation's chain that two parties
/// took (`widen::race_margin`: one worker's own steps keep their order at any speed); if
/// no two parties follow each other in any chain, the shortest gap between any two steps.
pub fn shortest_interval(simulated: &Outcome) -> Option<u64> {
    let any_gap = || {
        let chains = simulated.chains();
        let gaps =
            chains.iter().flat_map(|(_, chain)| chain.steps.windows(2).map(|p| p[1].at_ms - p[0].at_ms));
        gaps.min()
    };
    race_margin(simulated).map(|(gap, _)| gap).or_else(any_gap).map(|gap| gap.max(1))
}

/// The scale for a story whose shortest interval is `interval_ms`, on a machine whose
/// lag per request is `lag`: the smallest of `SCALES` that makes the interval outlast
/// `REQUESTS` requests' lag.
pub fn choose(interval_ms: Option<u64>, lag: Duration) -> Chosen {
    let scale = match interval_ms {
        None => SCALES[0],
        Some(ms) => {
            let needed = REQUESTS * lag.as_secs_f64() * 1000.0 / ms as f64;
            SCALES.into_iter().find(|scale| *scale >= needed).unwrap_or(SCALES[SCALES.len() - 1])
        }
    };
    Chosen { scale, interval_ms, lag }
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
        let lag = Duration::from_micros(100);
        // 20 requests of 0.1 ms: 2 ms, and no scale below 5
        assert_eq!(choose(Some(1), lag).scale, 5.0);
        assert_eq!(choose(Some(100), lag).scale, 5.0);
        // 20 requests of 0.3 ms: 6 ms
        assert_eq!(choose(Some(1), Duration::from_micros(300)).scale, 10.0);
        assert_eq!(choose(Some(2), Duration::from_micros(300)).scale, 5.0);
        assert_eq!(choose(Some(1), Duration::from_millis(5)).scale, 10.0, "capped");
        assert_eq!(choose(None, Duration::from_millis(5)).scale, 5.0, "nothing to time");
    }
}
