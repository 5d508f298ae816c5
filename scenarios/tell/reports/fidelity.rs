//! `reports/fidelity.md`: every committed failure beside what the same world and faults
//! did live, written by `fencesim fidelity`. The simulated columns, the refusals, the
//! files' hashes and the intervals are what the current build says of the committed
//! files (a test computes them again); the live columns are what the machine measured.

use crate::live::fidelity::{Judged, Played, DATABASES};
use crate::search::widen::OTHER_SCHEDULES;

pub const FIDELITY_REPORT: &str = "reports/fidelity.md";

/// What was measured, from which the report is written (and written again, with its
/// notes, without playing anything: `fencesim fidelity --render`).
pub const FIDELITY_DATA: &str = "reports/fidelity.json";

/// How many of 10 runs must break the same invariants for a file to agree (of N runs:
/// that share, rounded up).
pub const AGREES_AT: u32 = 8;

/// One file of the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Entry {
    Refused(Judged),
    Played(Played),
}

impl Entry {
    pub fn judged(&self) -> &Judged {
        match self {
            Entry::Refused(judged) => judged,
            Entry::Played(played) => &played.judged,
        }
    }
}

/// Why a file that disagrees does, found by reading its live and simulated stories: the
/// live run's timing, a component the simulation does not model, or the simulation.
pub const NOTES: &[(&str, &str)] = &[
    ("shrunk/fenced-db-sequence-non-idempotent.json", DB_SEQUENCE_RACE),
    ("shrunk/lookup-lag-off-fenced-db-sequence-non-idempotent.json", DB_SEQUENCE_RACE),
    (
        "mutants/failure-taken-as-refunded.json",
        "live timing: a gateway outage of 1 ms at 5 ms, which A's refund call meets at 5 ms in the simulation after six \
         requests; live, A fell a story millisecond behind by then and called after the outage (0 of 5 runs on SQLite). \
         Each request's latency now counts the worker's own work (5 of 5 on SQLite after); PostgreSQL's first statements \
         cost more (1 to 2 of 5 at the chosen scale of 5, 5 of 5 at 10): the chain, one refused call, does not show the \
         outage's millisecond, so the scale is chosen from its 2 ms",
    ),
    ("shrunk/ttl-only-idempotent.json", ONE_MS_RACE),
    ("mutants/confirm-without-fence.json", ONE_MS_RACE),
    (
        "mutants/extend-ttl-ms-as-seconds.json",
        "live timing: A's renewal at 5 ms must come before its crash at 6 ms; a first PostgreSQL statement held the \
         worker's only thread past it (0 of 5 runs). Database calls now wait off the worker's runtime (4 of 5 after)",
    ),
    (
        "mutants/release-by-get-then-del.json",
        "live timing: B is handed its jobs back twenty times before the race, and asking at its next poll lost up to a \
         story millisecond each time: B took the lease after A's DEL had landed (2 and 1 of 5 runs). The queue now says \
         when the oldest delivery is due (5 of 5 on each database after)",
    ),
];

const DB_SEQUENCE_RACE: &str = "live timing: the verdict turns on a tie the chain does not show. At 140 ms B selects \
     the open rows and A confirms `r_008`, in the same millisecond; the simulation runs A's confirm first, so B finds only \
     `r_009` open and pays it beside A. Live (read from a run at `--time-scale 10`), B's select came first in some runs: \
     B found `r_008` sending, looked it up, and its claim found the row already sent, and it gave the batch up before \
     `r_009`. The race margin counts two workers' store operations on the same rows now, so the scale and the \
     widening see this tie, but no nudge of one time keeps the double refund: B's select must fall after A's confirm \
     of `r_008` and before A's claim of `r_009`, one statement's latency (1 ms) apart";

const ONE_MS_RACE: &str = "live timing: B's claim of `r_001` must land in the millisecond before A's confirm, after \
     more than ten milliseconds of B's requests; live, B fell a fraction of a millisecond behind a request and A \
     confirmed first in some runs (each request's latency now counts the worker's own work: `confirm-without-fence` \
     agreed in 5 of 5 runs on each database after, `ttl-only-idempotent` in 4 of 5 on SQLite)";

fn note(file: &str) -> &'static str {
    NOTES.iter().find(|(name, _)| *name == file).map_or("", |(_, note)| note)
}

/// In how many runs on `database` every invariant the simulation breaks broke too (the
/// fewest over those invariants), and what broke live that the simulation keeps.
pub fn agreement(played: &Played, database: &str) -> (u32, Vec<(String, u32)>) {
    let Some(counts) = played.on(database).map(|on| &on.broken) else {
        return (0, Vec::new());
    };
    let same = played.judged.simulated.iter().map(|name| counts.get(name).copied().unwrap_or(0)).min();
    let extra = counts
        .iter()
        .filter(|(name, _)| !played.judged.simulated.contains(name))
        .map(|(name, n)| (name.clone(), *n))
        .collect();
    (same.unwrap_or(0), extra)
}

/// Did `played` break the simulated invariants on `database` in at least `AGREES_AT` of
/// every 10 of its runs?
pub fn agrees_on(played: &Played, database: &str) -> bool {
    let runs = played.on(database).map_or(0, |on| on.runs);
    runs > 0 && agreement(played, database).0 >= (AGREES_AT * runs).div_ceil(10)
}

