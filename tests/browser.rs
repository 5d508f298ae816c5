//! The timeline pages in a real browser, used as a person uses them: headless Chromium
//! loads each page from disk, and the test clicks with the browser's own mouse events at
//! the centre of every mark, bar, fold, chain step and story line, presses keys, zooms
//! and scrolls, then reads what the page shows. It fails on anything the page logs or
//! throws and on any request for anything but the file; a screenshot (kept under
//! `target/browser/`) must not be blank. `FENCESIM_PAGE` points the worked example's
//! tests at another page (an older one, say).

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use support::chromium::Chromium;
use support::picture;

const FENCESIM: &str = env!("CARGO_BIN_EXE_fencesim");
const READY: &str = "document.body.dataset.rendered === 'yes'";
const PROBE: &str = include_str!("support/probe.js");
const LAYOUT: &str = include_str!("support/layout.js");
/// The worked example's page is sent by mail and opened from disk: it stays small.
const MOST_BYTES: u64 = 400 * 1024;

/// What the test reads off a drawn page.
const FACTS: &str = "({
    runs: document.querySelectorAll('section.run').length,
    lanes: [...document.querySelectorAll('svg .lane-label')].map((n) => n.textContent),
    marks: document.querySelectorAll('section.run svg .mark').length,
    breaches: view.runs.map((v) => v.run.breaches.filter((b) => !b.diagnostic).length),
    folds: document.querySelectorAll('section.run svg .fold').length,
    broke: [...document.querySelectorAll('ul.broke li')].map((n) => n.textContent),
    story: document.querySelectorAll('.story > *').length,
    renderMs: Number(document.body.dataset.renderMs),
})";

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser");
    std::fs::create_dir_all(&dir).expect("target/browser");
    dir
}

/// The worked example's page, or the page `FENCESIM_PAGE` names.
fn worked_example() -> PathBuf {
    match std::env::var_os("FENCESIM_PAGE") {
        Some(page) => PathBuf::from(page),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/worked-example.html"),
    }
}

fn file_url(page: &Path) -> String {
    format!("file://{}", page.canonicalize().unwrap().display())
}

/// Loads `page` at `width` x 900, fails on any complaint, and returns what the page shows.
fn open(browser: &mut Chromium, page: &Path, width: u32) -> Value {
    browser.viewport(width, 900).unwrap();
    browser.load(page, READY).unwrap();
    browser.eval(PROBE).unwrap();
    let facts = browser.eval(FACTS).unwrap();
    no_complaints(browser, page);
    eprintln!("{} at {width} px: drawn {} ms after it started loading", page.display(), facts["renderMs"]);
    facts
}

fn no_complaints(browser: &Chromium, page: &Path) {
    let complaints = browser.complaints(&file_url(page));
    assert!(complaints.is_empty(), "{}: {complaints:#?}", page.display());
}

/// Saves a screenshot as `name.png` under `target/browser/` and checks it is not blank.
fn screenshot(browser: &mut Chromium, name: &str) {
    let png = browser.screenshot().unwrap();
    let path = artifacts().join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    not_blank(&png, &path);
}

/// Checks that `png` (from `path`) is not blank: many colours, and a good part of it not
/// the background. Returns its width and height.
fn not_blank(png: &[u8], path: &Path) -> (u32, u32) {
    let mut reader = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
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
    (frame.width, frame.height)
}

/// What clicking through a set of targets found: per run, how many were clicked and
/// which went wrong (selected another event, or were under something else).
#[derive(Default)]
struct Clicks {
    total: BTreeMap<u64, usize>,
    failed: BTreeMap<u64, usize>,
    wrong: Vec<String>,
}

impl Clicks {
    fn add(&mut self, other: Clicks) {
        for (run, n) in other.total {
            *self.total.entry(run).or_default() += n;
        }
        for (run, n) in other.failed {
            *self.failed.entry(run).or_default() += n;
        }
        self.wrong.extend(other.wrong);
    }

    /// Fails, with counts per run and the first few, when any click selected another
    /// event or any target's centre was under something else.
    fn assert_all_right(&self, what: &str) {
        let counts: Vec<String> = self
            .total
            .iter()
            .map(|(run, total)| format!("{} of run {run}'s {total}", self.failed.get(run).unwrap_or(&0)))
            .collect();
        let first: Vec<&String> = self.wrong.iter().take(8).collect();
        assert!(
            self.failed.is_empty(),
            "{} of {} {what} selected another event ({}): {first:#?}",
            self.failed.values().sum::<usize>(),
            self.total.values().sum::<usize>(),
            counts.join(", ")
        );
    }
}

