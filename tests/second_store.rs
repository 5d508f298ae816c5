//! The second store, the merchant's settlement ledger: its invariants can fail, a world
//! with it is as deterministic as one without, a replay file written before it existed
//! still means what it meant, and the mechanisms that fence both stores keep it clean.

use fencesim::check::{check_all, Check, Facts};
use fencesim::files::replay_file::ReplayFile;
use fencesim::model::{Cents, Mechanism, MerchantId, RefundId, RefundState, Token, WorkerId};
use fencesim::runner::{run, run_with};
use fencesim::scenario::{self, worked_example, worked_example_two_stores, FaultMask, A, B, M_4471, R_815};
use fencesim::search::second_store::STORE_SCENARIO;
use fencesim::sim::{Epoch, EpochEnd, Event, EventKind, GatewayMode, RunRecord, WallMs};

fn record(events: Vec<EventKind>) -> RunRecord {
    let world = worked_example_two_stores().world;
    // events are one a millisecond here, so a moment's event index is its millisecond
    let epoch = |number, worker, value: &str, granted_at_ms: u64, expired_at_ms: Option<u64>| Epoch {
        number,
        worker,
        key: "lock:settle:m_4471".into(),
        value: value.into(),
        granted_at_ms,
        granted_at_event: granted_at_ms as usize,
        expired_at_ms,
        ended: expired_at_ms.map(|at_ms| EpochEnd { at_ms, event: at_ms as usize, by_owner: false }),
    };
    RunRecord {
        seed: 0,
        events: events.into_iter().enumerate().map(|(at, kind)| Event { at_ms: at as u64, kind }).collect(),
        final_rows: world.rows.clone(),
        ledger: Vec::new(),
        settlement_entries: Vec::new(),
        settlement_balances: Vec::new(),
        epochs: vec![epoch(1, A, "A#1", 0, Some(5)), epoch(2, B, "B#1", 6, None)],
        settled: true,
        ended_at_ms: 100,
        last_fault_ms: None,
        open_jobs: Vec::new(),
        leaked_tasks: 0,
        served: Vec::new(),
        sleeps: 0,
    }
}

fn check(record: &RunRecord, invariant: &str) -> Check {
    let world = worked_example_two_stores().world;
    let checks = check_all(&Facts { record, world: &world, base: WallMs::hms(10, 0, 0) });
    checks.into_iter().find(|check| check.invariant == invariant).unwrap()
}

fn posted(worker: WorkerId, epoch: u32, cents: i64, token: Option<i64>) -> EventKind {
    EventKind::SettlementPosted {
        worker,
        epoch: Some(epoch),
        refund: R_815,
        merchant: M_4471,
        amount: Cents(cents),
        token: token.map(Token),
        rows: 1,
        balance: None,
    }
}

#[test]
fn a_refund_posted_twice_breaks_posted_once_at_the_second_posting() {
    let history = record(vec![posted(B, 2, 7025, None), posted(A, 1, 7025, None)]);
    let posted_once = check(&history, "posted-once");
    assert!(posted_once.is_violation());
    assert_eq!(posted_once.breaches[0].event, Some(1), "the second posting is the breach");
    assert!(posted_once.breaches[0].detail.contains("r_815 was posted to the settlement ledger twice"));
    let once = record(vec![posted(B, 2, 7025, Some(34))]);
    assert!(check(&once, "posted-once").holds());
    // a posting turned away is no posting
    let mut refused = posted(A, 1, 7025, Some(33));
    if let EventKind::SettlementPosted { rows, .. } = &mut refused {
        *rows = 0;
    }
    assert!(check(&record(vec![posted(B, 2, 7025, Some(34)), refused]), "posted-once").holds());
}

#[test]
fn a_posting_for_another_amount_than_the_rows_breaks_posted_once() {
    let wrong = check(&record(vec![posted(B, 2, 7026, Some(34))]), "posted-once");
    assert!(wrong.is_violation());
    assert!(wrong.breaches[0].detail.contains("the row says 70.25 EUR"), "{:?}", wrong.breaches);
}

#[test]
fn a_balance_that_is_not_the_refunds_sent_breaks_balance_matches_sent_at_rest() {
    let mut history = record(Vec::new());
    let row = history.final_rows.iter_mut().find(|row| row.id == R_815).unwrap();
    row.state = RefundState::Sent;
    history.settlement_balances = vec![(M_4471, Cents(7025))];
    assert!(check(&history, "balance-matches-sent").holds(), "r_815 sent, 70.25 EUR posted");
    history.settlement_balances = vec![(M_4471, Cents(14_050))];
    let twice = check(&history, "balance-matches-sent");
    assert!(twice.is_violation());
    assert!(twice.breaches[0]
        .detail
        .contains("balance is 140.50 EUR, but its sent refunds add up to 70.25 EUR"));
    history.settlement_balances = vec![(M_4471, Cents(7025)), (MerchantId(9), Cents(1))];
    assert!(
        check(&history, "balance-matches-sent").is_violation(),
        "a balance of a merchant with no rows sent"
    );
    history.settled = false;
    assert!(check(&history, "balance-matches-sent").holds(), "an unsettled run is not at rest");
    history.settled = true;
    let world = worked_example().world;
    let one_store = check_all(&Facts { record: &history, world: &world, base: WallMs::hms(10, 0, 0) });
    let balance = one_store.iter().find(|check| check.invariant == "balance-matches-sent").unwrap();
    assert!(balance.holds(), "a world with one store has no balance to check");
}

