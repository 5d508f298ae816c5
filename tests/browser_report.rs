//! A failing run's page read as a bug report, in a real browser, at the widths people
//! use (1024, 1440 and 1920 px): its title names what broke, under which mechanism and
//! after which fault; each run states the money it moved; the page says what would have
//! stopped the breach and where; its glossary names the run's mechanism and invariants.
//! Clicks are the browser's own mouse events at an element's centre and keys its own key
//! events: a chain step's click brings the event's words into the window, and the arrow
//! keys act on the run the window shows, not on one scrolled away.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::chromium::Chromium;

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");
const READY: &str = "document.body.dataset.rendered === 'yes'";

/// `fencesim replay FILE --html PAGE [--beside M]`, in a directory of the test's own.
fn replay_page(file: &str, beside: Option<&str>, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-report");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join(format!("{name}.html"));
    let mut command = Command::new(FENCESIM);
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args(["replay", file, "--html"]).arg(&page);
    if let Some(mechanism) = beside {
        command.args(["--beside", mechanism]);
    }
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{file} fails: {}", String::from_utf8_lossy(&out.stderr));
    page
}

fn open(browser: &mut Chromium, page: &Path, width: u32) {
    browser.viewport(width, 900).unwrap();
    browser.load(page, READY).unwrap();
}

/// What a reader sees of the report: the title, each run's money line, the fixes.
const SEEN: &str = "({
    title: document.title,
    money: [...document.querySelectorAll('section.run p.money')].map((n) => n.textContent),
    fixes: [...document.querySelectorAll('section.run ul.fixes li')].map((n) => n.textContent),
    replay: [...document.querySelectorAll('section.run .replay')].map((n) => n.textContent),
    terms: [...document.querySelectorAll('#glossary dt')].map((n) => n.id),
})";

/// Clicks at the centre of `selector` (the first match), scrolled to the window's centre.
fn click_on(browser: &mut Chromium, selector: &str) {
    let aim = browser
        .eval(&format!(
            "(() => {{ const n = document.querySelector('{selector}'); n.scrollIntoView({{ block: 'center', inline: 'center' }});
              const r = n.getBoundingClientRect(); const scroll = n.closest('.scroll');
              const b = scroll ? scroll.getBoundingClientRect() : {{ left: r.left, right: r.right }};
              return {{ x: (Math.max(r.left, b.left) + Math.min(r.right, b.right)) / 2, y: (r.top + r.bottom) / 2 }}; }})()"
        ))
        .unwrap();
    browser.click(aim["x"].as_f64().unwrap(), aim["y"].as_f64().unwrap()).unwrap();
}

/// Whether `selector`'s first match is at least partly inside the window.
fn in_window(browser: &mut Chromium, selector: &str) -> bool {
    let seen = browser.eval(&format!(
        "(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect();
           return r.bottom > 0 && r.top < window.innerHeight; }})()"
    ));
    seen.unwrap() == Value::Bool(true)
}

