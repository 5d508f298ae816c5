//! A lookup answered from a copy that lags the gateway's ledger: the worked example's
//! world, where A pays r_815 and at once loses its lease and its job to B. B's lookup of
//! r_815 reads a copy 400 ms behind and says no; the idempotency key then saves the money,
//! and without it r_815 is paid twice.

use fencesim::check::coverage::{Sometimes, Touched};
use fencesim::files::replay_file::ReplayFile;
use fencesim::model::{Mechanism, RefundId, Step};
use fencesim::runner::{run, Outcome, DEFAULT_SEED};
use fencesim::scenario;
use fencesim::scenario::lagging_lookup::{lagging_lookup, LOOKUP_LAG_MS};
use fencesim::scenario::{A, B, R_815};
use fencesim::search::lagging::{doubled_by_a_lie, Lag, LAG_MECHANISMS, LAG_SEEDS};
use fencesim::sim::{CallOutcome, EventKind, FaultKind, GatewayMode, Trigger, WorldConfig};
use fencesim::tell::reports::guarantees::GUARANTEES_REPORT;
use fencesim::tell::reports::lagging::{parse_lagging, LAGGING_HEADING};

fn outcome(gateway: GatewayMode) -> Outcome {
    run(&lagging_lookup().with_mechanism(Mechanism::Fenced, gateway), DEFAULT_SEED).expect("the world runs")
}

fn entries(outcome: &Outcome, refund: RefundId) -> usize {
    outcome.record.ledger.iter().filter(|entry| entry.refund == refund).count()
}

/// B's lookups of r_815 and what each saw: (found, lied with this many ms behind).
fn lookups_of_r_815(outcome: &Outcome) -> (Vec<Option<u32>>, Vec<u64>) {
    let events = &outcome.record.events;
    let found = events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Lookup { worker, refund, found } if worker == B && refund == R_815 => Some(found),
            _ => None,
        })
        .collect();
    let lied = events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::LookupBehind { worker, refund, behind_ms, .. } if worker == B && refund == R_815 => {
                Some(behind_ms)
            }
            _ => None,
        })
        .collect();
    (found, lied)
}

#[test]
fn a_lagging_lookup_that_says_no_for_r_815_still_pays_it_once_through_the_idempotency_key() {
    let outcome = outcome(GatewayMode::Idempotent);
    let (found, lied) = lookups_of_r_815(&outcome);
    assert_eq!(found, [None], "B's lookup says no");
    assert_eq!(lied.len(), 1, "and the ledger had the refund: the lookup lied");
    assert!(lied[0] >= LOOKUP_LAG_MS, "the copy was at least the world's lag behind: {lied:?}");
    let replayed = outcome.record.events.iter().any(|event| {
        matches!(event.kind, EventKind::RefundCalled { worker, refund, outcome: CallOutcome::Replayed, .. } if worker == B && refund == R_815)
    });
    assert!(replayed, "B's call for r_815 is answered from A's refund's record");
    assert_eq!(entries(&outcome, R_815), 1, "r_815 is paid once");
    let violations: Vec<_> = outcome.checks.iter().filter(|check| check.is_violation()).collect();
    assert!(violations.is_empty(), "{violations:?}");
    let turned_away = outcome.record.events.iter().any(|event| {
        matches!(&event.kind, EventKind::Step { worker, step: Step::FenceViolation { .. } } if *worker == A)
    });
    assert!(turned_away, "A's confirm with the older token is turned away when it wakes");
    assert!(Touched::of(&outcome.record, &outcome.scenario.world)
        .sometimes
        .contains(Sometimes::LookupSaidNoForAPaidRefund as usize));
    let told = fencesim::tell::story::story(&outcome);
    assert!(
        told.iter().any(|line| line.text.contains("the lookup lied: it was answered from a copy")),
        "the story tells the lie"
    );
}

#[test]
fn the_same_lie_with_a_non_idempotent_gateway_pays_r_815_twice_and_the_chain_names_the_lookup() {
    let outcome = outcome(GatewayMode::NonIdempotent);
    assert_eq!(entries(&outcome, R_815), 2, "r_815 is paid twice");
    let check = outcome.check("no-double-refund");
    assert!(check.is_violation());
    let chain = outcome.chain(check).expect("a chain");
    assert!(chain.found, "{}", chain.summary);
    assert!(
        chain.summary.contains("answered from a copy 4")
            && chain.summary.contains("said r_815 had no refund, though it had one since 10:00:26."),
        "{}",
        chain.summary
    );
    assert!(doubled_by_a_lie(&outcome), "the chain passes through the lying lookup");
}

