//! `fencesim bench`: the worked example against its SQL floor, and exploration's cost;
//! with `--record`, writes `reports/bench.md`.

use crate::bench::scale::{ScalePoint, ScaleSize};
use crate::bench::{bench_recorded, BenchResult, ExploreBench, Machine};
use crate::cli::args::{parse_count, parse_runs};
use crate::cli::bad_input;
use crate::files::write::write_report;
use crate::tell::reports::bench::{bench_report, scale_report, BENCH_REPORT, SCALE_REPORT};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Timed runs of the worked example (the figures are their median)
    #[arg(long, default_value_t = 21, value_parser = parse_runs)]
    runs: usize,
    /// Seeds of the random scenario for the exploration figures
    #[arg(long, default_value_t = 1000, value_parser = parse_count, allow_hyphen_values = true)]
    explore_seeds: u64,
    /// Also run this many seeds to see whether memory stays flat (0: skip)
    #[arg(long, default_value_t = 0)]
    memory_seeds: u64,
    /// Recordings of both floor ratios, interleaved (each ratio is their median, printed
    /// with their spread)
    #[arg(long, default_value_t = 5, value_parser = parse_runs)]
    recordings: usize,
    /// Print the figures as one JSON object
    #[arg(long)]
    json: bool,
    /// Also write the figures to reports/bench.md (with --scale: reports/scale.md) under
    /// this project root
    #[arg(long, value_name = "ROOT", num_args = 0..=1, default_missing_value = ".")]
    record: Option<PathBuf>,
    /// Instead: the worked example's shape at 1,200, 12,000 and 120,000 refunds, and a fleet
    /// of 2 to 128 workers over as many merchants, the cost per refund at each size against
    /// its SQL floor (`--runs` times as many runs as make 12,000 refunds at each size)
    #[arg(long)]
    scale: bool,
    /// One size alone (`batch:1200`, `fleet:32`), its figures as JSON: `--scale` measures
    /// each size in a process of its own, so that one size's memory is not another's
    #[arg(long, hide = true, value_parser = ScaleSize::parse)]
    scale_size: Option<ScaleSize>,
    /// With a program: how many processes run its controlled runs at once
    #[arg(long, default_value_t = crate::cli::args::default_jobs(), value_parser = crate::cli::args::parse_jobs)]
    jobs: usize,
    /// Instead: a team's worker program (after `--`) through a 20-refund world of two
    /// workers, `--runs` times in each process: controlled runs a second in `--jobs`
    /// processes and in one, and real-time runs beside them (docs/controlled.md)
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// `bench -- COMMAND`: the program's runs a second, controlled and in real time.
fn run_program(args: &BenchArgs) -> ExitCode {
    let bench = match crate::bench::programs::bench_program(&args.command, args.runs, args.jobs) {
        Ok(bench) => bench,
        Err(error) => return bad_input(error),
    };
    if args.json {
        println!("{}", serde_json::to_value(&bench).expect("figures serialize"));
        return ExitCode::SUCCESS;
    }
    println!(
        "`{}` through 20 refunds, two workers, a pause past the lease ({} story ms), {} runs a process:\n  \
         controlled: {:.2} runs/s in {} processes at once (target >= 5), {:.2} runs/s in one\n  \
         real time (scale 0.25): {:.2} runs/s in one",
        bench.command.join(" "),
        bench.story_ms,
        bench.runs_per_process,
        bench.controlled_per_second,
        bench.jobs,
        bench.controlled_one_per_second,
        bench.real_time_per_second
    );
    ExitCode::SUCCESS
}

fn print_point(point: &ScalePoint) {
    println!(
        "{:>4} workers, {:>6} refunds: {:.1} us a refund ({:.0} ms: world {:.0} ms, checkers and hash {:.0} ms, \
         of which hash {:.0} ms and {} {:.0} ms), SQL floor {:.0} ms, ratio {:.2} (the SQL inside the run \
         {:.2} of it; {:.2} to the floor holding as much as the history), peak memory {:.1} KiB a refund \
         ({:.1} KiB over the process's own)",
        point.workers,
        point.refunds,
        point.run_us_per_refund,
        point.run_ms,
        point.world_ms,
        point.checks_ms,
        point.hash_ms,
        point.slowest_invariant.0,
        point.slowest_invariant.1,
        point.sql_floor_ms,
        point.floor_ratio,
        point.sql_in_run_ratio,
        point.held_floor_ratio,
        point.peak_rss_kb_per_refund,
        point.added_kb_per_refund
    );
}

/// Measures `size` in a child process of this program, so that its peak memory is its own.
fn measure_apart(size: ScaleSize, runs: usize) -> Result<ScalePoint, String> {
    let program = std::env::current_exe().map_err(|error| format!("cannot find this program: {error}"))?;
    let output = std::process::Command::new(program)
        .args(["bench", "--scale-size", &size.name(), "--runs", &runs.to_string()])
        .output()
        .map_err(|error| format!("cannot run the scale bench for {}: {error}", size.name()))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("{}: unreadable figures: {error}", size.name()))
}