/// Clicks at the centre of each target the probe holds (one evaluation per click aims at
/// the next target and checks the last), and returns what it found.
fn click_through(browser: &mut Chromium, count: usize) -> Clicks {
    let mut clicks = Clicks::default();
    let mut last: Option<(u64, bool)> = None;
    for i in 0..=count {
        let step = browser.eval(&format!("probe.step({i})")).unwrap();
        if let Some((run, covered)) = last.take() {
            let wrong = step["check"].as_str();
            if let Some(wrong) = wrong {
                clicks.wrong.push(wrong.to_owned());
            }
            if covered || wrong.is_some() {
                *clicks.failed.entry(run).or_default() += 1;
            }
        }
        let aim = &step["aim"];
        if aim.is_null() {
            break;
        }
        let run = aim["run"].as_u64().unwrap();
        *clicks.total.entry(run).or_default() += 1;
        if let Some(under) = aim["covered"].as_str() {
            clicks.wrong.push(format!("{under} at its centre ({:.0}, {:.0})", aim["x"], aim["y"]));
        }
        last = Some((run, aim["covered"].is_string()));
        browser.click(aim["x"].as_f64().unwrap(), aim["y"].as_f64().unwrap()).unwrap();
    }
    clicks
}

fn collect(browser: &mut Chromium, what: &str) -> usize {
    browser.eval(&format!("probe.collect('{what}')")).unwrap().as_u64().unwrap() as usize
}

/// Clicks every cluster mark, and for each a few of the events it lists.
fn click_clusters(browser: &mut Chromium) -> Clicks {
    let count = collect(browser, "clusters");
    let mut clicks = Clicks::default();
    for i in 0..count {
        browser.eval("probe.collect('clusters')").unwrap();
        let aim = browser.eval(&format!("probe.aim({i})")).unwrap();
        let run = aim["run"].as_u64().unwrap();
        *clicks.total.entry(run).or_default() += 1;
        browser.click(aim["x"].as_f64().unwrap(), aim["y"].as_f64().unwrap()).unwrap();
        let wrong = browser.eval(&format!("probe.check({i})")).unwrap();
        if let Some(wrong) = wrong.as_str().map(str::to_owned).or(aim["covered"].as_str().map(str::to_owned))
        {
            clicks.wrong.push(wrong);
            *clicks.failed.entry(run).or_default() += 1;
            continue;
        }
        let members = browser.eval(&format!("probe.members({run}, 2)")).unwrap().as_u64().unwrap() as usize;
        clicks.add(click_through(browser, members));
    }
    clicks
}

/// Every check that did not hold has a mark that names it; clicks every mark, bar,
/// cluster, chain step and story line of the page.
fn click_everything(browser: &mut Chromium, page: &Path) {
    let started = Instant::now();
    let marks = collect(browser, "marks");
    click_through(browser, marks).assert_all_right("marks and bars");
    let unnamed = browser.eval("probe.unnamed()").unwrap();
    assert_eq!(unnamed, serde_json::json!([]), "{}: checks that no mark names", page.display());
    click_clusters(browser).assert_all_right("cluster marks and the events they list");
    let chain = collect(browser, "chain");
    click_through(browser, chain).assert_all_right("chain steps");
    let story = collect(browser, "story");
    click_through(browser, story).assert_all_right("story lines");
    eprintln!(
        "{}: clicked {marks} marks and bars, {chain} chain steps, {story} story lines and the clusters in {:.1} s",
        page.display(),
        started.elapsed().as_secs_f64()
    );
}

/// The fold `fold` of run `run`: whether it is open, and what the panel shows.
fn fold_state(browser: &mut Chromium, run: u64, fold: u64) -> (bool, Value) {
    let state = browser
        .eval(&format!(
            "({{ open: probe.sections()[{run}].querySelector('svg .fold[data-fold=\"{fold}\"]').classList.contains('open'), shown: probe.shown({run}) }})"
        ))
        .unwrap();
    (state["open"].as_bool().unwrap(), state["shown"].clone())
}