/// The twin's counterfactual: the same world with lookups that read the ledger finds A's
/// refund, and B confirms without paying even when no key would stop it.
#[test]
fn without_the_lag_the_lookup_finds_a_s_refund_and_no_gateway_pays_twice() {
    for gateway in GatewayMode::ALL {
        let mut scenario = lagging_lookup().with_mechanism(Mechanism::Fenced, gateway);
        scenario.world.lookup_lag_ms = 0;
        let outcome = run(&scenario, DEFAULT_SEED).unwrap();
        let (found, lied) = lookups_of_r_815(&outcome);
        assert!(found.len() == 1 && found[0].is_some(), "{gateway}: {found:?}");
        assert!(lied.is_empty());
        assert_eq!(entries(&outcome, R_815), 1, "{gateway}");
        assert!(outcome.passed(), "{gateway}");
    }
}

/// A `lookup-lag` fault alone, in a world whose copy keeps up: the copy stops catching up
/// a second before A pays, so B's lookup says no, and the fault's end lets it catch up.
#[test]
fn a_lookup_lag_fault_freezes_the_copy_for_a_while_and_the_chain_cites_it() {
    let mut scenario = lagging_lookup().with_mechanism(Mechanism::Fenced, GatewayMode::NonIdempotent);
    scenario.world.lookup_lag_ms = 0;
    let frozen = FaultKind::LookupLag { for_ms: 2_000 };
    scenario.world.faults = scenario.world.faults.clone().with(frozen, Trigger::At { at_ms: 25_000 });
    let outcome = run(&scenario, DEFAULT_SEED).unwrap();
    let (found, lied) = lookups_of_r_815(&outcome);
    assert_eq!(found, [None]);
    assert_eq!(lied.len(), 1);
    assert!(
        (1_000..2_000).contains(&lied[0]),
        "frozen at 10:00:25, the copy is a second and more behind: {lied:?}"
    );
    let chain = outcome.chain(outcome.check("no-double-refund")).expect("a chain");
    let fault_cited = chain.steps.iter().any(|step| {
        matches!(
            outcome.record.events[step.event].kind,
            EventKind::FaultFired { fault: FaultKind::LookupLag { .. }, .. }
        )
    });
    assert!(fault_cited, "{:?}", chain.steps);
    // after the fault's end the copy keeps up: a second world whose fault ended before B looks sees the refund
    let mut ended = scenario.clone();
    ended.world.faults.faults.last_mut().expect("the fault").kind = FaultKind::LookupLag { for_ms: 500 };
    let outcome = run(&ended, DEFAULT_SEED).unwrap();
    assert!(lookups_of_r_815(&outcome).1.is_empty() && outcome.passed());
}

#[test]
fn the_lagging_world_is_deterministic() {
    let first = outcome(GatewayMode::NonIdempotent);
    let again = outcome(GatewayMode::NonIdempotent);
    assert_eq!(first.trace_hash, again.trace_hash);
    assert_eq!(first.trace_bytes(), again.trace_bytes());
}

/// A world written before lookups could lag has no `lookup_lag_ms`, and means 0; a world
/// whose lookups do not lag is written without it, as before.
#[test]
fn a_world_without_a_lookup_lag_reads_and_writes_as_before() {
    let world = lagging_lookup().world;
    let mut value = serde_json::to_value(&world).unwrap();
    assert_eq!(value["lookup_lag_ms"], LOOKUP_LAG_MS);
    value.as_object_mut().unwrap().remove("lookup_lag_ms");
    let old: WorldConfig = serde_json::from_value(value).unwrap();
    assert_eq!(old.lookup_lag_ms, 0);
    assert!(serde_json::to_value(&old).unwrap().get("lookup_lag_ms").is_none());
}

/// The page marks the lie on the gateway's lane, beside the lookup that told it.
#[test]
fn the_page_marks_the_lying_lookup() {
    let outcome = outcome(GatewayMode::NonIdempotent);
    let view = fencesim::tell::timeline::run_view(&outcome, "a lookup from a lagging copy");
    let lied: Vec<_> = view.lanes.marks.iter().filter(|mark| mark.kind == "lied").collect();
    assert_eq!(lied.len(), 1, "{lied:?}");
    assert!(lied[0].label.contains("the lookup of r_815 lied: its copy was 4"), "{}", lied[0].label);
}

fn guarantees() -> (String, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GUARANTEES_REPORT);
    let stale = format!("{GUARANTEES_REPORT} is stale: regenerate it with `cargo run --release -- matrix`");
    (std::fs::read_to_string(path).unwrap_or_default(), stale)
}