/// `bench --scale`: each size's figures, the batch's then the fleet's, each size in a
/// process of its own; printed, and recorded when asked.
fn run_scale(args: &BenchArgs) -> ExitCode {
    let (mut batch, mut fleet) = (Vec::new(), Vec::new());
    for size in ScaleSize::all() {
        let point = match measure_apart(size, args.runs) {
            Ok(point) => point,
            Err(error) => return bad_input(error),
        };
        if !args.json {
            print_point(&point);
        }
        match size {
            ScaleSize::Batch(_) => batch.push(point),
            ScaleSize::Fleet(_) => fleet.push(point),
        }
    }
    if let Some(root) = &args.record {
        if let Err(error) = write_report(root, SCALE_REPORT, &scale_report(&batch, &fleet)) {
            return bad_input(error);
        }
    }
    if args.json {
        println!("{}", serde_json::json!({ "batch": batch, "fleet": fleet }));
    }
    ExitCode::SUCCESS
}

/// The two floor ratios split: the SQL inside the run, the path around it, their spread.
fn print_split(machine: &Machine, worked: &BenchResult, explore: &ExploreBench) {
    let load = machine.load_at_start.map_or_else(|| "unknown".to_owned(), |load| format!("{load:.2}"));
    println!(
        "machine load when the bench began: {load} on {} cores; {} recordings, interleaved\n\
         worked example: ratio {:.2} (spread {:.2} to {:.2}) = SQL inside the run {:.2} + the path {:.2}\n\
         exploration: ratio {:.2} (spread {:.2} to {:.2}) = SQL inside the runs {:.2} + the path {:.2}\n\
         (watching the SQL made the watched runs {:.2} and {:.2} times as long)",
        machine.cores,
        worked.recordings,
        worked.ratio,
        worked.ratio_spread[0],
        worked.ratio_spread[1],
        worked.sql_in_run_ratio,
        worked.path_ratio_points,
        explore.floor_ratio,
        explore.floor_ratio_spread[0],
        explore.floor_ratio_spread[1],
        explore.sql_in_run_ratio,
        explore.path_ratio_points,
        worked.watch_cost,
        explore.watch_cost,
    );
}

fn print_figures(machine: &Machine, worked: &BenchResult, explore: &ExploreBench) {
    print_split(machine, worked, explore);
    let memory = match explore.memory_seeds {
        0 => String::new(),
        seeds => format!(", {:.1} MiB after {seeds} seeds", explore.peak_rss_mb_after_memory_seeds),
    };
    println!(
        "explore: {:.0} seeds/s per core over {} seeds, {:.0} under the baseline: a seed costs {:.2} of the \
         baseline's (target <= 0.65); against the SQL floor of the same seeds {:.2} (target <= 1.35); --jobs 2 \
         speed-up {:.2} (target >= 1.8); the guided search {:.0} runs/s, {:.2} of the uniform search's cost \
         per run (target <= 1.15); peak RSS {:.1} MiB after 1,000 seeds{memory}",
        explore.seeds_per_second_per_core,
        explore.seeds,
        explore.baseline_seeds_per_second,
        explore.cost_vs_baseline,
        explore.floor_ratio,
        explore.jobs2_speedup,
        explore.guided_runs_per_second,
        explore.guided_cost_vs_uniform,
        explore.peak_rss_mb_after_1000,
    );
    println!(
        "worked example: median {:.2} ms over {} runs (world {:.2} ms, checkers and hash {:.2} ms); \
         baseline {:.2} ms: {:.2} of it (target <= 0.75)\n\
         SQL floor, the same {} statements on a bare database: median {:.2} ms\n\
         ratio {:.2} (target <= 1.20)",
        worked.worked_example_ms_median,
        worked.runs,
        worked.world_ms_median,
        worked.checks_ms_median,
        worked.baseline_ms_median,
        worked.cost_vs_baseline,
        worked.statements,
        worked.sql_floor_ms_median,
        worked.ratio
    );
}

pub fn run(args: BenchArgs) -> ExitCode {
    if let Some(size) = args.scale_size {
        return match size.measure(args.runs) {
            Ok(point) => {
                println!("{}", serde_json::to_value(&point).expect("figures serialize"));
                ExitCode::SUCCESS
            }
            Err(error) => bad_input(error),
        };
    }
    if args.scale {
        return run_scale(&args);
    }
    if !args.command.is_empty() {
        return run_program(&args);
    }
    let measured = bench_recorded(args.runs, args.explore_seeds, args.memory_seeds, args.recordings);
    let (machine, worked, explore) = match measured {
        Ok(figures) => figures,
        Err(error) => return bad_input(error),
    };
    if let Some(root) = args.record {
        if let Err(error) = write_report(&root, BENCH_REPORT, &bench_report(&machine, &worked, &explore)) {
            return bad_input(error);
        }
    }
    if args.json {
        let mut value = serde_json::to_value(&worked).expect("a bench result serializes");
        value["explore"] = serde_json::to_value(&explore).expect("a bench result serializes");
        value["machine"] = serde_json::to_value(&machine).expect("a bench result serializes");
        println!("{value}");
    } else {
        print_figures(&machine, &worked, &explore);
    }
    ExitCode::SUCCESS
}
