//! The front door and the guide stay whole: README is short and says only what the
//! committed reports say, every relative link from README, CONTRIBUTING and the guide
//! reaches a file (and its `#anchor` a heading there), and `docs/SUMMARY.md` lists every
//! page of the guide and nothing else.

#[path = "support/picture.rs"]
mod picture;

use fencesim::check::INVARIANTS;
use fencesim::model::Mechanism;
use picture::PICTURE;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// README is the front page: past this, a finding or a section belongs in the guide.
const README_MAX_LINES: usize = 200;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The guide's pages, as paths relative to the root, sorted.
fn guide_pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages
}

/// Every Markdown file a reader follows links in.
fn linked_pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string(), "CONTRIBUTING.md".to_string()];
    pages.extend(guide_pages());
    pages
}

/// The text with fenced code blocks blanked (their lines kept, so that line numbers stay
/// right) and inline code spans removed: a link inside code is an example, not a link.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            lines.push(String::new());
            continue;
        }
        if fenced {
            lines.push(String::new());
            continue;
        }
        let mut kept = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                kept.push_str(part);
            }
        }
        lines.push(kept);
    }
    lines
}

/// The targets of the `[text](target)` and `![alt](target)` links of a text, with the
/// line each is on (from 1).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text).iter().enumerate() {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((number + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// A heading's anchor as repository hosts and book builders make it: lower case, letters,
/// digits, `-` and `_` kept, spaces turned into `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings; a repeated heading gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(if *count == 0 { base.clone() } else { format!("{base}-{count}") });
        *count += 1;
    }
    out
}

/// What is wrong with the relative links of `text`, a file at `from` (relative to the
/// root): a target that is not there, or an anchor that no heading of its target has.
fn broken_links(from: &str, text: &str) -> Vec<String> {
    let dir = Path::new(from).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (line, target) in links(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let path: PathBuf = if file.is_empty() { PathBuf::from(from) } else { dir.join(file) };
        let full = root().join(&path);
        if !full.exists() {
            broken.push(format!("{from}:{line}: {target}: no file {}", path.display()));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if full.extension().is_none_or(|e| e != "md") {
            broken.push(format!("{from}:{line}: {target}: an anchor into a file that is not Markdown"));
            continue;
        }
        let headings = anchors(&std::fs::read_to_string(&full).unwrap_or_default());
        if !headings.contains(anchor) {
            broken.push(format!("{from}:{line}: {target}: {} has no heading #{anchor}", path.display()));
        }
    }
    broken
}

#[test]
fn readme_is_a_front_page_of_at_most_200_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move a section into a page of docs/ \
         (a finding into docs/findings.md) and link it"
    );
}

#[test]
fn every_relative_link_reaches_its_file_and_heading() {
    let mut broken = Vec::new();
    let mut count = 0;
    for page in linked_pages() {
        let text = read(&page);
        count += links(&text).len();
        broken.extend(broken_links(&page, &text));
    }
    assert!(count > 50, "only {count} links found: the link finder is broken");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_finds_a_missing_file_a_missing_heading_and_skips_code() {
    let text = "See [the concepts](concepts.md#the-words), [gone](nowhere.md), \
                [no heading](concepts.md#no-such-heading), [self](#broken-here) and \
                `[in code](nowhere-in-code.md)`.\n```\n[fenced](nowhere-fenced.md)\n```\n";
    let broken = broken_links("docs/concepts.md", text);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("nowhere.md") && broken[1].contains("no-such-heading"), "{broken:#?}");
    assert!(broken[2].contains("#broken-here"), "{broken:#?}");
    assert_eq!(
        slug("`token-per-job` is slow: the world, not the oracle"),
        "token-per-job-is-slow-the-world-not-the-oracle"
    );
    assert_eq!(slug("A trace's hash"), "a-traces-hash");
}

