//! The truth of the telling. Whatever the timeline page's detail panel says of an event
//! (who Redis held the lease for once the event had happened, that lease's epoch, whether
//! the actor's own lease was live or had ended and when, the row's state and fence before
//! and after, the money the event moved) is computed by the page's own script, in a real
//! browser, and held here against the history, event by event: the worked example's three
//! runs and every committed failing run (planted bugs, shrunk failures, replica and
//! second-store failures). The truth is folded over the events in their order, apart from
//! the page's code: a lease is live from the event that granted it to the event that ended
//! it, whatever their milliseconds say; a row holds what its last accepted write left; a
//! payment moved money when the gateway's ledger has an entry for it. Each run's money
//! total, which the page states, is held to the gateway's ledger too.

mod support;

use fencesim::files::replay_file::ReplayFile;
use fencesim::runner::{run_with, Outcome};
use fencesim::sim::{CallOutcome, EventKind, RunRecord, WallMs};
use fencesim::tell::reports::worked_example::comparison;
use fencesim::tell::timeline::{run_view, timeline_page, RunView};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use support::chromium::Chromium;

/// The committed failing runs: every replay file under these folders of `reports/`.
const FAILING: [&str; 3] = ["reports/shrunk", "reports/mutants", "reports/second-store"];

fn failing_runs() -> Vec<(String, Outcome)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = FAILING
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap().map(|entry| entry.unwrap().path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let replay = ReplayFile::load(&path).unwrap();
            let outcome = run_with(&replay.scenario().unwrap(), replay.seed, replay.mutant).unwrap();
            (path.strip_prefix(root).unwrap().display().to_string(), outcome)
        })
        .collect()
}

/// The worked example's four runs and every committed failing run.
fn all_runs() -> Vec<(String, Outcome)> {
    let worked = comparison(1).unwrap().into_iter().enumerate();
    let mut runs: Vec<(String, Outcome)> =
        worked.map(|(i, o)| (format!("worked example, run {i}"), o)).collect();
    runs.extend(failing_runs());
    runs
}

/// A value a grant put on instances: which hold it, and the epoch it opened.
struct Grant {
    holders: u8,
    epoch: Option<u32>,
}

/// The history folded in order: what Redis held, which epochs were live, what each row
/// held, how many of the gateway's ledger entries the payments so far made.
struct Truth<'a> {
    record: &'a RunRecord,
    base: WallMs,
    majority: u32,
    on: BTreeMap<(u8, String), String>,
    grants: BTreeMap<(String, String), Grant>,
    /// Live epochs: key, worker, granted at.
    live: BTreeMap<u32, (String, String, u64)>,
    ended: BTreeMap<u32, u64>,
    opened: u32,
    epoch_key: BTreeMap<u32, String>,
    latest: BTreeMap<String, u32>,
    rows: BTreeMap<String, Value>,
    paid: usize,
}

