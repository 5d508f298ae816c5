//! `fencesim agreement`: failures drawn afresh (every built-in mechanism under both
//! gateways and a few planted bugs, on random worlds from seeds no committed file uses,
//! each shrunk), played live once each, and the live verdict set against the simulated
//! one, with where the two histories part when they differ.

use crate::cli::{bad_input, INTERRUPTED};
use crate::files::write::write_whole;
use crate::live::agreement::{judge, play, Played};
use crate::live::interrupt;
use crate::live::postgres::PostgresServer;
use crate::live::scale::{measure_lag_on, Probe};
use crate::search::fresh::{committed_seeds, draw, Drawn, Maker};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct AgreementArgs {
    /// How many failures the live run can play are drawn and played on SQLite
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    failures: u32,
    /// How many of them (the first) are played on PostgreSQL too (0: none)
    #[arg(long, default_value_t = 10)]
    postgres: u32,
    /// The first seed drawn from: each maker searches from its own stride above it
    #[arg(long, default_value_t = 1_000_000)]
    from: u64,
    /// Seeds a maker searches for one failure at most; a maker that finds none is dropped
    #[arg(long, default_value_t = 300)]
    budget: u64,
    /// The project root: no seed of a replay file under its reports/ is drawn
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Where the drawn files and agreement.json are written
    #[arg(long, default_value = "fencesim-failures/agreement")]
    out: PathBuf,
}

/// Seeds between two makers' starts.
const STRIDE: u64 = 100_000;

/// One drawn failure and what became of it.
#[derive(serde::Serialize)]
struct Row {
    maker: String,
    seed: u64,
    file: String,
    simulated: Vec<String>,
    refused: Option<String>,
    played: Vec<Played>,
}

/// The next failures of the first two makers in `queue` (drawn side by side), in queue
/// order; a maker that found one goes to the back of the queue to search on after it, one
/// that found none within the budget leaves it. Rotating so, makers take turns, round after
/// round, and a short measurement draws only what it plays.
fn draw_next(
    queue: &mut std::collections::VecDeque<(Maker, u64)>,
    budget: u64,
    used: &std::collections::BTreeSet<u64>,
) -> Result<Vec<Drawn>, String> {
    let pair: Vec<(Maker, u64)> = (0..2).filter_map(|_| queue.pop_front()).collect();
    let found: Vec<Result<Option<Drawn>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = pair
            .iter()
            .map(|&(maker, start)| scope.spawn(move || draw(maker, start, budget, used)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a draw panicked".into()))).collect()
    });
    let mut drawn = Vec::new();
    for ((maker, _), found) in pair.into_iter().zip(found) {
        if let Some(failure) = found? {
            queue.push_back((maker, failure.seed + 1));
            drawn.push(failure);
        }
    }
    Ok(drawn)
}

fn line(index: usize, row: &Row, played: &Played) -> String {
    let what = format!("{}, seed {}", row.maker, row.seed);
    let simulated = row.simulated.join(", ");
    match &played.parted {
        None if played.live == row.simulated => {
            format!("{index:>3} {:<8} agrees   {what}: {simulated} (scale {})", played.database, played.scale)
        }
        parted => {
            let part = parted.as_ref().map_or("no event differs".to_owned(), |p| {
                let tell = |e: &Option<(u64, String)>| {
                    e.as_ref().map_or("nothing".into(), |(at, w)| format!("{at} ms {w}"))
                };
                format!(
                    "first parting at {}: simulated {}; live {}",
                    p.party,
                    tell(&p.simulated),
                    tell(&p.live)
                )
            });
            format!(
                "{index:>3} {:<8} DIFFERS  {what}: simulated [{simulated}], live [{}] (scale {}); {part}",
                played.database,
                played.live.join(", "),
                played.scale
            )
        }
    }
}

pub fn run(args: AgreementArgs) -> ExitCode {
    match measure(&args) {
        Ok(rows) => summary(&args, &rows),
        Err(error) if interrupt::asked() => {
            eprintln!("fencesim: {error}");
            ExitCode::from(INTERRUPTED)
        }
        Err(error) => bad_input(error),
    }
}