/// The page each list item of `docs/SUMMARY.md` links to, relative to the root.
fn summary_entries() -> Vec<String> {
    let summary = read("docs/SUMMARY.md");
    summary
        .lines()
        .filter(|line| line.trim_start().starts_with("- ["))
        .map(|line| {
            let (_, target) = line.split_once("](").unwrap_or_else(|| panic!("SUMMARY.md: {line}"));
            format!("docs/{}", target.trim_end().trim_end_matches(')'))
        })
        .collect()
}

/// Pages of the guide that SUMMARY does not list, and SUMMARY entries with no page.
fn summary_gaps(pages: &[String], entries: &[String]) -> (Vec<String>, Vec<String>) {
    let listed: BTreeSet<&String> = entries.iter().collect();
    let present: BTreeSet<&String> = pages.iter().collect();
    let unlisted = pages
        .iter()
        .filter(|page| !page.ends_with("/SUMMARY.md") && !listed.contains(page))
        .cloned()
        .collect();
    let missing = entries.iter().filter(|entry| !present.contains(entry)).cloned().collect();
    (unlisted, missing)
}

#[test]
fn the_summary_lists_every_page_of_the_guide_and_only_pages_that_exist() {
    let entries = summary_entries();
    let (unlisted, missing) = summary_gaps(&guide_pages(), &entries);
    assert!(unlisted.is_empty(), "pages docs/SUMMARY.md does not list: {unlisted:?}");
    assert!(missing.is_empty(), "docs/SUMMARY.md lists pages that do not exist: {missing:?}");
    let twice = entries.len() - entries.iter().collect::<BTreeSet<_>>().len();
    assert_eq!(twice, 0, "docs/SUMMARY.md lists a page twice: {entries:?}");
    // and the comparison itself tells both gaps apart
    let pages = ["docs/a.md".to_string(), "docs/b.md".to_string()];
    let gaps = summary_gaps(&pages, &["docs/a.md".to_string(), "docs/c.md".to_string()]);
    assert_eq!(gaps, (vec!["docs/b.md".to_string()], vec!["docs/c.md".to_string()]));
}

/// The rows of the first Markdown table whose header starts with `header`: each row's
/// cells, trimmed, the header's first.
fn table(text: &str, header: &str) -> Vec<Vec<String>> {
    let cells = |line: &str| line.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect();
    let mut lines = text.lines().skip_while(|line| !line.starts_with(header));
    let Some(first) = lines.next() else { return Vec::new() };
    let mut rows = vec![cells(first)];
    rows.extend(lines.skip(1).take_while(|line| line.starts_with('|')).map(cells));
    rows
}

/// Where README's table of guarantees parts from `reports/guarantees.md`: each README
/// column is "invariant, gateway", each cell the report's share for that mechanism,
/// gateway and invariant (without its first seed).
fn table_mismatches(readme: &str, report: &str) -> Vec<String> {
    let ours = table(readme, "| mechanism | what it is |");
    let theirs = table(report, "| mechanism | gateway |");
    let mut measured = BTreeMap::new();
    for row in theirs.iter().skip(1) {
        for (column, cell) in theirs[0].iter().zip(row).skip(2) {
            let share = cell.split(" (seed").next().unwrap_or(cell).to_string();
            measured.insert((row[0].clone(), row[1].clone(), column.clone()), share);
        }
    }
    let mut wrong = Vec::new();
    if ours.len() < 2 || measured.is_empty() {
        return vec!["no table of guarantees found in README or in the report".to_string()];
    }
    for row in ours.iter().skip(1) {
        let mechanism = row[0].trim_matches('`').to_string();
        for (column, cell) in ours[0].iter().zip(row).skip(2) {
            let (invariant, gateway) = column.split_once(", ").unwrap_or((column, "?"));
            let key = (mechanism.clone(), gateway.to_string(), invariant.to_string());
            match measured.get(&key) {
                Some(share) if share == cell => {}
                Some(share) => wrong.push(format!("{key:?}: README says {cell}, the report {share}")),
                None => wrong.push(format!("{key:?}: not in the report")),
            }
        }
    }
    wrong
}