#[test]
fn a_world_with_the_second_store_gives_the_same_bytes_for_the_same_seed() {
    for mechanism in [Mechanism::FencedOneStore, Mechanism::Fenced, Mechanism::TtlOnly] {
        let built =
            scenario::build(STORE_SCENARIO, 11, mechanism, GatewayMode::Idempotent, FaultMask::ALL).unwrap();
        assert!(built.world.settlement.is_some(), "{STORE_SCENARIO} worlds have the second store");
        let first = run(&built, 11).unwrap();
        let second = std::thread::spawn(move || run(&built, 11).unwrap()).join().unwrap();
        assert_eq!(first.trace_hash, second.trace_hash, "{mechanism}");
        assert!(first.trace_bytes() == second.trace_bytes(), "{mechanism}: trace bytes differ");
        let postings =
            first.record.events.iter().filter(|e| matches!(e.kind, EventKind::SettlementPosted { .. }));
        assert!(postings.count() > 0, "{mechanism}: the run posts to the second store");
    }
}

/// The random scenario has the second store in about one seed of four (its fence would
/// hide a bug in the rows' fences if every world had it), and always for the mechanism
/// about it; the seeds that have it are the same worlds as in `random-two-stores`, and
/// a world without it draws no fault on its statements.
#[test]
fn the_random_scenario_has_the_second_store_in_a_share_of_seeds_and_always_for_the_mechanism_about_it() {
    let build = |name: &str, seed: u64, mechanism: Mechanism| {
        scenario::build(name, seed, mechanism, GatewayMode::Idempotent, FaultMask::ALL).unwrap()
    };
    let mut with = 0;
    for seed in 1..=200u64 {
        let random = build("random", seed, Mechanism::Fenced);
        assert!(build("random", seed, Mechanism::FencedOneStore).world.settlement.is_some(), "seed {seed}");
        let Some(settlement) = random.world.settlement else {
            let on_it =
                |f: &fencesim::sim::Fault| f.kind.kind().hop() == Some(fencesim::sim::Hop::Settlement);
            assert!(
                !random.world.faults.faults.iter().any(on_it),
                "seed {seed}: a fault on a store it lacks"
            );
            continue;
        };
        with += 1;
        let two = build(STORE_SCENARIO, seed, Mechanism::Fenced);
        assert_eq!(two.world.settlement, Some(settlement), "seed {seed}");
        assert_eq!(format!("{:?}", two.world.faults), format!("{:?}", random.world.faults), "seed {seed}");
    }
    assert!((30..=70).contains(&with), "one world in four has the second store: {with} of 200");
}

#[test]
fn a_replay_file_written_before_the_second_store_loads_without_it_and_replays_to_its_hash() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/regressions/token-drawn-after-the-lease-expired.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("settlement"), "the file predates the second store");
    let file = ReplayFile::load(&path).unwrap();
    let scenario = file.scenario().unwrap();
    assert_eq!(scenario.world.settlement, None, "an old file means one store");
    let outcome = run_with(&scenario, file.seed, file.mutant).unwrap();
    assert_eq!(format!("{:016x}", outcome.trace_hash), file.expected_trace_hash);
    assert!(!outcome.record.events.iter().any(|e| e.kind.actor() == fencesim::sim::Actor::Settlement));
}

#[test]
fn a_mechanism_about_the_second_store_needs_a_world_that_has_one() {
    let mut world = worked_example().with_mechanism(Mechanism::FencedOneStore, GatewayMode::Idempotent).world;
    world.settlement = None;
    let refused = world.validate().unwrap_err();
    assert!(refused.contains("fenced-one-store") && refused.contains("settlement"), "{refused}");
}

/// The mechanisms that fence both stores keep the second store's invariants over random
/// worlds with every fault kind on, the second store's delays included; fenced-one-store
/// breaks them.
#[test]
fn fencing_both_stores_keeps_the_ledger_clean_and_fencing_one_does_not() {
    let broken = |mechanism: Mechanism| {
        (1..=150u64)
            .filter(|&seed| {
                let built =
                    scenario::build(STORE_SCENARIO, seed, mechanism, GatewayMode::Idempotent, FaultMask::ALL)
                        .unwrap();
                let outcome = run(&built, seed).unwrap();
                ["posted-once", "balance-matches-sent"].iter().any(|name| outcome.check(name).is_violation())
            })
            .collect::<Vec<u64>>()
    };
    for mechanism in [Mechanism::Fenced, Mechanism::FencedDbSequence] {
        assert_eq!(broken(mechanism), Vec::<u64>::new(), "{mechanism}");
    }
    assert!(!broken(Mechanism::FencedOneStore).is_empty());
    let _ = RefundId(0);
}