fn measure(args: &AgreementArgs) -> Result<Vec<Row>, String> {
    let program = std::env::current_exe().map_err(|e| format!("cannot find the fencesim program: {e}"))?;
    let used = committed_seeds(&args.root)?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    interrupt::watch();
    let postgres = match args.postgres {
        0 => None,
        _ => Some(PostgresServer::start("agreement")?),
    };
    let url = postgres.as_ref().map(PostgresServer::url);
    let lag = |probe| measure_lag_on(probe).map_err(|e| format!("measuring the lag per request: {e}"));
    let lags = (lag(Probe::Sqlite)?, url.as_deref().map(|u| lag(Probe::Postgres(u))).transpose()?);
    let mut makers: std::collections::VecDeque<(Maker, u64)> =
        Maker::all().into_iter().enumerate().map(|(i, m)| (m, args.from + i as u64 * STRIDE)).collect();
    let (mut rows, mut playable) = (Vec::new(), 0);
    while playable < args.failures as usize && !makers.is_empty() {
        for drawn in draw_next(&mut makers, args.budget, &used)? {
            if playable == args.failures as usize {
                break;
            }
            let row = settle(args, &drawn, &program, playable, lags, url.as_deref())?;
            playable += usize::from(row.refused.is_none());
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Writes a drawn failure out, and plays it if the live run can.
fn settle(
    args: &AgreementArgs,
    drawn: &Drawn,
    program: &Path,
    playable: usize,
    lags: (std::time::Duration, Option<std::time::Duration>),
    postgres: Option<&str>,
) -> Result<Row, String> {
    let name = format!("{}-seed-{}.json", drawn.maker.name().replace(' ', "-"), drawn.seed);
    let path = drawn.file.write_as(&args.out.join(name))?;
    let judged = judge(&drawn.file, program)?;
    let simulated: Vec<String> =
        judged.simulated.checks.iter().filter(|c| c.is_violation()).map(|c| c.invariant.to_owned()).collect();
    let mut row = Row {
        maker: drawn.maker.name(),
        seed: drawn.seed,
        file: path.display().to_string(),
        simulated,
        refused: judged.refused.clone(),
        played: Vec::new(),
    };
    if let Some(why) = &judged.refused {
        eprintln!("  - refused  {}, seed {}: {why}", row.maker, row.seed);
        return Ok(row);
    }
    let mut databases = vec![("sqlite", lags.0, None)];
    if let (Some(lag), Some(url), true) = (lags.1, postgres, playable < args.postgres as usize) {
        databases.push(("postgres", lag, Some(url)));
    }
    for (database, lag, url) in databases {
        let played = play(&drawn.file, &judged.simulated, program, database, lag, url)?;
        println!("{}", line(playable + 1, &row, &played));
        row.played.push(played);
    }
    Ok(row)
}

fn summary(args: &AgreementArgs, rows: &[Row]) -> ExitCode {
    let on = |database: &str| {
        let played =
            rows.iter().flat_map(|r| r.played.iter().filter(|p| p.database == database).map(move |p| (r, p)));
        played.fold((0, 0), |(agree, all), (r, p)| (agree + usize::from(p.live == r.simulated), all + 1))
    };
    let (sqlite, postgres) = (on("sqlite"), on("postgres"));
    let refused = rows.iter().filter(|r| r.refused.is_some()).count();
    println!(
        "\nagreement: SQLite {} of {}, PostgreSQL {} of {} fresh failures; {refused} drawn failures the live run refuses",
        sqlite.0, sqlite.1, postgres.0, postgres.1
    );
    let json = serde_json::to_string_pretty(rows).expect("rows are JSON") + "\n";
    let path = args.out.join("agreement.json");
    match write_whole(&path, json.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => bad_input(format!("cannot write {}: {e}", path.display())),
    }
}
