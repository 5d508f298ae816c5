//! The committed reports are what the project's own command produces today.

use fencesim::runner::{run, DEFAULT_SEED};
use fencesim::scenario::worked_example;
use fencesim::tell::diagram::sequence_diagram;
use fencesim::tell::reports::worked_example::{
    worked_example_page, worked_example_report, WORKED_EXAMPLE_PAGE, WORKED_EXAMPLE_REPORT,
};
use fencesim::tell::story::{render_story, story};

/// Fails unless the committed file at `relative` is `fresh`, byte for byte.
fn assert_fresh(relative: &str, fresh: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{relative} is stale: regenerate it with `cargo run --release -- report` and commit it"
    );
}

#[test]
fn the_worked_example_report_is_fresh() {
    assert_fresh(WORKED_EXAMPLE_REPORT, &worked_example_report().unwrap());
}

/// The page is checked byte for byte, its compressed data too: the same runs, the same
/// script and the same compressor give the same bytes.
#[test]
fn the_worked_example_page_is_fresh_and_small() {
    let fresh = worked_example_page().unwrap();
    assert_fresh(WORKED_EXAMPLE_PAGE, &fresh);
    assert!(fresh.len() < 400 * 1024, "the page is {} KB, over its 400 KB", fresh.len() / 1024);
}

#[test]
fn the_bench_report_shows_every_metric_the_bench_measures() {
    use fencesim::tell::reports::bench::{BENCH_METRICS, BENCH_REPORT};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(BENCH_REPORT);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    for metric in BENCH_METRICS {
        assert!(
            text.lines().any(|line| line.starts_with(&format!("| {metric} |"))),
            "{BENCH_REPORT} lacks {metric}: record it again with `cargo run --release -- bench --record`"
        );
    }
    assert!(text.contains("Measured 20"), "{BENCH_REPORT} must say when it was measured");
}

/// `reports/scale.md` is the scale bench's: a column for every metric it measures, a row
/// for every size of both shapes, and the targets stated (timings cannot be re-measured here).
#[test]
fn the_scale_report_shows_every_metric_at_every_size() {
    use fencesim::bench::scale::{ScaleSize, FLEET_BATCH};
    use fencesim::tell::reports::bench::{SCALE_METRICS, SCALE_REPORT};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCALE_REPORT);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let again = "record it again with `cargo run --release -- bench --scale --record`";
    let headers: Vec<&str> = text.lines().filter(|line| line.starts_with("| workers | refunds |")).collect();
    assert_eq!(headers.len(), 2, "{SCALE_REPORT} needs the batch's table and the fleet's: {again}");
    for metric in SCALE_METRICS {
        assert!(
            headers.iter().all(|header| header.contains(&format!("| {metric} |"))),
            "{SCALE_REPORT} lacks {metric}: {again}"
        );
    }
    for size in ScaleSize::all() {
        let row = match size {
            ScaleSize::Batch(refunds) => format!("| 2 | {refunds} |"),
            ScaleSize::Fleet(workers) => format!("| {workers} | {} |", workers as usize * FLEET_BATCH),
        };
        assert!(
            text.lines().any(|line| line.starts_with(&row)),
            "{SCALE_REPORT} lacks {}: {again}",
            size.name()
        );
    }
    assert!(
        text.contains("measured 20") && text.matches("(target at most 1.2)").count() == 2,
        "{SCALE_REPORT}: when, and the targets: {again}"
    );
}

/// A committed file of the project, or nothing when it is missing.
fn committed(relative: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative))
        .unwrap_or_default()
}

/// The sweep's chart is drawn from the sweep's table: drawn again from the committed report
/// it is the committed chart, byte for byte. The report's own test keeps the table fresh,
/// so this keeps the chart fresh.
#[test]
fn the_sweep_chart_is_drawn_from_the_committed_guarantees_report() {
    use fencesim::search::matrix::SWEEP_TTLS_MS;
    use fencesim::tell::reports::guarantees::{parse_sweep, sweep_chart, GUARANTEES_REPORT, SWEEP_CHART};
    let report = committed(GUARANTEES_REPORT);
    let lines = parse_sweep(&report);
    assert_eq!(lines.len(), 2 * SWEEP_TTLS_MS.len(), "{GUARANTEES_REPORT}: the sweep's table, read back");
    assert!(report.contains("](sweep.svg)\n"), "{GUARANTEES_REPORT} links the chart");
    let chart = sweep_chart(&report);
    // one marker per row of the table, each with its hover text
    assert_eq!(chart.matches("</circle>").count() + chart.matches("</rect>").count(), 2 * lines.len());
    assert!(
        committed(SWEEP_CHART) == chart,
        "{SWEEP_CHART} is stale: regenerate it with `cargo run --release -- matrix` and commit it"
    );
}