impl<'a> Truth<'a> {
    fn new(record: &'a RunRecord, base: WallMs, instances: usize) -> Truth<'a> {
        Truth {
            record,
            base,
            majority: (instances / 2 + 1) as u32,
            on: BTreeMap::new(),
            grants: BTreeMap::new(),
            live: BTreeMap::new(),
            ended: BTreeMap::new(),
            opened: 0,
            epoch_key: BTreeMap::new(),
            latest: BTreeMap::new(),
            rows: BTreeMap::new(),
            paid: 0,
        }
    }

    fn open(&mut self, number: u32, key: &str, worker: String, at_ms: u64) {
        assert_eq!(number, self.opened + 1, "epochs open in grant order");
        self.opened = number;
        self.epoch_key.insert(number, key.to_owned());
        self.latest.insert(worker.clone(), number);
        self.live.insert(number, (key.to_owned(), worker, at_ms));
    }

    /// `instance` no longer holds `value` at `key`: its epoch ends when it falls below a majority.
    fn lose(&mut self, instance: u8, key: &str, value: &str, at_ms: u64) {
        if self.on.get(&(instance, key.to_owned())).is_some_and(|held| held == value) {
            self.on.remove(&(instance, key.to_owned()));
        }
        let Some(grant) = self.grants.get_mut(&(key.to_owned(), value.to_owned())) else { return };
        grant.holders &= !(1 << instance);
        if let Some(number) = grant.epoch.filter(|_| grant.holders.count_ones() < self.majority) {
            if self.live.remove(&number).is_some() {
                self.ended.insert(number, at_ms);
            }
        }
    }

    fn granted(
        &mut self,
        (instance, key, value): (u8, &str, &str),
        worker: String,
        said: Option<u32>,
        at: u64,
    ) {
        self.on.insert((instance, key.to_owned()), value.to_owned());
        let grant = self
            .grants
            .entry((key.to_owned(), value.to_owned()))
            .or_insert(Grant { holders: 0, epoch: None });
        if grant.holders == 0 {
            *grant = Grant { holders: 0, epoch: None };
        }
        grant.holders |= 1 << instance;
        let opens = grant.epoch.is_none() && grant.holders.count_ones() >= self.majority;
        let number = self.opened + 1;
        if opens {
            grant.epoch = Some(number);
            self.open(number, key, worker, at);
        }
        assert_eq!(said, opens.then_some(number), "the grant's recorded epoch is the one it opened");
    }

    /// A SET without NX: the value it overwrote no longer holds the key; an acquisition
    /// that took the key opens an epoch (the event does not carry its number: the
    /// ledger's is taken), a value granted before holds the key again and opens none.
    fn set(&mut self, index: usize, (instance, key, value): (u8, &str, &str), worker: String, at: u64) {
        let before = self.on.insert((instance, key.to_owned()), value.to_owned());
        if let Some(before) = before.filter(|before| before != value) {
            self.lose(instance, key, &before, at);
        }
        let taken = self.record.epochs.iter().find(|epoch| epoch.granted_at_event == index);
        if let Some(epoch) = taken {
            let grant = Grant { holders: 1 << instance, epoch: Some(epoch.number) };
            self.grants.insert((key.to_owned(), value.to_owned()), grant);
            self.open(epoch.number, key, worker, at);
        } else if let Some(grant) = self.grants.get_mut(&(key.to_owned(), value.to_owned())) {
            grant.holders |= 1 << instance;
        }
    }

    /// A restart or a failover: the history does not say which keys the instance lost, so
    /// the ledger's word is taken for the epochs that ended there (and, without
    /// persistence, every key of the instance is gone).
    fn lost_keys(&mut self, index: usize, instance: u8, at: u64) {
        let ended: Vec<(String, String)> = (self.record.epochs.iter())
            .filter(|epoch| epoch.ended.is_some_and(|end| end.event == index))
            .map(|epoch| (epoch.key.clone(), epoch.value.clone()))
            .collect();
        for (key, value) in ended {
            for held in 0..8 {
                self.lose(held, &key, &value, at);
            }
        }
        let gone_all = index > 0
            && matches!(
                &self.record.events[index - 1].kind,
                EventKind::FaultFired {
                    fault: fencesim::sim::FaultKind::RedisRestart {
                        persistence: fencesim::sim::Persistence::None,
                        ..
                    },
                    ..
                }
            );
        if gone_all {
            let keys: Vec<(u8, String)> =
                self.on.keys().filter(|(held, _)| *held == instance).cloned().collect();
            for (held, key) in keys {
                let value = self.on[&(held, key.clone())].clone();
                self.lose(held, &key, &value, at);
            }
        }
    }

    fn apply(&mut self, index: usize) {
        let event = &self.record.events[index];
        let at = event.at_ms;
        match &event.kind {
            EventKind::LeaseGranted { worker, instance, key, value, epoch, .. } => {
                self.granted((*instance, key, value), worker.to_string(), *epoch, at)
            }
            EventKind::LeaseSet { worker, instance, key, value, .. } => {
                self.set(index, (*instance, key, value), worker.to_string(), at)
            }
            EventKind::LeaseExpired { instance, key, value, .. }
            | EventKind::LeaseReleased { instance, key, value, deleted: true, .. }
            | EventKind::LeaseDeleted { instance, key, holder: Some(value), .. } => {
                self.lose(*instance, key, value, at)
            }
            EventKind::RedisRestarted { instance, .. } | EventKind::RedisFailedOver { instance, .. } => {
                self.lost_keys(index, *instance, at)
            }
            EventKind::Write { worker, write, refund, rows: 1.., after: Some(image), .. } => {
                let since = json!({ "state": image.state.as_sql(), "fence": image.fence, "at": self.base.plus(at).to_string(),
                    "worker": worker.to_string(), "write": serde_json::to_value(write).unwrap() });
                self.rows.insert(refund.to_string(), since);
            }
            _ => {}
        }
    }
}

impl Truth<'_> {
    /// The lease key event `index` concerns: its own (a key the run granted a lease on),
    /// its epoch's, or the key of its worker's latest lease.
    fn key_of(&self, event: &Value) -> Option<String> {
        let lease_key = |key: &str| self.record.epochs.iter().any(|epoch| epoch.key == key);
        if let Some(key) = event["key"].as_str().filter(|key| lease_key(key)) {
            return Some(key.to_owned());
        }
        if let Some(number) = event["epoch"].as_u64() {
            return Some(self.epoch_key[&(number as u32)].clone());
        }
        let number = self.latest.get(event["worker"].as_str()?)?;
        Some(self.epoch_key[number].clone())
    }

