//! `reports/bench.md`: the bench's figures, with the date and the machine they were
//! taken on.

use crate::bench::scale::{ScalePoint, EQUAL_WORK_REFUNDS, FLEET_BATCH};
use crate::bench::{BenchResult, ExploreBench, Machine};
use fencesim_model::group_thousands;

pub const BENCH_REPORT: &str = "reports/bench.md";

/// The metrics a bench report must show, by the names `--json` gives them.
pub const BENCH_METRICS: [&str; 16] = [
    "worked_example_ms_median",
    "sql_floor_ms_median",
    "ratio",
    "sql_in_run_ratio",
    "path_ratio_points",
    "baseline_ms_median",
    "cost_vs_baseline",
    "world_ms_median",
    "checks_ms_median",
    "scripts_ms_median",
    "script_share",
    "scripts_per_seed",
    "script_ratio_points",
    "sleeps_per_seed",
    "sleep_ns",
    "sleep_ratio_points",
];

/// Today's date in UTC, `YYYY-MM-DD`, from the real clock (a bench runs outside any simulation).
fn today_utc() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    // days since 1970-01-01 to a civil date (proleptic Gregorian calendar)
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // months counted from March, so that the leap day ends the year
    let march_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 { march_month + 3 } else { march_month - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// What machine the figures were taken on.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|cpuinfo| {
            cpuinfo
                .lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    format!("{cores} cores, {cpu}, {} {}", std::env::consts::OS, std::env::consts::ARCH)
}

/// The bench report, as Markdown.
pub fn bench_report(on: &Machine, worked: &BenchResult, explore: &ExploreBench) -> String {
    format!(
        "# Benchmarks\n\n\
         Written by `fencesim bench --record` (release build). Figures are ratios taken in one process on one \
         machine; the absolute times only say how loaded that machine was.\n\n\
         Measured {date} on {machine}; the machine's load when the bench began: {load}. Each floor ratio is \
         the median of {recordings} recordings, the worked example's and exploration's interleaved, and its \
         spread their lowest and highest.\n\n\
         Two references. The **SQL floor** runs the statements a simulated run executed (the rows loaded, \
         every select, claim, confirm and sequence token, the settlement ledger's statements, the reads at the \
         end) on the same kind of database with no simulation around them: a run's ratio to it is what the \
         simulation itself costs. The floor is the store as it is now: writes decided by their row count, the \
         state's check written with `OR`, databases emptied and kept between runs. The **baseline** is the \
         store as it was: each write returning its row (`RETURNING state, fence`), the check written \
         `state IN (...)`, fresh databases for every run; the same seeds give the same traces under it (the \
         bench checks), so its ratio is what the cheaper database work saved.\n\n\
         {worked}{explore}\
         Reproduce with `cargo run --release -- bench --runs {runs} --explore-seeds {seeds} --memory-seeds {ms}`.\n\n\
         ## At scale\n\n\
         The cost per refund as the world grows (the worked example's shape at 1,200 to 120,000 refunds, a fleet \
         of 2 to 128 workers), each size against its own SQL floor, is in `{SCALE_REPORT}`, written by \
         `cargo run --release -- bench --scale --record`.\n",
        date = today_utc(),
        machine = machine(),
        load = on.load_at_start.map_or_else(|| "unknown".to_owned(), |load| format!("{load:.2}")),
        recordings = worked.recordings,
        worked = worked_section(worked),
        explore = explore_section(explore),
        runs = worked.runs,
        seeds = explore.seeds,
        ms = explore.memory_seeds,
    )
}

/// The worked example's section.
fn worked_section(worked: &BenchResult) -> String {
    format!(
        "## The worked example\n\n\
         {statements} statements; {runs} runs each, interleaved.\n\n\
         | metric | value |\n|---|---:|\n\
         | ratio | {ratio:.2} (target at most 1.20; spread {low:.2} to {high:.2}) |\n\
         | sql_in_run_ratio | {sql:.2} |\n\
         | path_ratio_points | {path:.2} |\n\
         | watch_cost | {watch:.2} |\n\
         | cost_vs_baseline | {vs:.2} (target at most 0.75) |\n\
         | worked_example_ms_median | {we:.2} |\n\
         | sql_floor_ms_median | {floor:.2} |\n\
         | baseline_ms_median | {base:.2} |\n\
         | world_ms_median | {world:.2} |\n\
         | checks_ms_median | {checks:.2} |\n\
         | scripts | {scripts} |\n\
         | scripts_ms_median | {scripts_ms:.3} |\n\
         | script_share | {script_share:.3} |\n\
         | sleeps | {sleeps} |\n\
         | sleep_ratio_points | {sleep_points:.3} |\n\n\
         `world` is the simulated run alone; `checks` is every invariant plus the trace hash. `scripts` are the \
         lease's Lua scripts the run sent (its releases and renewals), run again with nothing around them on a \
         bare simulated Redis, each taking the branch it took in the run: `script_share` is their time over the \
         run's, what the embedded Lua costs. `sleeps` are the times a task of the run waited on the runtime's \
         timer (each latency a request waits out is one); `sleep_ratio_points` is their price, one wait timed on \
         a bare runtime (`sleep_ns` below), over the SQL floor: the part of `ratio` that no change to the \
         simulation's own code removes while every request waits out its latency on the runtime's clock. \
         `sql_in_run_ratio` is the real time the run's statements took inside it (the run once more, a clock \
         read around each statement) over the floor: the same statements cost more between the simulation's \
         own work than back to back. `path_ratio_points` is `ratio` less that: the simulation's own path \
         around its requests (the runtime, the ports, the history, the faults, the worker's code, the Lua). \
         `watch_cost` is the watched run's time over the unwatched one's.\n\n",
        runs = worked.runs,
        statements = worked.statements,
        ratio = worked.ratio,
        low = worked.ratio_spread[0],
        high = worked.ratio_spread[1],
        sql = worked.sql_in_run_ratio,
        path = worked.path_ratio_points,
        watch = worked.watch_cost,
        vs = worked.cost_vs_baseline,
        we = worked.worked_example_ms_median,
        floor = worked.sql_floor_ms_median,
        base = worked.baseline_ms_median,
        world = worked.world_ms_median,
        checks = worked.checks_ms_median,
        scripts = worked.scripts,
        scripts_ms = worked.scripts_ms_median,
        script_share = worked.script_share,
        sleeps = worked.sleeps,
        sleep_points = worked.sleep_ratio_points,
    )
}