fn guarantees() -> (String, &'static str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/guarantees.md");
    let stale =
        "reports/guarantees.md is stale: regenerate it with `cargo run --release -- matrix` and commit it";
    (std::fs::read_to_string(path).unwrap_or_default(), stale)
}

/// Every row of the report's second-store section names a seed that gives its trace hash
/// today, and that seed breaks the second store exactly when the row says any seed did.
#[test]
fn the_second_store_section_of_the_guarantees_report_is_fresh() {
    use fencesim::search::second_store::{mask_of, STORE_INVARIANTS, STORE_MECHANISMS};
    use fencesim::tell::reports::second_store::{parse_second_store, StoreLine};
    let (text, stale) = guarantees();
    let lines = parse_second_store(&text);
    assert_eq!(
        lines.len(),
        (fencesim::sim::FaultName::all().count() + 1) * STORE_MECHANISMS.len(),
        "{stale}"
    );
    for StoreLine { kind, mechanism, broken, seed, trace_hash } in lines {
        let built = scenario::build(
            STORE_SCENARIO,
            seed,
            mechanism,
            GatewayMode::Idempotent,
            mask_of(&kind).unwrap(),
        );
        let outcome = run(&built.unwrap(), seed).unwrap();
        let said = format!("{stale} ({kind} {mechanism} seed {seed})");
        assert_eq!(format!("{:016x}", outcome.trace_hash), trace_hash, "{said}");
        let breaks = STORE_INVARIANTS.iter().any(|name| outcome.check(name).is_violation());
        assert_eq!(breaks, broken > 0, "{said}: the seed named breaks the second store iff any did");
    }
}

/// The article's claim, as the committed report measured it: with the ledger unfenced the
/// second store breaks, with no fault and under every kind; with both fenced it never does.
#[test]
fn the_report_finds_the_unfenced_second_store_broken_under_every_kind_and_the_fenced_one_never() {
    use fencesim::tell::reports::second_store::parse_second_store;
    let (text, stale) = guarantees();
    let lines = parse_second_store(&text);
    assert!(!lines.is_empty(), "{stale}");
    for line in lines {
        match line.mechanism {
            Mechanism::FencedOneStore => assert!(line.broken > 0, "{}: {stale}", line.kind),
            _ => assert_eq!(line.broken, 0, "{} {}", line.kind, line.mechanism),
        }
    }
}

/// Each first failure of the second store, shrunk, replays to its hash, still breaks its
/// invariant, and is at most 3 faults, 3 workers and 5 rows.
#[test]
fn each_shrunk_second_store_failure_replays_and_still_breaks_its_invariant() {
    use fencesim::tell::reports::second_store::parse_store_shrunk;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (text, stale) = guarantees();
    let listed = parse_store_shrunk(&text);
    assert!(!listed.is_empty(), "{stale}");
    for (kind, mechanism, invariant, file) in listed {
        let file = ReplayFile::load(&root.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}: {stale}"));
        let scenario = file.scenario().unwrap();
        assert_eq!(scenario.world.mechanism, mechanism, "{kind}");
        let world = &scenario.world;
        assert!(world.faults.faults.len() <= 3 && world.workers <= 3 && world.rows.len() <= 5, "{kind}");
        let outcome = run_with(&scenario, file.seed, file.mutant).unwrap();
        assert_eq!(format!("{:016x}", outcome.trace_hash), file.expected_trace_hash, "{kind}: {stale}");
        assert!(outcome.check(&invariant).is_violation(), "{kind}: {invariant}");
    }
}

/// `run --json` tells the second store: postings taken and turned away, the refunds posted
/// twice, the journal and the balance; a world with one store has no such key.
#[test]
fn run_json_tells_the_second_stores_postings() {
    let json = |mechanism: Mechanism| {
        let scenario = worked_example_two_stores().with_mechanism(mechanism, GatewayMode::Idempotent);
        run(&scenario, 1).unwrap().to_json()["settlement"].clone()
    };
    let unfenced = json(Mechanism::FencedOneStore);
    assert_eq!(unfenced["postings"], 1201, "{unfenced}");
    assert_eq!(unfenced["refunds_posted_twice"], 1, "{unfenced}");
    assert_eq!(unfenced["balances"][0]["balance_cents"], 8_437_025, "{unfenced}");
    let fenced = json(Mechanism::Fenced);
    assert_eq!((fenced["postings"].as_u64(), fenced["postings_turned_away"].as_u64()), (Some(1200), Some(1)));
    assert_eq!(fenced["refunds_posted_twice"], 0);
    let one_store = run(&worked_example(), 1).unwrap().to_json();
    assert!(one_store.get("settlement").is_none(), "{one_store}");
}

/// The live arm has one store: a mechanism about the second store is refused with exit 2
/// and a message that says where to run it, before any server is needed.
#[test]
fn the_live_arm_refuses_a_mechanism_about_the_second_store_and_says_where_to_run_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["live", "--mechanism", "fenced-one-store"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("fenced-one-store") && said.contains("one store only") && said.contains("fencesim run"),
        "{said}"
    );
}
