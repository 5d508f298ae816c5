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
            "(() => {{ const n = document.querySelector('{selector}'); n.scrollIntoView({{ block: 'center' }});
              const r = n.getBoundingClientRect(); return {{ x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2 }}; }})()"
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