#[test]
fn a_failing_page_reads_like_a_bug_report_at_every_width() {
    let Some(mut browser) = Chromium::start("failing_page_as_a_bug_report") else { return };
    let pages = [
        (
            "reports/shrunk/ttl-only-non-idempotent.json",
            "ttl-only",
            "no-double-refund",
            "with no fault at all",
        ),
        (
            "reports/shrunk/fenced-renewal-idempotent.json",
            "fenced-renewal",
            "monotonic-fences",
            "after redis#1 restarts",
        ),
        (
            "reports/mutants/release-by-get-then-del.json",
            "fenced-db-sequence",
            "lease-integrity",
            "mutant release-by-get-then-del planted",
        ),
    ];
    for (file, mechanism, invariant, cause) in pages {
        let page = replay_page(file, None, mechanism);
        for width in [1024, 1440, 1920] {
            open(&mut browser, &page, width);
            let seen = browser.eval(SEEN).unwrap();
            let title = seen["title"].as_str().unwrap();
            for part in [invariant, mechanism, cause, "seed"] {
                assert!(title.contains(part), "{file} at {width} px: the title names {part}: {title}");
            }
            let money = seen["money"][0].as_str().unwrap_or_default();
            assert!(money.starts_with("Money: ") && money.contains("left the merchant"), "{file}: {money}");
            let fixes = seen["fixes"].to_string();
            assert!(
                fixes.contains(invariant) && fixes.contains("Where:"),
                "{file}: the fix for {invariant}: {fixes}"
            );
            assert!(seen["replay"][0].as_str().unwrap().contains(file), "{file}: {}", seen["replay"]);
            let text = browser.eval("document.body.innerText").unwrap();
            for machine in ["time(s)", "while it held"] {
                assert!(!text.as_str().unwrap().contains(machine), "{file}: the page reads \"{machine}\"");
            }
            for id in [format!("term-mechanism-{mechanism}"), format!("term-invariant-{invariant}")] {
                assert!(
                    seen["terms"].as_array().unwrap().iter().any(|t| t == &id),
                    "{file}: the glossary has {id}"
                );
            }
        }
        // the mechanism's name links to its glossary entry, clicked as a person clicks
        click_on(&mut browser, "section.run a.term[href^=\"#term-mechanism-\"]");
        let hash = browser.eval("location.hash").unwrap();
        assert_eq!(hash, Value::String(format!("#term-mechanism-{mechanism}")), "{file}");
        assert!(
            in_window(&mut browser, &format!("#term-mechanism-{mechanism}")),
            "{file}: the entry is shown"
        );
    }
}

/// The TTL alone's run in the worked example says what the double refunds cost.
#[test]
fn the_worked_examples_runs_each_say_the_money_they_moved() {
    let Some(mut browser) = Chromium::start("worked_example_money") else { return };
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/worked-example.html");
    open(&mut browser, &page, 1440);
    let money = browser.eval(SEEN).unwrap()["money"].clone();
    let money: Vec<&str> = money.as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(money.len(), 3, "{money:?}");
    assert!(
        money[0].contains("84,300.00 EUR") && money[0].contains("no refund was paid twice"),
        "{}",
        money[0]
    );
    assert!(money[1].contains("1 refund paid more than once, 70.25 EUR more than was owed"), "{}", money[1]);
    assert!(
        money[2].contains("294 refunds paid more than once, 20,563.49 EUR more than was owed"),
        "{}",
        money[2]
    );
    // each worker's bars are drawn in its colour, and the legend shows both colours
    let colours = browser.eval("document.querySelectorAll('#legend .worker-colour').length").unwrap();
    assert_eq!(colours, Value::from(4), "A and B, for the beliefs and for the leases");
}

/// A lease kept alive by renewals draws each renewal on its bar, and its label counts them.
#[test]
fn a_renewed_lease_shows_its_renewals() {
    let Some(mut browser) = Chromium::start("renewals_drawn") else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-report");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("renewal.html");
    let args = ["run", "--scenario", "worked-example", "--mechanism", "fenced-renewal", "--html"];
    let out = Command::new(FENCESIM).args(args).arg(&page).output().unwrap();
    assert!(out.status.code().is_some_and(|code| code <= 1), "{}", String::from_utf8_lossy(&out.stderr));
    open(&mut browser, &page, 1440);
    let ticks =
        browser.eval("document.querySelectorAll('section.run svg .lease line.renewal').length").unwrap();
    assert!(ticks.as_u64().unwrap() > 0, "the renewals are drawn: {ticks}");
    let legend = browser.eval("document.querySelector('#legend').innerText").unwrap();
    assert!(legend.as_str().unwrap().contains("a renewal"), "the legend names the tick: {legend}");
    let counted = browser.eval("view.runs[0].run.leases.map((b) => [b.renewals.length, b.label])").unwrap();
    let mut renewed = 0;
    for lease in counted.as_array().unwrap() {
        let (n, label) = (lease[0].as_u64().unwrap(), lease[1].as_str().unwrap());
        renewed += n;
        let said = match n {
            0 => !label.contains("renewed"),
            1 => label.ends_with("renewed once"),
            n => label.ends_with(&format!("renewed {n} times")),
        };
        assert!(said, "{label} counts its {n} renewals");
    }
    assert_eq!(ticks.as_u64().unwrap(), renewed, "one tick a renewal");
}

