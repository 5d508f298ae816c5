//! The guided search: the same runs and the same answer on two runs and on one thread and
//! two, a failure it finds kept as an ordinary replay file, and plans that really grow
//! from the ones it kept.

use fencesim::files::replay_file::ReplayFile;
use fencesim::model::Mechanism;
use fencesim::mutant::Mutant;
use fencesim::runner::run;
use fencesim::scenario::production::Rates;
use fencesim::scenario::{self, FaultMask};
use fencesim::search::explore::{explore, ExploreConfig, ExploreReport, SearchKind};
use fencesim::search::guided::{self, features::Features, Bounds, Judged};
use fencesim::search::mutants::{median, search_guided, START_STRIDE};
use fencesim::search::Pool;
use fencesim::sim::GatewayMode;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencesim-guided-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn guided(mechanism: Mechanism, runs: u64, jobs: usize, keep_going: bool, out: &Path) -> ExploreReport {
    let config = ExploreConfig {
        keep_going,
        search: SearchKind::Guided,
        ..ExploreConfig::random(mechanism, 1, runs, jobs, out.to_path_buf())
    };
    explore(&config, &AtomicBool::new(false)).unwrap()
}

/// What a report says, without its rate and with each file as its name and its text.
fn said(report: &ExploreReport) -> String {
    let files: Vec<(String, String)> = report
        .replay_files
        .iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(path).unwrap())
        })
        .collect();
    format!(
        "{} {:?} {:?} {:?} {:?} {:?}",
        report.seeds_run,
        report.violations,
        report.first_seeds,
        report.first_failing_seed,
        report.coverage,
        files
    )
}