/// Clicks at the centre of `selector` (the first match), scrolled into view.
fn click_on(browser: &mut Chromium, selector: &str) {
    let aim = browser
        .eval(&format!(
            "(() => {{ const n = document.querySelector('{selector}'); n.scrollIntoView({{ block: 'center', inline: 'center' }});
              const r = n.getBoundingClientRect(); const box = n.closest('.scroll').getBoundingClientRect();
              return {{ x: (Math.max(r.left, box.left) + Math.min(r.right, box.right)) / 2, y: (r.top + r.bottom) / 2 }}; }})()"
        ))
        .unwrap();
    browser.click(aim["x"].as_f64().unwrap(), aim["y"].as_f64().unwrap()).unwrap();
}

/// Every fold opens at a click on its centre and on its label, and folds again, selecting
/// nothing; the first one's marks, opened, select their own events.
fn open_folds(browser: &mut Chromium) {
    let folds = browser
        .eval(
            "[...document.querySelectorAll('section.run svg .fold')]
              .map((n) => [probe.sections().indexOf(n.closest('section')), Number(n.dataset.fold)])",
        )
        .unwrap();
    let folds = folds.as_array().unwrap();
    let mut wrong = Vec::new();
    for fold in folds {
        let (run, f) = (fold[0].as_u64().unwrap(), fold[1].as_u64().unwrap());
        let selector = format!("section.run:nth-of-type({}) svg .fold[data-fold=\"{f}\"]", run + 1);
        let (_, before) = fold_state(browser, run, f);
        for part in ["centre", "centre", "label text", "centre"] {
            let (was, _) = fold_state(browser, run, f);
            let label = format!("{selector} text");
            let worded =
                browser.eval(&format!("document.querySelector('{label}').textContent !== ''")).unwrap();
            let target = if part == "centre" || worded != true { selector.clone() } else { label };
            click_on(browser, &target);
            let (open, shown) = fold_state(browser, run, f);
            if open == was || shown != before {
                wrong.push(format!("run {run} fold {f}, a click on its {part}: open {was} -> {open}, shows event {shown} (was {before})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} clicks on folds went wrong: {wrong:#?}",
        wrong.len(),
        4 * folds.len()
    );
    if folds.is_empty() {
        return;
    }
    let drawn =
        "document.querySelectorAll('section.run svg .mark[data-event], section.run svg .cluster').length";
    let before = browser.eval(drawn).unwrap();
    click_on(browser, "section.run svg .fold");
    let opened = browser.eval(drawn).unwrap();
    assert!(
        opened.as_u64() > before.as_u64(),
        "opening a fold draws its marks: {before} marks, then {opened}"
    );
    let opened = collect(browser, "marks");
    click_through(browser, opened).assert_all_right("marks and bars, one fold opened");
    click_clusters(browser).assert_all_right("cluster marks, one fold opened");
}

/// At this width, no label outside its bar, lane, scrolled box or the viewport, no two
/// marks on one spot, and the lane labels on screen; the same once scrolled right.
fn laid_out(browser: &mut Chromium, page: &Path, width: u32) {
    let mut found = Vec::new();
    for scrolled in [false, true] {
        if scrolled {
            browser.type_key("+", 187).unwrap();
            browser.type_key("+", 187).unwrap();
            // the mouse wheel, over each run's timeline, turned to the right
            let boxes = browser
                .eval("[...document.querySelectorAll('.scroll')].map((n) => { n.scrollIntoView({ block: 'center' }); const r = n.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })")
                .unwrap();
            for (i, _) in boxes.as_array().unwrap().iter().enumerate() {
                let at = browser
                    .eval(&format!("(() => {{ const n = document.querySelectorAll('.scroll')[{i}]; n.scrollIntoView({{ block: 'center' }}); const r = n.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()"))
                    .unwrap();
                browser.wheel(at[0].as_f64().unwrap(), at[1].as_f64().unwrap(), 1500.0, 0.0).unwrap();
            }
            browser
                .eval("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
                .unwrap();
            let left =
                browser.eval("[...document.querySelectorAll('.scroll')].map((n) => n.scrollLeft)").unwrap();
            assert!(
                left.as_array().unwrap().iter().all(|l| l.as_f64().unwrap() > 0.0),
                "the wheel scrolled: {left}"
            );
        }
        let layout = browser.eval(LAYOUT).unwrap();
        let state = if scrolled { "zoomed and scrolled right" } else { "as drawn" };
        for (what, list) in [
            ("labels cut or outside", "outside"),
            ("marks on one spot", "spots"),
            ("lane labels off screen", "lanes"),
        ] {
            let list = layout[list].as_array().unwrap();
            if !list.is_empty() {
                let first: Vec<&Value> = list.iter().take(6).collect();
                found.push(format!("{} {what} ({state}): {first:?}", list.len()));
            }
        }
    }
    assert!(found.is_empty(), "{} at {width} px: {found:#?}", page.display());
}

/// The arrow keys step through every run's marks in order, run after run.
fn steps_by_key(browser: &mut Chromium) {
    let order = browser
        .eval(
            "probe.sections().map((s) => [...new Set([...s.querySelectorAll('svg .mark[data-event]')].map((n) => Number(n.dataset.event))
              .concat([...s.querySelectorAll('svg .cluster[data-events]')].flatMap((n) => n.dataset.events.split(',').map(Number))))].sort((a, b) => a - b))",
        )
        .unwrap();
    let order: Vec<Vec<u64>> = serde_json::from_value(order).unwrap();
    let expected: Vec<(usize, u64)> =
        order.iter().enumerate().flat_map(|(run, events)| events.iter().map(move |e| (run, *e))).collect();
    let first_of_second = order[0].len();
    let selection = "(() => { const s = probe.sections().findIndex((n) => n.querySelector('svg .selected')); return s < 0 ? null : [s, probe.shown(s)]; })()";
    let mut seen = Vec::new();
    for _ in 0..(first_of_second + 3).min(expected.len()) {
        browser.press("ArrowRight", 39).unwrap();
        let now: Option<(usize, u64)> = serde_json::from_value(browser.eval(selection).unwrap()).unwrap();
        seen.push(now);
    }
    let wanted: Vec<Option<(usize, u64)>> = expected.iter().take(seen.len()).map(|s| Some(*s)).collect();
    assert_eq!(seen, wanted, "ArrowRight steps through run 0's marks, then run 1's");
    for _ in 0..3 {
        browser.press("ArrowLeft", 37).unwrap();
    }
    let back: Option<(usize, u64)> = serde_json::from_value(browser.eval(selection).unwrap()).unwrap();
    let at = seen.len().saturating_sub(4);
    assert_eq!(back, Some(expected[at]), "ArrowLeft steps back, from run 1 into run 0");
}

/// Whether the first run's selection is where a person looks for it after a zoom: the
/// selected mark wholly inside the scrolled box and at its centre (unless the box is
/// scrolled as far as it goes), and every bar of the selected event at least partly in
/// view; `null` if so, else what is wrong.
const IN_VIEW: &str = "(() => {
    const svg = document.querySelector('section.run svg.timeline'), scroll = svg.closest('.scroll');
    const b = scroll.getBoundingClientRect(), mid = (b.left + b.right) / 2;
    const at = (n) => { const r = n.getBoundingClientRect(); return `${n.dataset.event || n.dataset.events} at ${r.left.toFixed(1)}..${r.right.toFixed(1)}`; };
    const points = [...svg.querySelectorAll('.points > .selected')];
    if (!points.length) return 'no mark of the selected event is drawn';
    for (const n of points) {
        const r = n.getBoundingClientRect();
        if (r.left < b.left || r.right > b.right) return `the mark ${at(n)} is not wholly in the box ${b.left}..${b.right}`;
    }
    for (const n of svg.querySelectorAll('.selected')) {
        const r = n.getBoundingClientRect();
        if (r.right <= b.left || r.left >= b.right) return `the bar ${at(n)} is wholly outside the box ${b.left}..${b.right}`;
    }
    const mark = points.find((n) => n.matches('.mark'));
    if (!mark) return null;
    const r = mark.getBoundingClientRect(), centre = (r.left + r.right) / 2;
    const far = scroll.scrollLeft <= 0 || scroll.scrollLeft >= scroll.scrollWidth - scroll.clientWidth - 1;
    return Math.abs(centre - mid) <= 3 || far ? null : `the mark ${at(mark)} is not at the centre of the box ${b.left}..${b.right}`;
})()";