#[test]
fn a_chain_steps_click_shows_its_event_and_the_keys_act_on_the_run_in_view() {
    let Some(mut browser) = Chromium::start("chain_click_and_keys") else { return };
    let page = replay_page("reports/shrunk/redlock-idempotent.json", Some("redlock-fenced"), "two-runs");
    for width in [1024, 1440, 1920] {
        open(&mut browser, &page, width);
        click_on(&mut browser, "section.run ol.chain li");
        let step = browser.eval("document.querySelector('section.run ol.chain li').dataset.event").unwrap();
        let panel = browser.eval("document.querySelector('section.run .detail').dataset.event").unwrap();
        assert_eq!(panel, step, "at {width} px the panel shows the chain step's event");
        assert!(in_window(&mut browser, "section.run .detail"), "at {width} px the panel is in the window");
    }
    // run 0 selected, then the window scrolled to run 1: the right arrow acts on run 1
    click_on(&mut browser, "section.run ol.chain li");
    browser.eval("document.querySelectorAll('section.run')[1].scrollIntoView({ block: 'start' })").unwrap();
    assert!(!in_window(&mut browser, "section.run .detail"), "run 0 is out of the window");
    browser.press("ArrowRight", 39).unwrap();
    let selected = browser.eval("view.selected.run").unwrap();
    assert_eq!(selected, Value::from(1), "the key acted on the run in the window");
    assert!(
        in_window(&mut browser, "section.run:nth-of-type(2) svg .mark.selected"),
        "its selection is in the window"
    );
}

/// At the zoom a page opens with, every breach's mark lies inside the visible chart, clear
/// of its right edge (a planted bug's failure at a run's end was drawn against it), and on
/// a narrow window the legend is folded so that the timeline starts within the first
/// screen.
#[test]
fn a_failure_is_drawn_inside_the_chart_and_the_timeline_starts_on_the_first_screen() {
    let Some(mut browser) = Chromium::start("failure_inside_the_chart") else { return };
    let page = replay_page("reports/mutants/release-by-get-then-del.json", None, "mutant-edge");
    for width in [1024, 1440, 1920] {
        open(&mut browser, &page, width);
        let found = browser
            .eval(
                "(() => { const box = document.querySelector('section.run .scroll').getBoundingClientRect();
                  const marks = [...document.querySelectorAll('section.run svg .mark.breach')].map((n) => n.getBoundingClientRect());
                  return { marks: marks.length, right: box.right, worst: Math.max(...marks.map((r) => r.right)),
                           left: box.left, least: Math.min(...marks.map((r) => r.left)),
                           timeline: document.querySelector('section.run .timeline-box').getBoundingClientRect().top
                             + window.scrollY,
                           legendOpen: document.querySelector('#legend details').open }; })()",
            )
            .unwrap();
        assert!(found["marks"].as_u64().unwrap() > 0, "at {width} px: {found}");
        let (right, worst) = (found["right"].as_f64().unwrap(), found["worst"].as_f64().unwrap());
        assert!(worst <= right - 20.0, "at {width} px a breach is drawn at the chart's right edge: {found}");
        assert!(
            found["least"].as_f64().unwrap() >= found["left"].as_f64().unwrap(),
            "at {width} px: {found}"
        );
        if width < 1300 {
            assert_eq!(found["legendOpen"], Value::Bool(false), "at {width} px the legend is folded");
        }
        let top = found["timeline"].as_f64().unwrap();
        assert!(
            top < 900.0 || width >= 1300,
            "at {width} px the timeline starts at {top} px, below the first screen"
        );
    }
}

/// Every committed shrunk failure's and planted bug's page, as drawn at 1440 px: no two
/// marks on one spot (three were once stacked on a shrunk page) and no label cut or
/// outside its bar.
#[test]
fn no_committed_failures_page_stacks_marks_or_cuts_labels() {
    let Some(mut browser) = Chromium::start("committed_failures_laid_out") else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = ["reports/shrunk", "reports/mutants"]
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(move |e| format!("{dir}/{}", e.unwrap().file_name().to_string_lossy()))
        })
        .filter(|file| file.ends_with(".json"))
        .collect();
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let page = replay_page(file, None, "laid-out");
        open(&mut browser, &page, 1440);
        let layout = browser.eval(include_str!("support/layout.js")).unwrap();
        for list in ["outside", "spots"] {
            for item in layout[list].as_array().unwrap() {
                found.push(format!("{file}: {list}: {item}"));
            }
        }
    }
    assert!(files.len() >= 50, "{} pages", files.len());
    assert!(found.is_empty(), "{} problems:\n{}", found.len(), found[..found.len().min(30)].join("\n"));
}