    fn holder(&self, key: &str) -> Value {
        let live = self.live.iter().rfind(|(_, (k, _, _))| k == key);
        live.map_or(
            Value::Null,
            |(number, (_, worker, since))| json!({ "worker": worker, "epoch": number, "since": since }),
        )
    }

    fn own(&self, event: &Value) -> Value {
        let Some(number) = event["epoch"].as_u64().map(|n| n as u32).filter(|_| event["worker"].is_string())
        else {
            return Value::Null;
        };
        let live = self.live.contains_key(&number);
        let ended = if live { Value::Null } else { json!(self.ended[&number]) };
        json!({ "worker": event["worker"], "epoch": number, "live": live, "ended": ended })
    }

    fn row(&self, event: &Value, kind: &EventKind) -> Value {
        let Some(refund) = event["refund"].as_str() else { return Value::Null };
        let before = self.rows.get(refund).cloned().unwrap_or(Value::Null);
        let mut row = json!({ "refund": refund, "before": before });
        for field in ["write", "rows"] {
            if let Some(value) = event.get(field) {
                row[field] = value.clone();
            }
        }
        if let EventKind::Write { rows, after, .. } = kind {
            row["after"] = match after.as_ref().filter(|_| *rows >= 1) {
                Some(image) => json!({ "state": image.state.as_sql(), "fence": image.fence }),
                None => Value::Null,
            };
        }
        row
    }

    /// The money a payment moved, from the gateway's own ledger: the next entry is this
    /// call's when it made one.
    fn money(&mut self, event: &Value, kind: &EventKind) -> Value {
        match kind {
            EventKind::Lookup { .. } => {
                json!({ "worker": event["worker"], "refund": event["refund"], "found": event["found"] })
            }
            EventKind::RefundCalled { refund, amount, gateway_ref, outcome, .. } => {
                let entry = self.record.ledger.get(self.paid);
                let made = entry.is_some_and(|e| e.gateway_ref == *gateway_ref && e.refund == *refund);
                self.paid += usize::from(made);
                assert_eq!(
                    made,
                    *outcome == CallOutcome::Created,
                    "a call moved money exactly when it says it created a refund"
                );
                let moved = if made { entry.unwrap().amount.0 } else { 0 };
                json!({ "worker": event["worker"], "refund": event["refund"], "amount": amount.0,
                    "outcome": event["outcome"], "moved": moved, "gateway_ref": gateway_ref })
            }
            _ => Value::Null,
        }
    }

    /// What the history says of event `index`, in the shape the page tells it.
    fn facts(&mut self, index: usize) -> Value {
        let kind = &self.record.events[index].kind;
        let event = serde_json::to_value(kind).unwrap();
        let row = self.row(&event, kind);
        self.apply(index);
        let key = self.key_of(&event);
        let holder = key.as_deref().map_or(Value::Null, |key| self.holder(key));
        let mut facts = json!({ "key": key, "holder": holder, "own": self.own(&event), "row": row,
            "money": self.money(&event, kind) });
        if event.get("token").is_some() {
            facts["token"] = event["token"].clone();
        }
        facts
    }
}

/// Every event's facts as the history has them, for a run's kept events.
fn truth(outcome: &Outcome) -> Vec<Value> {
    let instances = outcome.scenario.world.redis_instances();
    let mut truth = Truth::new(&outcome.record, outcome.scenario.base, instances);
    (0..outcome.record.events.len()).map(|index| truth.facts(index)).collect()
}