#[test]
fn a_guided_exploration_says_the_same_on_two_runs_and_on_one_thread_and_two() {
    let dirs = [out_dir("a"), out_dir("b"), out_dir("c")];
    let one = guided(Mechanism::TtlRenewal, 160, 1, true, &dirs[0]);
    let two = guided(Mechanism::TtlRenewal, 160, 2, true, &dirs[1]);
    let again = guided(Mechanism::TtlRenewal, 160, 2, true, &dirs[2]);
    assert_eq!(one.seeds_run, 160);
    assert!(!one.replay_files.is_empty(), "ttl-renewal breaks under the guided search too");
    assert_eq!(said(&one), said(&two));
    assert_eq!(said(&two), said(&again));
    for dir in dirs {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn a_failure_the_guided_search_finds_is_an_ordinary_replay_file() {
    let out = out_dir("file");
    let report = guided(Mechanism::TtlOnly, 400, 2, false, &out);
    let path = report.replay_file.clone().expect("ttl-only breaks within 400 runs");
    assert!(path.to_string_lossy().contains("-run-"), "{}", path.display());
    let file = ReplayFile::load(&path).unwrap();
    let again = run(&file.scenario().unwrap(), file.seed).unwrap();
    assert_eq!(format!("{:016x}", again.trace_hash), file.expected_trace_hash);
    assert!(file.violations.iter().all(|invariant| again.check(invariant).is_violation()));
    let replayed =
        Command::new(env!("CARGO_BIN_EXE_fencesim")).args(["replay", path.to_str().unwrap()]).output();
    let replayed = replayed.unwrap();
    assert_eq!(replayed.status.code(), Some(1), "{}", String::from_utf8_lossy(&replayed.stderr));
    assert!(String::from_utf8_lossy(&replayed.stdout).contains(": matches the file"));
    std::fs::remove_dir_all(&out).unwrap();
}

/// A guided search's 96 runs from seed 40 under `rates`, each as it was made: checks that
/// the runs come in order, the first generation fresh, fresh seeds in order, and every
/// grown plan in its seed's own world; returns the runs past the first generation and how
/// many of them grew from kept plans.
fn grown_past_the_first_generation(rates: Rates) -> (usize, usize) {
    let never = AtomicBool::new(false);
    let bounds = Bounds { from: 40, runs: 96, allowed: FaultMask::ALL, stop_at_first: false, rates };
    let build = |seed| {
        scenario::build(rates.scenario(), seed, Mechanism::Fenced, GatewayMode::Idempotent, FaultMask::ALL)
    };
    let mut seen = Vec::new();
    let ran = guided::search(
        &bounds,
        &Pool { jobs: 2, interrupted: &never },
        build,
        |candidate| {
            let outcome = run(&candidate.scenario, candidate.seed)?;
            let (features, _) = Features::of(&outcome.record, &outcome.scenario.world);
            Ok(Judged { features, found: !outcome.passed(), result: () })
        },
        |_, _| {},
        |candidate, ()| seen.push(candidate.clone()),
    )
    .unwrap();
    assert_eq!(ran, 96);
    let runs: Vec<u64> = seen.iter().map(|candidate| candidate.run).collect();
    assert_eq!(runs, (0..96).collect::<Vec<u64>>());
    let first = guided::GENERATION as usize;
    assert!(seen[..first].iter().all(|candidate| candidate.fresh), "the first generation is all fresh");
    let fresh: Vec<u64> = seen.iter().filter(|c| c.fresh).map(|c| c.seed).collect();
    assert_eq!(fresh, (40..40 + fresh.len() as u64).collect::<Vec<u64>>());
    let grown: Vec<_> = seen.iter().filter(|candidate| !candidate.fresh).collect();
    for candidate in &grown {
        // a grown plan runs in its seed's own world, with a plan of its own
        let own = build(candidate.seed).unwrap();
        assert_eq!(candidate.scenario.world.rows, own.world.rows);
        assert_eq!(candidate.scenario.world.workers, own.world.workers);
        candidate.scenario.world.validate().unwrap();
    }
    assert!(seen.iter().any(|c| !c.fresh && c.scenario.world.faults != build(c.seed).unwrap().world.faults));
    (seen.len() - first, grown.len())
}

#[test]
fn after_the_first_generation_about_half_the_runs_grow_from_kept_plans_and_fresh_seeds_come_in_order() {
    let (later, grown) = grown_past_the_first_generation(Rates::Swarm);
    // one run in `SWARM_BRANCHING.fresh_one_in` (2) is a fresh seed, and a change that
    // cannot be made is one too
    assert!((later / 4..=later * 3 / 4).contains(&grown), "{grown} of {later} grown");
}

/// Under production's rates, where a fresh run rarely has a fault, seven runs in eight
/// grow from kept plans (`PRODUCTION_BRANCHING.fresh_one_in`).
#[test]
fn under_production_rates_most_runs_grow_from_kept_plans() {
    let (later, grown) = grown_past_the_first_generation(Rates::Production);
    assert!((later * 3 / 4..=later * 15 / 16).contains(&grown), "{grown} of {later} grown");
}

fn fencesim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().unwrap()
}

#[test]
fn mutants_measures_the_guided_search_from_the_same_starts_beside_the_uniform_one() {
    let args = ["mutants", "--only", "retry-mints-new-key", "--starts", "3", "--budget", "60"];
    let json = fencesim(&[&args[..], &["--search", "uniform,guided", "--json"]].concat());
    assert_eq!(json.status.code(), Some(0), "{}", String::from_utf8_lossy(&json.stderr));
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let report = &value["mutants"][0];
    let guided: Vec<u64> = report["guided_runs_to_detect"]
        .as_array()
        .unwrap()
        .iter()
        .map(|runs| runs.as_u64().unwrap())
        .collect();
    let mutant = Mutant::ALL.into_iter().find(|mutant| mutant.name() == "retry-mints-new-key").unwrap();
    for (search, runs) in guided.iter().enumerate() {
        let start = 1 + search as u64 * START_STRIDE;
        assert_eq!(
            search_guided(mutant, start, 60, Rates::Swarm).unwrap().unwrap_or(60),
            *runs,
            "search {search}"
        );
    }
    assert_eq!(report["guided_median"].as_u64(), Some(median(&guided)));
    let text = fencesim(&[&args[..], &["--search", "uniform,guided"]].concat());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("| mutant | uniform, median | guided, median | guided / uniform |"), "{text}");
    assert!(text.contains("geometric mean of the median ratios over 1 mutant(s)"), "{text}");
    // measured without the guided search, the report says nothing of it
    let uniform = fencesim(&[&args[..], &["--json"]].concat());
    let value: serde_json::Value = serde_json::from_slice(&uniform.stdout).unwrap();
    assert!(value["mutants"][0].get("guided_runs_to_detect").is_none());
}

#[test]
fn the_invariants_page_lists_every_near_miss_with_the_invariants_it_is_one_step_from() {
    use fencesim::check::INVARIANTS;
    use fencesim::search::guided::near::NEAR_MISSES;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/invariants.md")).unwrap();
    for near in NEAR_MISSES {
        assert!(near.towards.iter().all(|name| INVARIANTS.iter().any(|invariant| invariant.name == *name)));
        let row = format!("| {} | {} |", near.name, near.towards.join(", "));
        assert!(page.contains(&row), "docs/invariants.md lacks the row {row}");
    }
}