#[test]
fn readmes_table_of_guarantees_is_the_committed_report_and_names_every_mechanism() {
    let (readme, report) = (read("README.md"), read("reports/guarantees.md"));
    let wrong = table_mismatches(&readme, &report);
    assert!(
        wrong.is_empty(),
        "README's table of guarantees is not reports/guarantees.md's (copy the report's cells):\n{}",
        wrong.join("\n")
    );
    let named: Vec<String> = table(&readme, "| mechanism | what it is |")
        .iter()
        .skip(1)
        .map(|row| row[0].trim_matches('`').to_string())
        .collect();
    let all: Vec<String> = Mechanism::ALL.iter().map(|m| m.name().to_string()).collect();
    assert_eq!(named, all, "README's table names every mechanism once, in the registry's order");
    // a cell changed by hand is caught
    let edited = readme.replacen("| 66.0% |", "| 65.0% |", 1);
    assert_ne!(edited, readme, "README's table has lost the cell this test edits");
    assert_eq!(table_mismatches(&edited, &report).len(), 1);
}

/// The share of playable files that break the same invariants live on both databases, as
/// `reports/fidelity.md`'s summary says it: "Of the 44, ... 37 on both (84%)".
fn fidelity_claim(report: &str) -> Option<String> {
    let after = report.split_once("Of the ")?.1;
    let (playable, after) = after.split_once(", ")?;
    let before_both = after.split_once(" on both (")?;
    let both = before_both.0.rsplit(' ').next()?;
    let percent = before_both.1.split_once("%)")?.0;
    Some(format!("{both} of the {playable} playable files ({percent}%)"))
}

#[test]
fn readmes_fidelity_figure_is_the_committed_reports() {
    let report = read("reports/fidelity.md");
    let claim = fidelity_claim(&report).expect("reports/fidelity.md's summary line has changed its wording");
    let readme = read("README.md").replace('\n', " ");
    assert!(
        readme.contains(&claim),
        "README's Fidelity section must say \"{claim}\", as reports/fidelity.md does today"
    );
    assert_eq!(
        fidelity_claim("Of the 9, 8 on SQLite, 7 on both (77%); ...").as_deref(),
        Some("7 of the 9 playable files (77%)")
    );
}

#[test]
fn readme_gives_the_two_commands_and_ci_runs_the_test_one_verbatim() {
    let readme = read("README.md");
    for command in ["cargo run --release -- demo", ".ci/components && .ci/test"] {
        assert!(
            readme.contains(&format!("```sh\n{command}\n```")),
            "README.md no longer gives `{command}` on its own"
        );
    }
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|line| line == ".ci/components && .ci/test"),
        ".ci/run must run README's test command verbatim"
    );
    let clippy = ci.lines().find(|line| line.starts_with("cargo clippy")).expect(".ci/run runs clippy");
    assert!(
        read("CONTRIBUTING.md").contains(clippy),
        "CONTRIBUTING.md must give .ci/run's clippy line: {clippy}"
    );
}

/// The width and height of a PNG, from its header, or why it is not one.
fn png_size(bytes: &[u8]) -> Result<(u32, u32), String> {
    const MAGIC: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
    if bytes.len() < 24 || bytes[..8] != MAGIC || &bytes[12..16] != b"IHDR" {
        return Err("not a PNG".to_string());
    }
    let number = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    Ok((number(16), number(20)))
}

#[test]
fn readme_shows_the_committed_picture_of_the_worked_example() {
    assert!(read("README.md").contains(&format!("]({PICTURE})")), "README.md must show {PICTURE}");
    let bytes = std::fs::read(root().join(PICTURE)).unwrap_or_else(|e| panic!("{PICTURE}: {e}"));
    assert_eq!(png_size(&bytes), Ok((1400, 900)), "{PICTURE}");
    let kib = bytes.len() / 1024;
    assert!((20..=2048).contains(&kib), "{PICTURE} is {kib} KiB: a blank or a runaway picture");
    assert!(png_size(b"GIF89a and then some more bytes").is_err());
}