/// The money a run moved, from the gateway's ledger: what the page's run heading states.
fn money_truth(record: &RunRecord) -> Value {
    // per refund: how many payments, and what the ones after the first moved
    let mut per_refund: BTreeMap<String, (u32, i64)> = BTreeMap::new();
    for entry in &record.ledger {
        let paid = per_refund.entry(entry.refund.to_string()).or_default();
        paid.1 += if paid.0 > 0 { entry.amount.0 } else { 0 };
        paid.0 += 1;
    }
    let twice = per_refund.values().filter(|(count, _)| *count > 1).count();
    let extra: i64 = per_refund.values().map(|(_, again)| again).sum();
    json!({ "moved": record.ledger.iter().map(|e| e.amount.0).sum::<i64>(), "payments": record.ledger.len(),
        "refunds": per_refund.len(), "paid_twice": twice, "extra": extra })
}

/// What the page's script tells of every kept event of every run, and the money each
/// run's heading states.
const TOLD: &str = "view.runs.map((v) => ({
    facts: v.run.events.map((raw, i) => (raw ? told(v, i) : null)),
    money: v.run.money,
}))";

fn page_of(runs: &[(String, Outcome)]) -> (std::path::PathBuf, Vec<RunView>) {
    let views: Vec<RunView> = runs.iter().map(|(name, outcome)| run_view(outcome, name)).collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("told-truth");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("runs.html");
    std::fs::write(&page, timeline_page("every told fact", &views, "")).unwrap();
    (page, views)
}

/// The facts the page told that the history does not hold, in words.
fn differences(name: &str, outcome: &Outcome, told: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    let truth = truth(outcome);
    let trace = String::from_utf8(outcome.trace_bytes()).unwrap();
    let lines: Vec<&str> = trace.lines().collect();
    for (index, facts) in told["facts"].as_array().unwrap().iter().enumerate() {
        if facts.is_null() {
            continue;
        }
        for field in ["key", "holder", "own", "token", "row", "money"] {
            if facts.get(field) != truth[index].get(field) {
                wrong.push(format!(
                    "{name}, event {index} ({}): the page tells {field} {}, the history {}",
                    lines[index],
                    facts.get(field).unwrap_or(&Value::Null),
                    truth[index].get(field).unwrap_or(&Value::Null)
                ));
            }
        }
    }
    if told["money"] != money_truth(&outcome.record) {
        wrong.push(format!(
            "{name}: the page's money {} is not the ledger's {}",
            told["money"],
            money_truth(&outcome.record)
        ));
    }
    wrong
}

/// Every event of the worked example's three runs and of every committed failing run: what
/// the page tells is what the history holds.
#[test]
fn every_fact_the_page_tells_of_an_event_is_the_historys() {
    let Some(mut browser) = Chromium::start("every_fact_the_page_tells_of_an_event_is_the_historys") else {
        return;
    };
    let mut runs: Vec<(String, Outcome)> = comparison(1)
        .unwrap()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(i, outcome)| (format!("worked example, run {i}"), outcome))
        .collect();
    let failing = failing_runs();
    let broken = failing.iter().filter(|(_, outcome)| !outcome.passed()).count();
    assert!(broken >= 50, "at least 50 failing runs are held to the history ({broken})");
    runs.extend(failing);
    let (page, _) = page_of(&runs);
    browser.load(&page, "document.body.dataset.rendered === 'yes'").unwrap();
    let told = browser.eval(TOLD).unwrap();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for ((name, outcome), told) in runs.iter().zip(told.as_array().unwrap()) {
        checked += told["facts"].as_array().unwrap().iter().filter(|facts| !facts.is_null()).count();
        wrong.extend(differences(name, outcome, told));
    }
    eprintln!("{checked} events of {} runs held to the history", runs.len());
    assert!(checked > 5_000, "the page told of {checked} events");
    assert!(
        wrong.is_empty(),
        "{} told facts are not the history's:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(40)].join("\n")
    );
}

/// Where a chain's summary tells an act of its steps after "at" and a time, the time is
/// the act's own (a summary once put one act's time before another act's words).
fn times_told_twice(name: &str, view: &RunView) -> Vec<String> {
    let mut wrong = Vec::new();
    for chain in &view.chains {
        for step in &chain.steps {
            let when = WallMs(view.base).plus(step.at).to_string();
            for (at, _) in chain.summary.match_indices(step.text.as_str()) {
                let before = &chain.summary[..at];
                let Some(told) = before.strip_suffix(' ').and_then(|b| b.rsplit_once("at ")).map(|(_, t)| t)
                else {
                    continue;
                };
                if told.len() == when.len()
                    && told.chars().all(|c| c.is_ascii_digit() || c == ':' || c == '.')
                    && told != when
                {
                    wrong.push(format!(
                        "{name}, {}: the summary tells \"{}\" at {told}, its step at {when}",
                        chain.invariant, step.text
                    ));
                }
            }
        }
    }
    wrong
}