/// The fewest and the most runs a played file had on a database.
fn run_range(entries: &[Entry]) -> (u32, u32) {
    let runs = entries.iter().flat_map(|entry| match entry {
        Entry::Played(played) => played.databases.iter().map(|on| on.runs).collect(),
        Entry::Refused(_) => Vec::new(),
    });
    (runs.clone().min().unwrap_or(0), runs.max().unwrap_or(0))
}

fn times((fewest, most): (u32, u32)) -> String {
    match fewest == most {
        true => format!("{most} times"),
        false => format!("{fewest} to {most} times"),
    }
}

fn live_cell(played: &Played, database: &str) -> String {
    let (same, extra) = agreement(played, database);
    let Some(on) = played.on(database) else {
        return "not played".to_owned();
    };
    let mut cell = format!("{same} of {} at {}", on.runs, on.scale);
    for (name, n) in extra {
        cell.push_str(&format!("; also {name} in {n}"));
    }
    cell
}

fn row(entry: &Entry) -> String {
    let judged = entry.judged();
    let interval = judged.interval_ms.map_or("-".to_owned(), |ms| format!("{ms} ms"));
    let simulated = judged.simulated.join(", ");
    let head = format!(
        "| `{}` | `{}` | {simulated} | {} of {OTHER_SCHEDULES} | {interval}",
        judged.file, judged.hash, judged.steady
    );
    match entry {
        Entry::Refused(judged) => {
            let why = judged.refused.as_deref().unwrap_or_default();
            format!("{head} | refused | refused | {} |", why.replace('|', "/"))
        }
        Entry::Played(played) => {
            let cells: Vec<String> = DATABASES.iter().map(|db| live_cell(played, db)).collect();
            let agrees = DATABASES.iter().all(|db| agrees_on(played, db));
            let note = if agrees { "" } else { note(&judged.file) };
            format!("{head} | {} | {note} |", cells.join(" | "))
        }
    }
}

fn summary(entries: &[Entry]) -> String {
    let played: Vec<&Played> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Played(played) => Some(played),
            Entry::Refused(_) => None,
        })
        .collect();
    let agreeing = |db: &str| played.iter().filter(|p| agrees_on(p, db)).count();
    let both = played.iter().filter(|p| DATABASES.iter().all(|db| agrees_on(p, db))).count();
    let extra = played.iter().filter(|p| DATABASES.iter().any(|db| !agreement(p, db).1.is_empty())).count();
    let steady = played.iter().filter(|p| p.judged.steady == OTHER_SCHEDULES).count();
    format!(
        "Of {} files, {} can be played live and {} are refused (each names what the live run lacks). \
         Each playable file was played {} on each database. Of the {}, {} break the same invariants live in at least \
         {AGREES_AT} of every 10 of their runs on SQLite, {} on PostgreSQL, {both} on both ({}%); in {} of them some live \
         run broke an invariant the simulation keeps. In the simulation, {steady} of the {} break the same invariants under \
         all {OTHER_SCHEDULES} other schedules.",
        entries.len(),
        played.len(),
        entries.len() - played.len(),
        times(run_range(entries)),
        played.len(),
        agreeing("sqlite"),
        agreeing("postgres"),
        (both * 100).checked_div(played.len()).unwrap_or(0),
        extra,
        played.len()
    )
}

/// The measured entries in `root`'s `reports/fidelity.json`.
pub fn read_data(root: &std::path::Path) -> Result<Vec<Entry>, String> {
    let text =
        std::fs::read_to_string(root.join(FIDELITY_DATA)).map_err(|e| format!("{FIDELITY_DATA}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{FIDELITY_DATA}: {e}"))
}

/// The report.
pub fn render(entries: &[Entry]) -> String {
    let (fewest, most) = run_range(entries);
    let mut out = String::from("# Fidelity: each committed failure, played again on real components\n\n");
    out.push_str(&format!(
        "Generated by `fencesim fidelity --runs {most}`: every file of `reports/shrunk/` and `reports/mutants/`, \
         its verdict in the simulation, and its world and faults played {} live on SQLite and on PostgreSQL \
         (`fencesim live --replay FILE --runs N`), at the time scale `live` chooses: the shortest interval the \
         simulated verdict rests on (the gap between two parties' steps of a violation's chain, or between two \
         workers' store operations on the same rows while the chains go on) against this \
         machine's measured lag. The other schedules are the same world under the scheduler's next \
         {OTHER_SCHEDULES} seeds: in how many the simulation breaks the same invariants (fewer than all: the verdict rests on \
         how the simulation orders what falls in one millisecond, which a real machine need not keep). A file's runs add up over measurements while its row stays what this build says \
         of it (a measurement plays only the runs a row lacks). A live cell says in how many runs every invariant \
         the simulation breaks broke too, and at what time scale it ran (`live` now chooses a database's scale from its own lag \
         per request, a committed statement's round trip on it included).\n\n",
        times((fewest, most))
    ));
    out.push_str(&summary(entries));
    out.push_str(
        "\n\n| file | hash | simulated | other schedules | interval | SQLite | PostgreSQL | note |\n",
    );
    out.push_str("|---|---|---|---:|---:|---|---|---|\n");
    for entry in entries {
        out.push_str(&row(entry));
        out.push('\n');
    }
    out
}