#[test]
fn the_picture_is_of_the_page_as_committed_today() {
    let page = std::fs::read(root().join(picture::PAGE)).unwrap_or_else(|e| panic!("{}: {e}", picture::PAGE));
    let taken_of = std::fs::read_to_string(root().join(picture::SOURCE)).unwrap_or_default();
    assert_eq!(
        taken_of,
        picture::fingerprint(&page),
        "{} was taken of another page than today's {}: take it again with `{}` and commit both files",
        PICTURE,
        picture::PAGE,
        picture::RETAKE
    );
    assert_ne!(picture::fingerprint(b"<html>an older page</html>"), picture::fingerprint(&page));
}

/// The names in the first column of a page's table whose header starts with `header`.
fn first_column(page: &str, header: &str) -> BTreeSet<String> {
    table(&read(page), header).iter().skip(1).map(|row| row[0].trim_matches('`').to_string()).collect()
}

#[test]
fn the_guide_names_every_invariant_and_every_mechanism() {
    let invariants: BTreeSet<String> = INVARIANTS.iter().map(|i| i.name.to_string()).collect();
    assert_eq!(
        first_column("docs/invariants.md", "| name | kind |"),
        invariants,
        "docs/invariants.md's table"
    );
    let mechanisms: BTreeSet<String> = Mechanism::ALL.iter().map(|m| m.name().to_string()).collect();
    assert_eq!(
        first_column("docs/mechanisms.md", "| mechanism | what it is |"),
        mechanisms,
        "docs/mechanisms.md's table"
    );
}

/// The guide's table of invariants says when each holds in the words of the catalogue
/// (`scenarios/check/table.rs`), which the pages' glossaries quote.
#[test]
fn the_guides_table_of_invariants_is_the_catalogues() {
    let page = read("docs/invariants.md");
    let rows = table(&page, "| name | kind | holds when |").split_off(1);
    assert_eq!(rows.len(), fencesim::check::table::INVARIANTS.len(), "one row per invariant");
    for invariant in fencesim::check::table::INVARIANTS {
        let row = rows.iter().find(|row| row[0] == invariant.name);
        let row = row.unwrap_or_else(|| panic!("docs/invariants.md has no row for {}", invariant.name));
        assert_eq!(
            row[2], invariant.holds,
            "docs/invariants.md says when {} holds otherwise",
            invariant.name
        );
    }
}

/// The rates page's table says each fault kind's chance once, as `scenario::production`'s
/// `RATES` has it: a chance changed in one place and not the other fails here.
#[test]
fn the_rates_page_gives_each_kind_the_chance_the_production_profile_draws_it_with() {
    use fencesim::scenario::production::RATES;
    let page = read("docs/rates.md");
    let table = page.lines().skip_while(|line| !line.starts_with("| kind | one run in |"));
    let mut said: BTreeMap<String, u32> = BTreeMap::new();
    for row in table.take_while(|line| line.starts_with('|')).filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let digits: String = cells[2].chars().filter(char::is_ascii_digit).collect();
        let Ok(one_in) = digits.parse::<u32>() else { continue };
        for name in cells[1].split(',').map(|name| name.trim().trim_matches('`')) {
            assert!(said.insert(name.to_owned(), one_in).is_none(), "docs/rates.md: `{name}` twice");
        }
    }
    for rate in RATES {
        assert_eq!(said.get(rate.kind.name()), Some(&rate.one_in), "docs/rates.md: `{}`", rate.kind.name());
    }
    assert_eq!(said.len(), RATES.len(), "docs/rates.md names a kind the profile does not have: {said:?}");
}