/// Zoom keeps a selected mark in view, and with nothing selected, the time at the centre.
fn zoom_keeps_its_place(browser: &mut Chromium, page: &Path) {
    let centre = "(() => { const n = document.querySelector('.scroll'); return (n.scrollLeft + n.clientWidth / 2 - PAD) / view.scale; })()";
    browser.eval("document.querySelector('.scroll').scrollLeft = document.querySelector('.scroll').scrollWidth / 3").unwrap();
    let before = browser.eval(centre).unwrap().as_f64().unwrap();
    browser.type_key("+", 187).unwrap();
    let after = browser.eval(centre).unwrap().as_f64().unwrap();
    let ms_per_px = 1.0 / browser.eval("view.scale").unwrap().as_f64().unwrap();
    assert!(
        (after - before).abs() <= 2.0 * ms_per_px,
        "with nothing selected zoom keeps the centre: {before} ms, then {after} ms"
    );
    browser.type_key("0", 48).unwrap();
    // the last mark of the first run, clicked
    browser.eval("probe.collect('marks', (t) => t.run === 0 && ['write', 'money', 'fault', 'check'].includes(t.kind))").unwrap();
    let last = browser.eval("probe.collect('marks', (t) => t.run === 0 && ['write', 'money', 'fault', 'check'].includes(t.kind)) - 1").unwrap();
    let aim = browser.eval(&format!("probe.aim({last})")).unwrap();
    browser.click(aim["x"].as_f64().unwrap(), aim["y"].as_f64().unwrap()).unwrap();
    for zoomed in 1..=3 {
        browser.type_key("+", 187).unwrap();
        let out = browser.eval(IN_VIEW).unwrap();
        assert!(
            out.is_null(),
            "{}: zoomed in {zoomed} times, the selection is out of view: {out}",
            page.display()
        );
    }
    browser.type_key("0", 48).unwrap();
    let out = browser.eval(IN_VIEW).unwrap();
    assert!(out.is_null(), "{}: zoomed to fit, the selection is out of view: {out}", page.display());
}