/// Each row of the report's lagging lookups names a seed that runs today as it says.
#[test]
fn the_lagging_lookups_in_the_guarantees_report_are_fresh() {
    let (text, stale) = guarantees();
    let lines = parse_lagging(&text);
    assert_eq!(lines.len(), 2 * LAG_MECHANISMS.len() * GatewayMode::ALL.len(), "{stale}");
    for line in lines {
        assert_eq!(line.seeds, LAG_SEEDS, "{stale}");
        let chosen =
            scenario::build(line.lag.scenario(), line.seed, line.mechanism, line.gateway, line.lag.mask());
        let outcome = run(&chosen.unwrap(), line.seed).unwrap();
        let said =
            format!("{stale} ({} {} {} seed {})", line.lag.name(), line.mechanism, line.gateway, line.seed);
        assert_eq!(format!("{:016x}", outcome.trace_hash), line.trace_hash, "{said}");
        assert_eq!(
            doubled_by_a_lie(&outcome),
            line.doubled_by_lie > 0,
            "{said}: the seed is the first through a lie"
        );
    }
}

/// What the section was built to show, as the committed report measured it: lookups lie
/// only with the lag on; the key saves the money when they do, and without it a lying
/// lookup pays twice.
#[test]
fn the_idempotency_key_saves_the_money_when_the_lookup_lies_and_nothing_else_does() {
    let (text, stale) = guarantees();
    let lines = parse_lagging(&text);
    assert!(!lines.is_empty(), "{stale}");
    for line in &lines {
        let said = format!("{} {} {}", line.lag.name(), line.mechanism, line.gateway);
        match (line.lag, line.gateway) {
            (Lag::Off, _) => assert_eq!((line.lied, line.doubled_by_lie), (0, 0), "{said}"),
            (Lag::On, GatewayMode::Idempotent) => {
                assert!(line.lied > 0 && line.doubled == 0, "{said}: lies, and no refund paid twice")
            }
            (Lag::On, GatewayMode::NonIdempotent) => assert!(line.doubled_by_lie > 0, "{said}"),
        }
    }
}

/// Each shrunk failure of the section replays to its hash, still pays a refund twice
/// (through a lying lookup where it says so), and is at most 3 faults, 3 workers, 5 rows.
#[test]
fn each_shrunk_lagging_failure_replays_small_and_still_pays_twice() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (text, stale) = guarantees();
    let section = text.split(LAGGING_HEADING).nth(1).expect(&stale);
    let mut listed = 0;
    for line in section.lines().take_while(|line| !line.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(file) = cells.get(9).and_then(|cell| cell.strip_prefix('`')?.strip_suffix('`')) else {
            continue;
        };
        let replay = ReplayFile::load(&root.join(file)).unwrap_or_else(|e| panic!("{stale}: {e}"));
        let outcome = run(&replay.scenario().unwrap(), replay.seed).unwrap();
        assert_eq!(format!("{:016x}", outcome.trace_hash), replay.expected_trace_hash, "{stale} ({file})");
        assert!(outcome.check("no-double-refund").is_violation(), "{stale} ({file})");
        assert_eq!(doubled_by_a_lie(&outcome), cells[5] == "yes", "{stale} ({file}: through a lie)");
        let world = &outcome.scenario.world;
        let sizes = [world.faults.faults.len(), world.workers as usize, world.rows.len()];
        assert_eq!(cells[6..9], sizes.map(|n| n.to_string()), "{stale} ({file})");
        assert!(sizes[0] <= 3 && sizes[1] <= 3 && sizes[2] <= 5, "{file} shrank to {sizes:?}");
        listed += 1;
    }
    let kept = std::fs::read_dir(root.join("reports/shrunk")).expect(&stale);
    let kept =
        kept.filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("lookup-lag-"));
    assert_eq!(kept.count(), listed, "{stale}: every file listed, every listed file kept");
    assert!(listed >= 2, "{stale}: the non-idempotent rows fail with the lag on");
}

/// A random world that draws no lag and no `lookup-lag` fault is the same world with the
/// kind switched off, trace for trace: the kind's own stream leaves everything else as it
/// was (so the lag's rows with it off are the matrix's own seeds).
#[test]
fn a_random_world_without_a_lag_is_the_same_with_the_kind_switched_off() {
    use fencesim::scenario::FaultMask;
    use fencesim::sim::FaultName;
    let off = FaultMask::ALL.without(FaultName::LookupLag as usize);
    let mut same = 0;
    for seed in 1..=60u64 {
        let build =
            |mask| scenario::build("random", seed, Mechanism::Fenced, GatewayMode::NonIdempotent, mask);
        let all = build(FaultMask::ALL).unwrap();
        let lags = all.world.lookup_lag_ms > 0;
        if lags || all.world.faults.faults.iter().any(|f| f.kind.kind() == FaultName::LookupLag) {
            continue;
        }
        let without = build(off).unwrap();
        assert_eq!(
            run(&all, seed).unwrap().trace_hash,
            run(&without, seed).unwrap().trace_hash,
            "seed {seed}"
        );
        same += 1;
    }
    assert!(same >= 10, "enough worlds without a lag to compare: {same}");
}