/// Whether the detail panel's list of a cluster's events marks the event the panel shows
/// (or is gone): what the panel shows, and what its list marks.
const PICKED: &str = "(() => { const panel = document.getElementById('cluster-detail');
    const picked = panel.querySelector('.cluster-list li.picked');
    const listed = panel.querySelector('.cluster-list') !== null;
    return { shows: panel.dataset.event === undefined ? null : Number(panel.dataset.event), listed,
             picked: picked ? Number(picked.dataset.pick) : null }; })()";

/// A cluster mark opened, one of its events picked, then the keys stepping on: the list
/// in the panel always marks the event the panel shows, never another.
#[test]
fn a_clusters_list_marks_the_event_the_panel_shows() {
    let Some(mut browser) = Chromium::start("cluster_list_marks_its_event") else { return };
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/worked-example.html");
    open(&mut browser, &page, 1440);
    let found = browser
        .eval(
            "(() => { const all = [...document.querySelectorAll('section.run svg .cluster')];
               const shown = all.find((n) => n.getBoundingClientRect().width > 0);
               if (shown) { shown.id = 'first-cluster'; shown.closest('section.run').querySelector('.detail').id = 'cluster-detail'; }
               return [all.length, Boolean(shown)]; })()",
        )
        .unwrap();
    assert_eq!(found[1], Value::Bool(true), "the page draws a cluster mark: {found}");
    click_on(&mut browser, "#first-cluster");
    let opened = browser.eval(PICKED).unwrap();
    assert_eq!(opened["listed"], Value::Bool(true), "a cluster's click lists its events: {opened}");
    click_on(&mut browser, "#cluster-detail .cluster-list li:nth-child(2)");
    let mut seen = vec![browser.eval(PICKED).unwrap()];
    for _ in 0..4 {
        browser.press("ArrowRight", 39).unwrap();
        seen.push(browser.eval(PICKED).unwrap());
    }
    for state in &seen {
        assert!(state["shows"].is_number(), "the panel shows an event: {seen:?}");
        if state["listed"] == Value::Bool(true) {
            assert_eq!(state["picked"], state["shows"], "the list marks the shown event: {seen:?}");
        }
    }
    assert_eq!(seen[0]["listed"], Value::Bool(true), "a picked member keeps its list: {seen:?}");
}

/// A statement the database refused is on the page in the database's words: its line in
/// the story, and the stall progress names in the list of what broke.
#[test]
fn a_refused_statement_is_on_the_page_in_the_database_s_words() {
    let Some(mut browser) = Chromium::start("refused_statement_on_the_page") else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-report");
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("mechanisms/fenced.toml")).unwrap();
    let changed = text
        .replacen("UPDATE refund SET state = 'sent'", "UPDATE refund SET state = 'done'", 1)
        .replace("name = \"fenced\"", "name = \"page-state-done\"");
    let (file, page) = (dir.join("page-state-done.toml"), dir.join("page-state-done.html"));
    std::fs::write(&file, changed).unwrap();
    let out = Command::new(FENCESIM)
        .args(["run", "--mechanism-file"])
        .arg(&file)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    open(&mut browser, &page, 1440);
    let seen = browser
        .eval("({ story: document.querySelector('section.run .story').textContent, broke: document.querySelector('section.run ul.broke').textContent })")
        .unwrap();
    let said =
        "SQLite says: CHECK constraint failed: state = 'pending' OR state = 'sending' OR state = 'sent'";
    let story = seen["story"].as_str().unwrap();
    assert!(story.contains(&format!("refuses A's statements.confirm: {said}")), "{story}");
    let broke = seen["broke"].as_str().unwrap();
    assert!(broke.contains(&format!("the last B's statements.confirm: {said}")), "{broke}");
}