fn worked_example_opened(test: &str) -> Option<(Chromium, PathBuf)> {
    let browser = Chromium::start(test)?;
    Some((browser, worked_example()))
}

#[test]
fn every_mark_bar_and_line_of_the_worked_example_selects_its_own_event() {
    let Some((mut browser, page)) = worked_example_opened("worked_example_clicks") else { return };
    let facts = open(&mut browser, &page, 1400);
    click_everything(&mut browser, &page);
    open_folds(&mut browser);
    assert!(facts["runs"].as_u64().unwrap() >= 2, "the fence and the TTL alone: {facts}");
    for lane in ["A believes", "A in Redis", "B believes", "B in Redis", "checks", "row r_815"] {
        assert!(facts["lanes"].as_array().unwrap().iter().any(|l| l == lane), "{lane}: {}", facts["lanes"]);
    }
    let broken: u64 = facts["breaches"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum();
    assert!(broken > 100, "the TTL alone breaks hundreds of times: {facts}");
    let broke = facts["broke"].to_string();
    assert!(broke.contains("no-double-refund") && broke.contains("single-holder"), "{broke}");
    screenshot(&mut browser, "worked-example");
    closeness_drawn(&mut browser, &page);
    no_complaints(&browser, &page);
    let bytes = std::fs::metadata(&page).unwrap().len();
    eprintln!("{}: {bytes} bytes", page.display());
    assert!(bytes <= MOST_BYTES, "{} is {bytes} bytes, more than {MOST_BYTES}", page.display());
}

#[test]
fn the_worked_example_steps_by_key_zooms_in_place_and_keeps_its_labels_in_view() {
    let Some((mut browser, page)) = worked_example_opened("worked_example_layout") else { return };
    for width in [1400, 1024] {
        open(&mut browser, &page, width);
        laid_out(&mut browser, &page, width);
    }
    open(&mut browser, &page, 1400);
    steps_by_key(&mut browser);
    open(&mut browser, &page, 1400);
    zoom_keeps_its_place(&mut browser, &page);
    no_complaints(&browser, &page);
}

/// The page of a failing run shows how close it came: the section, scrolled to, is drawn
/// with a width, a point for each moment with its words on hover, and a sentence.
fn closeness_drawn(browser: &mut Chromium, page: &Path) {
    let drawn = browser
        .eval(
            "(() => { const s = document.querySelector('section.closeness'); if (!s) return null; s.scrollIntoView();
               const r = s.querySelector('svg').getBoundingClientRect();
               return { width: r.width, height: r.height, top: r.top,
                        points: s.querySelectorAll('svg circle title').length, said: s.querySelector('p').textContent }; })()",
        )
        .unwrap();
    assert!(drawn.is_object(), "{}: no section on how close the run came", page.display());
    assert!(drawn["width"].as_f64().unwrap() > 300.0 && drawn["height"].as_f64().unwrap() > 200.0, "{drawn}");
    assert!(drawn["top"].as_f64().unwrap() < 900.0, "scrolled into the window: {drawn}");
    assert!(drawn["points"].as_u64().unwrap() >= 2, "{}: {drawn}", page.display());
    assert!(drawn["said"].as_str().unwrap().contains("continuations"), "{drawn}");
}

