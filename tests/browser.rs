//! The timeline pages in a real browser: headless Chromium loads each page from disk and
//! the test fails on anything it logs or throws and on any request for anything but the
//! file; the lanes, marks and violations must be in the DOM, the arrow keys must step
//! through the marks, a folded stretch must open, and a screenshot (kept under
//! `target/browser/`) must not be blank.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::chromium::Chromium;

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");
const READY: &str = "document.body.dataset.rendered === 'yes'";

/// What the test reads off a drawn page.
const FACTS: &str = "({
    runs: document.querySelectorAll('section.run').length,
    lanes: [...document.querySelectorAll('svg .lane-label')].map((n) => n.textContent),
    marks: document.querySelectorAll('svg .mark').length,
    breaches: document.querySelectorAll('svg .mark.breach').length,
    folds: document.querySelectorAll('svg .fold').length,
    broke: [...document.querySelectorAll('ul.broke li')].map((n) => n.textContent),
    story: document.querySelectorAll('.story div').length,
    renderMs: Number(document.body.dataset.renderMs),
})";

const SELECTED: &str = "(() => {
    const mark = document.querySelector('.mark.selected');
    return mark ? Number(mark.dataset.event) : null;
})()";

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser");
    std::fs::create_dir_all(&dir).expect("target/browser");
    dir
}

/// Loads `page`, fails on any complaint, and returns what the page shows.
fn facts(browser: &mut Chromium, page: &Path) -> Value {
    browser.load(page, READY).unwrap();
    let facts = browser.eval(FACTS).unwrap();
    let prefix = format!("file://{}", page.canonicalize().unwrap().display());
    let complaints = browser.complaints(&prefix);
    assert!(complaints.is_empty(), "{}: {complaints:#?}", page.display());
    eprintln!("{}: drawn {} ms after it started loading", page.display(), facts["renderMs"]);
    facts
}

/// Saves a screenshot as `name.png` under `target/browser/` and checks it is not blank:
/// many colours, and a good part of it not the background.
fn screenshot(browser: &mut Chromium, name: &str) {
    let png = browser.screenshot().unwrap();
    let path = artifacts().join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    let channels = frame.color_type.samples();
    let pixels = &pixels[..frame.buffer_size()];
    let colours: std::collections::BTreeSet<&[u8]> = pixels.chunks(channels).collect();
    let background = pixels.chunks(channels).filter(|pixel| pixel[..3] == [255, 255, 255]).count();
    let drawn = 1.0 - background as f64 / (pixels.len() / channels) as f64;
    assert!(
        colours.len() > 50 && drawn > 0.05,
        "{} looks blank: {} colours, {drawn:.3} drawn",
        path.display(),
        colours.len()
    );
}

fn count(lanes: &Value, name: &str) -> usize {
    lanes.as_array().unwrap().iter().filter(|lane| lane.as_str() == Some(name)).count()
}

#[test]
fn the_worked_example_page_draws_both_runs_and_steps_through_them_by_key() {
    let Some(mut browser) = Chromium::start("worked_example_page") else { return };
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/worked-example.html");
    let facts = facts(&mut browser, &page);
    assert_eq!(facts["runs"], 2, "the fence and the TTL alone");
    for lane in ["A believes", "A in Redis", "B believes", "B in Redis", "gateway", "checks", "row r_815"] {
        assert_eq!(count(&facts["lanes"], lane), 2, "{lane} in both runs: {}", facts["lanes"]);
    }
    assert!(facts["marks"].as_u64().unwrap() > 100, "{facts}");
    assert!(facts["breaches"].as_u64().unwrap() > 100, "the TTL alone breaks hundreds of times: {facts}");
    let broke = facts["broke"].to_string();
    assert!(broke.contains("no-double-refund") && broke.contains("single-holder (a diagnostic"), "{broke}");

    // the arrow keys step through the marks of the run in focus, each showing its event
    browser.press("ArrowRight", 39).unwrap();
    let first = browser.eval(SELECTED).unwrap().as_u64().expect("a mark is selected");
    browser.press("ArrowRight", 39).unwrap();
    let second = browser.eval(SELECTED).unwrap().as_u64().unwrap();
    assert!(second > first, "{first} then {second}");
    browser.press("ArrowLeft", 37).unwrap();
    assert_eq!(browser.eval(SELECTED).unwrap().as_u64(), Some(first));
    let shown = browser.eval("document.querySelector('.event').textContent").unwrap();
    assert!(shown.as_str().unwrap().contains("\"at\": \"10:00:"), "the event as JSON: {shown}");

    // a folded stretch opens into its marks
    let before = facts["marks"].as_u64().unwrap();
    browser.eval("document.querySelector('svg .fold').dispatchEvent(new MouseEvent('click'))").unwrap();
    let after = browser.eval("document.querySelectorAll('svg .mark').length").unwrap().as_u64().unwrap();
    assert!(after > before + 500, "A's 814 routine rows open: {before} marks, then {after}");
    screenshot(&mut browser, "worked-example");
    let complaints = browser.complaints(&format!("file://{}", page.canonicalize().unwrap().display()));
    assert!(complaints.is_empty(), "{complaints:#?}");
}

#[test]
fn a_replay_file_written_by_explore_becomes_a_page_that_marks_its_violation() {
    let Some(mut browser) = Chromium::start("replay_page") else { return };
    let dir = std::env::temp_dir().join(format!("fencesim-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let explore = Command::new(FENCESIM)
        .args(["explore", "--mechanism", "ttl-only", "--seeds", "20", "--no-shrink", "--out", out])
        .output()
        .unwrap();
    assert_eq!(explore.status.code(), Some(1), "{}", String::from_utf8_lossy(&explore.stderr));
    let file = std::fs::read_dir(&dir).unwrap().next().expect("a replay file").unwrap().path();
    let replay: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let page = dir.join("page.html");
    let written = Command::new(FENCESIM)
        .arg("replay")
        .arg(&file)
        .arg("--html")
        .arg(&page)
        .args(["--beside", "fenced"])
        .output()
        .unwrap();
    assert_eq!(
        written.status.code(),
        Some(1),
        "the file still fails: {}",
        String::from_utf8_lossy(&written.stderr)
    );
    let facts = facts(&mut browser, &page);
    assert_eq!(facts["runs"], 2, "the file's run, and the same plan under fenced");
    assert!(count(&facts["lanes"], "A believes") == 2, "{}", facts["lanes"]);
    let broke = facts["broke"].to_string();
    for invariant in replay["violations"].as_array().unwrap() {
        assert!(broke.contains(invariant.as_str().unwrap()), "{invariant} is marked: {broke}");
    }
    assert!(facts["breaches"].as_u64().unwrap() > 0, "{facts}");
    screenshot(&mut browser, "replay");
    let _ = std::fs::remove_dir_all(&dir);
}