/// Exploration's section.
fn explore_section(explore: &ExploreBench) -> String {
    format!(
        "## Exploration\n\n\
         Seeds 1 to {seeds} of the random scenario under `{mechanism}` (every fault kind on), each run and checked, \
         on one thread, best of three, alternating with the baseline.\n\n\
         | metric | value |\n|---|---:|\n\
         | seeds_per_second_per_core | {sps:.0} |\n\
         | floor_ratio | {fr:.2} (target at most 1.35; spread {low:.2} to {high:.2}) |\n\
         | sql_in_run_ratio | {sql:.2} |\n\
         | path_ratio_points | {path:.2} |\n\
         | watch_cost | {watch:.2} |\n\
         | scripts_per_seed | {sps_lua:.2} |\n\
         | script_share | {lua_share:.3} |\n\
         | script_ratio_points | {lua_points:.3} |\n\
         | sleeps_per_seed | {sleeps:.1} |\n\
         | sleep_ns | {sleep_ns:.0} |\n\
         | sleep_ratio_points | {sleep_points:.3} |\n\
         | cost_vs_baseline | {evs:.2} (target at most 0.65) |\n\
         | baseline_seeds_per_second | {bsps:.0} |\n\
         | jobs2_speedup | {sp:.2} (target at least 1.8) |\n\
         | guided_runs_per_second | {grps:.0} |\n\
         | guided_cost_vs_uniform | {gvu:.2} (target at most 1.15) |\n\
         | peak_rss_mb_after_1000 | {m1:.1} |\n\
         | peak_rss_mb_after_memory_seeds | {m2:.1} (after {ms} seeds) |\n\n\
         `script_ratio_points` is the scripts' time over the SQL floor: how much of `floor_ratio` the embedded \
         Lua makes. `sleep_ns` is one wait on the runtime's timer, timed on a bare runtime (four tasks waiting a \
         millisecond at a time, 200,000 waits, best of three); `sleep_ratio_points` is the seeds' waits at that \
         price over the SQL floor. `guided` is `explore --search guided` over as many runs from seed 1 on one thread, best of \
         three, alternating with the uniform search, after the memory figures: half its runs are changed plans \
         of kept worlds, not the uniform search's seeds, so its cost per run includes what those runs cost as \
         well as the corpus and the changes.\n\n",
        sps_lua = explore.scripts_per_seed,
        lua_share = explore.script_share,
        lua_points = explore.script_ratio_points,
        sleeps = explore.sleeps_per_seed,
        sleep_ns = explore.sleep_ns,
        sleep_points = explore.sleep_ratio_points,
        seeds = explore.seeds,
        mechanism = explore.mechanism,
        sps = explore.seeds_per_second_per_core,
        fr = explore.floor_ratio,
        low = explore.floor_ratio_spread[0],
        high = explore.floor_ratio_spread[1],
        sql = explore.sql_in_run_ratio,
        path = explore.path_ratio_points,
        watch = explore.watch_cost,
        evs = explore.cost_vs_baseline,
        bsps = explore.baseline_seeds_per_second,
        sp = explore.jobs2_speedup,
        grps = explore.guided_runs_per_second,
        gvu = explore.guided_cost_vs_uniform,
        m1 = explore.peak_rss_mb_after_1000,
        m2 = explore.peak_rss_mb_after_memory_seeds,
        ms = explore.memory_seeds,
    )
}

pub const SCALE_REPORT: &str = "reports/scale.md";