/// `fencesim replay FILE --html PAGE [--beside MECHANISM]`: the page of a failing file.
fn replay_page(file: &str, beside: Option<&str>, page: &Path) {
    let mut command = Command::new(FENCESIM);
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args(["replay", file, "--html"]).arg(page);
    if let Some(mechanism) = beside {
        command.args(["--beside", mechanism]);
    }
    let written = command.output().unwrap();
    assert_eq!(
        written.status.code(),
        Some(1),
        "{file} still fails: {}",
        String::from_utf8_lossy(&written.stderr)
    );
}

#[test]
fn a_failing_replays_page_selects_each_things_own_event_and_says_why_it_broke() {
    let Some(mut browser) = Chromium::start("replay_pages") else { return };
    let dir = std::env::temp_dir().join(format!("fencesim-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pages = [
        ("reports/mutants/release-by-get-then-del.json", None, "mutant"),
        ("reports/shrunk/redlock-idempotent.json", Some("redlock-fenced"), "redlock"),
    ];
    for (file, beside, name) in pages {
        let page = dir.join(format!("{name}.html"));
        replay_page(file, beside, &page);
        let facts = open(&mut browser, &page, 1400);
        assert_eq!(facts["runs"], if beside.is_some() { 2 } else { 1 }, "{}", page.display());
        assert!(facts["breaches"][0].as_u64().unwrap() > 0, "{}: {facts}", page.display());
        closeness_drawn(&mut browser, &page);
        click_everything(&mut browser, &page);
        open_folds(&mut browser);
        for width in [1400, 1024] {
            open(&mut browser, &page, width);
            laid_out(&mut browser, &page, width);
        }
        screenshot(&mut browser, name);
        no_complaints(&browser, &page);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `FENCESIM_WRITE_SCREENSHOT=1`, writes README's picture from the committed page
/// (what the viewport shows at 1400 x 900 once it is drawn) and the fingerprint of that
/// page beside it (`tests/docs.rs` fails when the page has changed since); otherwise
/// checks that the committed picture is a PNG of 1400 x 900 that is not blank.
#[test]
fn the_readmes_screenshot_is_the_worked_example_at_1400_by_900() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join(picture::PICTURE);
    if std::env::var_os("FENCESIM_WRITE_SCREENSHOT").is_some_and(|v| v == "1") {
        let mut browser =
            Chromium::start("readme_screenshot").expect("FENCESIM_WRITE_SCREENSHOT=1 needs the browser");
        let page = root.join(picture::PAGE);
        browser.viewport(1400, 900).unwrap();
        browser.load(&page, READY).unwrap();
        browser
            .eval("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            .unwrap();
        no_complaints(&browser, &page);
        let png = browser.capture(true).unwrap();
        not_blank(&png, &path);
        std::fs::write(&path, &png).unwrap();
        let source = picture::fingerprint(&std::fs::read(&page).unwrap());
        std::fs::write(root.join(picture::SOURCE), source).unwrap();
        eprintln!("wrote {} ({} bytes) and {}", path.display(), png.len(), picture::SOURCE);
    }
    let png = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} ({} writes it)", path.display(), picture::RETAKE));
    assert_eq!(not_blank(&png, &path), (1400, 900), "{} is the page at 1400 x 900", path.display());
}