/// The detection chart is drawn from the mutant table's seeds to detect, as the sweep's is.
#[test]
fn the_detection_chart_is_drawn_from_the_committed_detection_report() {
    use fencesim::mutant::Mutant;
    use fencesim::tell::reports::detection::{
        detection_chart, parse_seeds_to_detect, DETECTION_CHART, DETECTION_REPORT,
    };
    let report = committed(DETECTION_REPORT);
    let rows = parse_seeds_to_detect(&report);
    assert_eq!(
        rows.len(),
        Mutant::SWARM.len(),
        "{DETECTION_REPORT}: every mutant's seeds to detect, read back"
    );
    assert!(report.contains("](detection.svg)\n"), "{DETECTION_REPORT} links the chart");
    let chart = detection_chart(&report);
    for row in &rows {
        assert!(chart.contains(&format!(">{}</text>", row.mutant)), "{} has a bar", row.mutant);
    }
    assert!(
        committed(DETECTION_CHART) == chart,
        "{DETECTION_CHART} is stale: regenerate it with `cargo run --release -- mutants --search uniform,guided` and commit it"
    );
}

#[test]
fn the_timeline_of_the_worked_example() {
    let outcome = run(&worked_example(), DEFAULT_SEED).unwrap();
    insta::assert_snapshot!("worked_example_timeline", render_story(&outcome, &story(&outcome), usize::MAX));
}

#[test]
fn the_sequence_diagram_comes_from_the_history() {
    let outcome = run(&worked_example(), DEFAULT_SEED).unwrap();
    let diagram = sequence_diagram(&outcome, &story(&outcome));
    assert!(diagram.starts_with("sequenceDiagram\n"));
    for step in [
        "A->>R: SET lock:settle:m_4471 NX PX 30000",
        "R-->>A: 33",
        "A->>D: claim r_815 fence 33",
        "Note over A: frozen for 8,000 ms",
        "Note over R: lock:settle:m_4471 expires",
        "R-->>B: 34",
        "B->>G: find r_815",
        "A->>D: confirm r_815 fence 33",
        "D-->>A: 0 rows",
        "Note over A: FenceViolation",
    ] {
        assert!(diagram.contains(step), "missing {step:?} in\n{diagram}");
    }
    // the diagram's order is the history's order
    let claim = diagram.find("A->>D: claim r_815").unwrap();
    let expiry = diagram.find("Note over R:").unwrap();
    let rejected = diagram.find("D-->>A: 0 rows").unwrap();
    assert!(claim < expiry && expiry < rejected);
}

/// `reports/fidelity.md` is written from `reports/fidelity.json`, and the data covers every
/// file of `reports/shrunk/` and `reports/mutants/` as the current build judges it: the
/// file's hash, the simulated verdict, the interval the time scale was chosen from and
/// whether the live run refuses it. (The live counts were measured on a machine with the
/// real components: `fencesim fidelity` measures them again.)
#[test]
fn the_fidelity_report_covers_every_committed_failure_as_this_build_judges_it() {
    use fencesim::live::fidelity::{files, judge};
    use fencesim::tell::reports::fidelity::{read_data, render, FIDELITY_REPORT};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let program = std::path::Path::new(env!("CARGO_BIN_EXE_fencesim"));
    let entries = read_data(root).unwrap();
    let stale = "is stale: measure it again with `cargo run --release -- fidelity` and commit it";
    let measured: Vec<_> = entries.iter().map(|entry| entry.judged().clone()).collect();
    let judged: Vec<_> =
        files(root).unwrap().iter().map(|path| judge(root, path, program).unwrap()).collect();
    assert!(judged.len() >= 50, "the report's files are found");
    assert_eq!(measured, judged, "{FIDELITY_REPORT} {stale}");
    assert!(
        committed(FIDELITY_REPORT) == render(&entries),
        "{FIDELITY_REPORT} is not what its data gives: write it again with `cargo run --release -- fidelity --render`"
    );
}