/// The metrics a scale report must show for every size, by the names `--json` gives them.
pub const SCALE_METRICS: [&str; 8] = [
    "run_us_per_refund",
    "floor_ratio",
    "sql_in_run_ratio",
    "held_floor_ratio",
    "world_ms",
    "checks_ms",
    "peak_rss_kb_per_refund",
    "added_kb_per_refund",
];

/// A shape's table: one row a size.
fn scale_table(points: &[ScalePoint]) -> String {
    let mut table = String::from(
        "| workers | refunds | runs | events | run_us_per_refund | floor_ratio | sql_in_run_ratio | held_floor_ratio | \
         world_ms | checks_ms | sql_floor_ms | peak_rss_kb_per_refund | added_kb_per_refund |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in points {
        table.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} |\n",
            p.workers,
            p.refunds,
            p.runs,
            p.events,
            p.run_us_per_refund,
            p.floor_ratio,
            p.sql_in_run_ratio,
            p.held_floor_ratio,
            p.world_ms,
            p.checks_ms,
            p.sql_floor_ms,
            p.peak_rss_kb_per_refund,
            p.added_kb_per_refund
        ));
    }
    table
}

/// A shape's figures against the targets, with what the simulation adds to the SQL per
/// refund at each size and the memory each size added per refund it added.
fn scale_verdict(points: &[ScalePoint]) -> String {
    let (first, last) = (points.first(), points.last());
    let growth = first.zip(last).map_or(0.0, |(a, b)| b.run_us_per_refund / a.run_us_per_refund);
    let worst_ratio = points.iter().map(|p| p.floor_ratio).fold(0.0, f64::max);
    let over_floor: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1}", (p.run_ms - p.sql_floor_ms) * 1e3 / p.refunds as f64))
        .collect();
    let added_kb = |p: &ScalePoint| p.added_kb_per_refund * p.refunds as f64;
    let marginal: Vec<String> = points
        .windows(2)
        .map(|pair| {
            let more = pair[1].refunds.saturating_sub(pair[0].refunds).max(1) as f64;
            format!("{:.2}", (added_kb(&pair[1]) - added_kb(&pair[0])) / more)
        })
        .collect();
    let held: Vec<String> =
        points.iter().map(|p| format!("{:+.2}", p.floor_ratio - p.held_floor_ratio)).collect();
    format!(
        "Time per refund at the largest size against the smallest: {growth:.2} (target at most 1.2). \
         Worst floor ratio: {worst_ratio:.2} (target at most 1.25). What the simulation adds to the SQL, in us a \
         refund, size by size: {over}. What holding the history's bytes costs the floor, as the ratio it takes \
         away, size by size: {held}. Memory each size added over the one before, in KiB a refund added: \
         {marginal} (linear when these stay alike).\n",
        over = over_floor.join(", "),
        held = held.join(", "),
        marginal = marginal.join(", "),
    )
}

/// `reports/scale.md`: the cost per refund at each size of each shape, and the targets
/// against it.
pub fn scale_report(batch: &[ScalePoint], fleet: &[ScalePoint]) -> String {
    format!(
        "# Scale\n\n\
         Written by `fencesim bench --scale --record` (release build), measured {date} on {machine}. Medians \
         of the runs; the floor runs each size's own statements on a bare in-memory SQLite, and `floor_ratio` \
         is the median of each run over the floor taken right after it. `held_floor_ratio` is the same against \
         the floor made to hold, as it goes, as many bytes as the run's history (its events at their inline size, not \
         counting the strings they own): were the run's cost over the floor the cache room its history takes from SQLite's pages, \
         the held floor would be slower by that much and `held_floor_ratio` would fall below `floor_ratio` \
         as the sizes grow. `runs` is how often each size ran: `--runs` times as many runs as make at \
         least {equal} refunds, so that a small size's medians are taken over as much work as a large one's. \
         `sql_in_run_ratio` is the real time the world run's statements took inside it (a clock read around \
         each statement) over the floor taken right after it: `floor_ratio` less it is the simulation's own \
         path around its requests, with the checkers.\n\n\
         ## The batch\n\n\
         The worked example's shape (one merchant, two workers, A frozen 68% of the way down the batch, B \
         taking over) at each size; its lease, visibility timeout, pause and settle bound grow with the \
         batch.\n\n{batch_table}\n{batch_verdict}\n\
         ## The fleet\n\n\
         As many merchants as workers, {per} refunds each: the first half of the workers freeze 68% of the way \
         down their batches, the second half finish their own and take the frozen workers' jobs over, and \
         each frozen worker's next write is turned away by a fence.\n\n{fleet_table}\n{fleet_verdict}",
        date = today_utc(),
        machine = machine(),
        per = FLEET_BATCH,
        equal = group_thousands(EQUAL_WORK_REFUNDS as u64),
        batch_table = scale_table(batch),
        batch_verdict = scale_verdict(batch),
        fleet_table = scale_table(fleet),
        fleet_verdict = scale_verdict(fleet),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn today_is_a_plausible_date() {
        let date = super::today_utc();
        assert_eq!(date.len(), 10);
        assert!(date.as_str() >= "2024-01-01", "{date}");
    }
}