#[test]
fn guided_shards_each_grow_their_own_corpus_and_merge_into_the_sum_of_their_runs() {
    let dir = out_dir("shards");
    std::fs::create_dir_all(&dir).unwrap();
    let shard = |k: &str| {
        let out = dir.join(format!("out-{k}"));
        let output = fencesim(&[
            "explore",
            "--mechanism",
            "ttl-renewal",
            "--seeds",
            "64",
            "--keep-going",
            "--no-shrink",
            "--json",
            "--search",
            "guided",
            "--shard",
            k,
            "--out",
            out.to_str().unwrap(),
        ]);
        let file = dir.join(format!("shard-{}.json", k.replace('/', "-of-")));
        std::fs::write(&file, &output.stdout).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        (file, value)
    };
    let (first, one) = shard("1/2");
    let (second, two) = shard("2/2");
    assert_eq!((one["seeds_run"].as_u64(), two["seeds_run"].as_u64()), (Some(32), Some(32)));
    assert_eq!(one["run"]["search"], "guided");
    let merged = Command::new(env!("CARGO_BIN_EXE_fencesim")).arg("merge").args([&first, &second]).output();
    let merged = merged.unwrap();
    let value: serde_json::Value = serde_json::from_slice(&merged.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&merged.stderr)));
    assert_eq!(value["seeds_run"].as_u64(), Some(64));
    let broken = |report: &serde_json::Value, name: &str| report["violations"][name].as_u64().unwrap_or(0);
    for name in ["progress", "no-stale-confirm", "lease-integrity", "monotonic-fences"] {
        assert_eq!(broken(&value, name), broken(&one, name) + broken(&two, name), "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A branch from a kept plan's moment (`mutate::branch`) replays the plan's run up to the
/// moment event for event, under the swarm's worlds and production's, and then goes its
/// own way: its one fresh fault comes after the moment.
#[test]
fn a_branch_follows_its_parents_run_to_the_moment_and_then_its_own_way() {
    use fencesim::search::guided::corpus::Corpus;
    use fencesim::search::guided::mutate::branch;
    use rand::SeedableRng;
    let (mut compared, mut parted) = (0, 0);
    for rates in [Rates::Swarm, Rates::Production] {
        let build = |seed| {
            scenario::build(
                rates.scenario(),
                seed,
                Mechanism::Fenced,
                GatewayMode::Idempotent,
                FaultMask::ALL,
            )
        };
        let mut corpus = Corpus::default();
        let how = fencesim::search::guided::mutate::Branching::of(rates);
        for seed in 1..=40 {
            let scenario = build(seed).unwrap();
            let outcome = run(&scenario, seed).unwrap();
            let (features, _) = Features::of(&outcome.record, &outcome.scenario.world);
            if !corpus.consider(seed, &scenario, features) {
                continue;
            }
            let parent = corpus.entry(corpus.len() - 1).clone();
            let before = |events: &[fencesim::sim::Event], moment: u64| -> Vec<String> {
                events.iter().filter(|e| e.at_ms <= moment).map(|e| format!("{e:?}")).collect()
            };
            for draw in 0..3 {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed * 10 + draw);
                let Some((next, moment)) = branch(&parent, &mut rng, FaultMask::ALL, how) else { continue };
                assert!(parent.points().contains(&moment), "{rates:?} seed {seed}: a kept moment");
                let kept = parent.plan().faults.iter().zip(&parent.features.fired);
                let kept = kept.filter(|(_, at)| at.is_some_and(|ms| ms <= moment)).count();
                let fresh = &next.world.faults.faults[kept..];
                assert!(!fresh.is_empty() && fresh.len() as u32 <= how.most_fresh, "{rates:?} seed {seed}");
                for fault in fresh {
                    let after =
                        matches!(fault.trigger, fencesim::sim::Trigger::At { at_ms } if at_ms > moment);
                    assert!(after, "{rates:?} seed {seed}: a fresh fault comes after the moment: {fault:?}");
                }
                let branched = run(&next, seed).unwrap();
                assert_eq!(
                    before(&branched.record.events, moment),
                    before(&outcome.record.events, moment),
                    "{rates:?} seed {seed}: the branch parted from its parent before {moment} ms"
                );
                compared += 1;
                parted += usize::from(branched.record.events != outcome.record.events);
            }
        }
    }
    assert!(compared >= 60, "branches compared: {compared}");
    assert!(
        parted * 2 >= compared,
        "most branches go their own way after the moment: {parted} of {compared}"
    );
}

/// The swarm's guided searches that `reports/detection.md` gives are the ones today's
/// search makes: searches of its table that caught past the first generation (so that the
/// corpus and its branches had their part) and within a few generations, run again from
/// the same start, catch at the same run. A change to how the search grows plans under the
/// swarm's rates makes the report stale.
#[test]
fn the_detection_reports_quick_guided_catches_are_what_the_search_gives_today() {
    use fencesim::search::guided::GENERATION;
    use fencesim::tell::reports::detection::parse_guided;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let report = std::fs::read_to_string(root.join("reports/detection.md")).unwrap();
    let quick = (GENERATION + 1)..=(GENERATION * 3);
    let mut checked = 0;
    for (name, _, per_search) in parse_guided(&report) {
        let mutant = Mutant::ALL.into_iter().find(|mutant| mutant.name() == name).expect("a mutant");
        for (search, runs) in (0u64..).zip(per_search).filter(|(_, runs)| quick.contains(runs)).take(1) {
            let today = search_guided(mutant, 1 + search * START_STRIDE, runs, Rates::Swarm).unwrap();
            assert_eq!(today, Some(runs), "{name}, search {}: reports/detection.md is stale", search + 1);
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} of the report's guided searches caught within {quick:?} runs");
}