/// Every chain of the worked example's runs and of every committed failing run tells each
/// of its acts at the time its step gives.
#[test]
fn a_chain_tells_each_act_at_its_own_time() {
    let runs = all_runs();
    let mut wrong = Vec::new();
    let mut told = 0;
    for (name, outcome) in &runs {
        let view = run_view(outcome, name);
        told += view.chains.iter().map(|chain| chain.steps.len()).sum::<usize>();
        wrong.extend(times_told_twice(name, &view));
    }
    assert!(told > 200, "the chains told {told} steps");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // and the check sees a time that is not the act's
    let mut view = run_view(&runs[3].1, "ttl-only");
    let chain = view.chains.iter_mut().find(|chain| !chain.steps.is_empty()).unwrap();
    let step = chain.steps[0].clone();
    chain.summary = format!("at 09:59:59.999 {}", step.text);
    assert_eq!(times_told_twice("planted", &view).len(), 1);
}

/// Every chain step of those runs has a story line of its own on the page (a routine read
/// on a chain had none, and its click selected the line before it).
#[test]
fn every_chain_step_has_a_story_line_of_its_own() {
    let runs = all_runs();
    let mut untold = Vec::new();
    for (name, outcome) in &runs {
        let view = run_view(outcome, name);
        for step in view.chains.iter().flat_map(|chain| &chain.steps) {
            if !view.story.iter().any(|line| line.event == step.event) {
                untold.push(format!("{name}: {} {}", step.at, step.text));
            }
        }
        let order: Vec<usize> = view.story.iter().map(|line| line.event).collect();
        assert!(
            order.windows(2).all(|pair| pair[0] <= pair[1]),
            "{name}: the story is in the history's order"
        );
    }
    assert!(untold.is_empty(), "{}", untold.join("\n"));
}

/// The refund numbers a folded story line covers, and the time it says it lasted until:
/// "claims, pays and confirms r_816 .. r_907 (92 refunds, until 10:00:33.992)".
fn fold_of(text: &str) -> Option<(u32, u32, &str)> {
    let (_, rest) = text.split_once("confirms r_")?;
    let (first, rest) = rest.split_once(" .. r_")?;
    let (last, rest) = rest.split_once(' ')?;
    let until = rest.split_once("until ")?.1.trim_end_matches(')');
    Some((first.parse().ok()?, last.parse().ok()?, until))
}

/// No payment or confirm is hidden by a folded stretch of the story: each is inside the
/// time its fold says it lasted, or told by a line of its own. (The worked example's fold
/// of B's r_816 .. r_907 closed at A's wake-up, and r_907's confirm, 24 ms later, was
/// told nowhere.)
#[test]
fn no_payment_or_confirm_is_hidden_by_a_fold() {
    let runs = all_runs();
    let mut hidden = Vec::new();
    for (name, outcome) in &runs {
        let view = run_view(outcome, name);
        let told: std::collections::BTreeSet<usize> = view.story.iter().map(|line| line.event).collect();
        let folds: Vec<(u32, u32, String)> = (view.story.iter())
            .filter_map(|line| fold_of(&line.text).map(|(a, b, until)| (a, b, until.to_owned())))
            .collect();
        for (index, event) in outcome.record.events.iter().enumerate() {
            let refund = match &event.kind {
                EventKind::RefundCalled { refund, .. } => refund,
                EventKind::Write {
                    refund, rows: 1.., write: fencesim::model::WriteKind::Confirm, ..
                } => refund,
                _ => continue,
            };
            let number: u32 = refund.to_string().trim_start_matches("r_").parse().unwrap();
            let when = WallMs(view.base).plus(event.at_ms).to_string();
            let folded = folds.iter().any(|(a, b, until)| (*a..=*b).contains(&number) && when <= *until);
            if !folded && !told.contains(&index) && folds.iter().any(|(a, b, _)| (*a..=*b).contains(&number))
            {
                hidden.push(format!("{name}: event {index} at {when} on {refund}"));
            }
        }
    }
    assert!(hidden.is_empty(), "{}", hidden.join("\n"));
}
