//! The rooms import one way (docs/layout.md): no circle of imports holds files of two
//! rooms, and no source file grows past 600 lines.
//!
//! A room of the fencesim package is a top-level folder or file under `scenarios/`; a room
//! of the `sim` and `model` crates is a top-level module under `src/`. The graph has one
//! node per file and an edge wherever a file names a path into its own crate: a `use`
//! item (grouped and multi-line forms too) or a `crate::`, `super::` or `self::` path in
//! code. A path resolves to the file of the longest module it names, so a path to an item
//! lands on the file that holds it. Comments, strings and character literals are skipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// Past this many lines a source file holds more than one job.
const MAX_LINES: usize = 600;

/// The crates whose rooms are checked: the folder of each one's modules.
const CRATES: [&str; 3] = ["scenarios", "sim/src", "model/src"];

/// The folders whose sources are held to the line limit, and the kinds of source.
const SOURCE_DIRS: [&str; 4] = ["scenarios", "sim", "model", "tests"];
const SOURCE_KINDS: [&str; 3] = ["rs", "js", "css"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` whose name ends in one of `kinds`, as (path relative to `dir`
/// with `/` between folders, text), sorted by path. A `target` folder is not sources.
fn files_under(dir: &Path, kinds: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "target") {
                    folders.push(path);
                }
                continue;
            }
            if !path.extension().is_some_and(|ext| kinds.iter().any(|kind| ext == *kind)) {
                continue;
            }
            let relative = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            found.push((relative, text));
        }
    }
    found.sort();
    found
}

/// What the graph is built from, with comments and literals already gone.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    /// `::`
    Sep,
    Punct(char),
}

/// The index just past a quoted literal whose opening quote is at `start`, backslash
/// escapes honoured.
fn skip_quoted(chars: &[char], start: usize, quote: char) -> usize {
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        i += if chars[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// The index just past a raw string whose `#`s (or opening quote) begin at `start`, or
/// `None` when what follows the `r` is not a raw string (a raw identifier, say).
fn skip_raw(chars: &[char], start: usize) -> Option<usize> {
    let hashes = chars[start..].iter().take_while(|&&c| c == '#').count();
    if chars.get(start + hashes) != Some(&'"') {
        return None;
    }
    let mut i = start + hashes + 1;
    while i < chars.len() {
        if chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(i)
}

/// The index just past the comment that begins at `start` (`//` or nested `/* */`), or
/// `start` when none begins there.
fn skip_comment(chars: &[char], start: usize) -> usize {
    match chars.get(start + 1) {
        Some('/') => chars[start..].iter().position(|&c| c == '\n').map_or(chars.len(), |n| start + n),
        Some('*') => {
            let (mut i, mut depth) = (start + 2, 1);
            while i < chars.len() && depth > 0 {
                match (chars[i], chars.get(i + 1)) {
                    ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
                    ('*', Some('/')) => (depth, i) = (depth - 1, i + 2),
                    _ => i += 1,
                }
            }
            i
        }
        _ => start,
    }
}

/// A word at `start`: an identifier, keyword or number, or the prefix of a string literal
/// (`r"…"`, `r#"…"#`, `b"…"`, `br"…"`, `b'…'`), which is skipped. Returns the word, if
/// it is one, and the index past it.
fn word_at(chars: &[char], start: usize) -> (Option<String>, usize) {
    let end = start + chars[start..].iter().take_while(|c| c.is_alphanumeric() || **c == '_').count();
    let word: String = chars[start..end].iter().collect();
    match (word.as_str(), chars.get(end)) {
        ("r" | "br", Some('"' | '#')) => match skip_raw(chars, end) {
            Some(past) => (None, past),
            None => (Some(word), end),
        },
        ("b", Some('"')) => (None, skip_quoted(chars, end, '"')),
        ("b", Some('\'')) => (None, skip_quoted(chars, end, '\'')),
        _ => (Some(word), end),
    }
}

/// The source's tokens, without comments, strings, character literals or lifetimes' quotes.
fn tokens(source: &str) -> Vec<Tok> {
    let chars: Vec<char> = source.chars().collect();
    let (mut toks, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && skip_comment(&chars, i) > i {
            i = skip_comment(&chars, i);
        } else if c == '"' {
            i = skip_quoted(&chars, i, '"');
        } else if c == '\'' {
            // a character literal ('x', '\n', '\u{1F600}'), or a lifetime's quote
            let escaped = chars.get(i + 1) == Some(&'\\');
            i = if escaped || chars.get(i + 2) == Some(&'\'') { skip_quoted(&chars, i, '\'') } else { i + 1 };
        } else if c.is_alphanumeric() || c == '_' {
            let (word, past) = word_at(&chars, i);
            toks.extend(word.map(Tok::Word));
            i = past;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            toks.push(Tok::Sep);
            i += 2;
        } else {
            toks.push(Tok::Punct(c));
            i += 1;
        }
    }
    toks
}

/// The paths of one use tree starting at `i`, each after `prefix`, pushed to `out`; aliases
/// dropped, globs end at their module. Returns the index past the tree.
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    let mut named = false;
    loop {
        match toks.get(i) {
            Some(Tok::Word(word)) if word == "as" => i += 2,
            Some(Tok::Word(word)) => {
                path.push(word.clone());
                named = true;
                i += 1;
            }
            Some(Tok::Sep | Tok::Punct('*')) => i += 1,
            Some(Tok::Punct('{')) => {
                i += 1;
                while !matches!(toks.get(i), None | Some(Tok::Punct('}'))) {
                    i = use_tree(toks, i, path.clone(), out);
                    if toks.get(i) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            _ => {
                if named {
                    out.push(path);
                }
                return i;
            }
        }
    }
}

/// Every path into the crate a file names, each with the inline modules (`mod tests { … }`)
/// it is named inside: the items of `use` and the `crate::`, `super::`, `self::` paths of code.
fn references(toks: &[Tok]) -> Vec<(Vec<String>, Vec<String>)> {
    let (mut found, mut inline, mut depth, mut i) = (Vec::new(), Vec::<(String, usize)>::new(), 0, 0);
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(word)) => Some(word.as_str()),
        _ => None,
    };
    while i < toks.len() {
        let here: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
        match (&toks[i], word(i)) {
            (Tok::Punct('{'), _) => depth += 1,
            (Tok::Punct('}'), _) => {
                depth -= 1;
                if inline.last().is_some_and(|(_, opened)| *opened == depth) {
                    inline.pop();
                }
            }
            (_, Some("mod")) if word(i + 1).is_some() && toks.get(i + 2) == Some(&Tok::Punct('{')) => {
                inline.push((word(i + 1).unwrap().to_string(), depth));
                i += 1;
            }
            (_, Some("use")) => {
                let mut paths = Vec::new();
                i = use_tree(toks, i + 1, Vec::new(), &mut paths);
                found.extend(paths.into_iter().map(|path| (here.clone(), path)));
                continue;
            }
            (_, Some("crate" | "super" | "self")) if toks.get(i + 1) == Some(&Tok::Sep) => {
                let mut path = vec![word(i).unwrap().to_string()];
                while toks.get(i + 1) == Some(&Tok::Sep) && word(i + 2).is_some() {
                    path.push(word(i + 2).unwrap().to_string());
                    i += 2;
                }
                found.push((here, path));
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The module a file defines: `a/b.rs` and `a/b/mod.rs` define `a::b`, `lib.rs` and
/// `main.rs` the crate's root.
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative.trim_end_matches(".rs").split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The file a path named in module `here` lands on: the longest module it names. A path
/// from a `use` may begin at a child module of `here`; any other first word is another crate.
fn resolve(modules: &BTreeMap<Vec<String>, usize>, here: &[String], path: &[String]) -> Option<usize> {
    let (mut full, rest) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (here.to_vec(), &path[1..]),
        "super" => {
            let ups = path.iter().take_while(|word| *word == "super").count();
            (here[..here.len().checked_sub(ups)?].to_vec(), &path[ups..])
        }
        first => {
            let child: Vec<String> = here.iter().cloned().chain([first.to_string()]).collect();
            modules.contains_key(&child).then_some(())?;
            (here.to_vec(), path)
        }
    };
    full.extend(rest.iter().filter(|word| *word != "self").cloned());
    while !modules.contains_key(&full) {
        full.pop()?;
    }
    modules.get(&full).copied()
}

/// One crate's files and who imports whom; each file's room beside it.
struct Graph {
    names: Vec<String>,
    rooms: Vec<String>,
    next: Vec<BTreeSet<usize>>,
}

/// The import graph of one crate's files (paths relative to its module folder). `main.rs`
/// beside `lib.rs` is the binary's root, a crate of its own: its `crate::` is itself.
fn graph(files: &[(String, String)]) -> Graph {
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .filter(|(_, (relative, _))| relative != "main.rs")
        .map(|(n, (relative, _))| (module_of(relative), n))
        .collect();
    let mut next = vec![BTreeSet::new(); files.len()];
    for (n, (relative, text)) in files.iter().enumerate() {
        let binary = relative == "main.rs" && modules.contains_key(&Vec::new());
        let own: BTreeMap<Vec<String>, usize> = [(Vec::new(), n)].into();
        let table = if binary { &own } else { &modules };
        for (inline, path) in references(&tokens(text)) {
            let here: Vec<String> = module_of(relative).into_iter().chain(inline).collect();
            if let Some(to) = resolve(table, &here, &path).filter(|to| *to != n) {
                next[n].insert(to);
            }
        }
    }
    Graph {
        names: files.iter().map(|(relative, _)| relative.clone()).collect(),
        rooms: files.iter().map(|(relative, _)| relative.split('/').next().unwrap().to_string()).collect(),
        next,
    }
}

/// Tarjan's strongly connected components: each node's visit order and the lowest order
/// it reaches back to; a node whose two agree closes a component.
struct Tarjan<'a> {
    next: &'a [BTreeSet<usize>],
    order: Vec<Option<usize>>,
    low: Vec<usize>,
    stack: Vec<usize>,
    on_stack: Vec<bool>,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        let order = self.order.iter().flatten().count();
        self.order[v] = Some(order);
        self.low[v] = order;
        self.stack.push(v);
        self.on_stack[v] = true;
        for &w in self.next[v].iter() {
            match self.order[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(seen) if self.on_stack[w] => self.low[v] = self.low[v].min(seen),
                Some(_) => {}
            }
        }
        if self.low[v] == order {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort_unstable();
            self.components.push(component);
        }
    }
}

/// The graph's strongly connected components of two files or more: its circles.
fn components(next: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    let n = next.len();
    let mut tarjan = Tarjan {
        next,
        order: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        components: Vec::new(),
    };
    for v in 0..n {
        if tarjan.order[v].is_none() {
            tarjan.visit(v);
        }
    }
    tarjan.components.retain(|component| component.len() > 1);
    tarjan.components
}

/// The shortest walk from `from` to `to` inside `within`, both ends included.
fn shortest_path(next: &[BTreeSet<usize>], within: &[usize], from: usize, to: usize) -> Option<Vec<usize>> {
    let mut came_from = BTreeMap::from([(from, from)]);
    let mut queue = VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        if v == to {
            let mut path = vec![to];
            while *path.last().unwrap() != from {
                path.push(came_from[path.last().unwrap()]);
            }
            path.reverse();
            return Some(path);
        }
        for &w in next[v].iter().filter(|w| within.contains(w)) {
            if let std::collections::btree_map::Entry::Vacant(slot) = came_from.entry(w) {
                slot.insert(v);
                queue.push_back(w);
            }
        }
    }
    None
}

/// The shortest circle of a component that crosses from one room to another, in order,
/// its first file again at its end.
fn crossing_circle(graph: &Graph, component: &[usize]) -> Option<Vec<usize>> {
    let crossings = component.iter().flat_map(|&u| {
        graph.next[u]
            .iter()
            .filter(move |v| component.contains(*v) && graph.rooms[u] != graph.rooms[**v])
            .map(move |&v| (u, v))
    });
    crossings
        .filter_map(|(u, v)| shortest_path(&graph.next, component, v, u).map(|back| [vec![u], back].concat()))
        .min_by_key(Vec::len)
}

/// One line per circle that holds files of two rooms or more: the circle's files in
/// order, each prefixed by `prefix`, then the rooms and the size of its component.
fn crossing_circles(prefix: &str, files: &[(String, String)]) -> Vec<String> {
    let graph = graph(files);
    let name = |n: usize| format!("{prefix}{}", graph.names[n]);
    components(&graph.next)
        .iter()
        .filter_map(|component| {
            let circle = crossing_circle(&graph, component)?;
            let rooms: BTreeSet<&str> = component.iter().map(|&n| graph.rooms[n].as_str()).collect();
            let files: Vec<String> = circle.iter().map(|&n| name(n)).collect();
            Some(format!(
                "{} (rooms {}; {} files in the component: {})",
                files.join(" -> "),
                rooms.into_iter().collect::<Vec<_>>().join(", "),
                component.len(),
                component.iter().map(|&n| name(n)).collect::<Vec<_>>().join(", ")
            ))
        })
        .collect()
}

/// One line per circle of rooms: rooms that import each other round a loop, each with a
/// file that makes one of its steps. Files in no circle of their own can still make one
/// (a room whose first file imports the second room, whose other file imports the first).
fn room_circles(prefix: &str, files: &[(String, String)]) -> Vec<String> {
    let graph = graph(files);
    let rooms: Vec<String> = graph.rooms.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let room = |n: usize| rooms.iter().position(|r| *r == graph.rooms[n]).unwrap();
    let mut next = vec![BTreeSet::new(); rooms.len()];
    let mut why: BTreeMap<(usize, usize), (usize, usize)> = BTreeMap::new();
    for (u, targets) in graph.next.iter().enumerate() {
        for &v in targets.iter().filter(|&&v| room(u) != room(v)) {
            next[room(u)].insert(room(v));
            why.entry((room(u), room(v))).or_insert((u, v));
        }
    }
    components(&next)
        .iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let steps: Vec<String> = (why.iter())
                .filter(|((a, b), _)| component.contains(a) && component.contains(b))
                .map(|(_, (u, v))| format!("{prefix}{} -> {prefix}{}", graph.names[*u], graph.names[*v]))
                .collect();
            let names: Vec<&str> = component.iter().map(|&r| rooms[r].as_str()).collect();
            format!("rooms {} import each other: {}", names.join(", "), steps.join("; "))
        })
        .collect()
}

/// The files over the line limit, with their lengths.
fn long_files(prefix: &str, files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .map(|(relative, text)| (relative, text.lines().count()))
        .filter(|(_, lines)| *lines > MAX_LINES)
        .map(|(relative, lines)| format!("{prefix}{relative}: {lines} lines"))
        .collect()
}

#[test]
fn no_circle_of_imports_spans_two_rooms() {
    let circles: Vec<String> = CRATES
        .iter()
        .flat_map(|dir| crossing_circles(&format!("{dir}/"), &files_under(&root().join(dir), &["rs"])))
        .collect();
    assert!(
        circles.is_empty(),
        "each circle of imports below holds files of two rooms; give what both sides need a room \
         below both (docs/layout.md):\n{}",
        circles.join("\n")
    );
}

/// Rooms import one way: no room imports one that imports it back, however many rooms
/// the loop goes through.
#[test]
fn no_circle_of_rooms() {
    let circles: Vec<String> = CRATES
        .iter()
        .flat_map(|dir| room_circles(&format!("{dir}/"), &files_under(&root().join(dir), &["rs"])))
        .collect();
    assert!(
        circles.is_empty(),
        "rooms that import each other; give what both need a room below both (docs/layout.md):\n{}",
        circles.join("\n")
    );
}

/// Two rooms whose files import each other without a circle of files are a circle of rooms.
#[test]
fn the_checker_finds_rooms_that_import_each_other() {
    let files = made_up(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod one;\npub mod two;\n"),
        ("a/one.rs", "use crate::b::B;\npub struct One(B);\n"),
        ("a/two.rs", "pub struct Two;\n"),
        ("b.rs", "use crate::a::two::Two;\npub struct B(Two);\n"),
    ]);
    assert_eq!(crossing_circles("", &files), Vec::<String>::new(), "no circle of files");
    let circles = room_circles("", &files);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(
        circles[0].starts_with("rooms a, b.rs import each other: a/one.rs -> b.rs; b.rs -> a/two.rs"),
        "{circles:?}"
    );
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let long: Vec<String> = SOURCE_DIRS
        .iter()
        .flat_map(|dir| long_files(&format!("{dir}/"), &files_under(&root().join(dir), &SOURCE_KINDS)))
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines; split by job:\n{}", long.join("\n"));
}

fn made_up(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files.iter().map(|(path, text)| (path.to_string(), text.to_string())).collect()
}

/// The checker sees a circle through a grouped, multi-line `use`, a re-export and a path
/// in code, across two rooms, and names its files in order.
#[test]
fn the_checker_finds_a_circle_across_two_rooms() {
    let files = made_up(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "mod inner;\npub use inner::Thing;\n"),
        ("a/inner.rs", "use crate::{\n    b::{other, More as Most},\n    a,\n};\npub struct Thing;\n"),
        (
            "b.rs",
            "pub fn other() -> usize {\n    std::mem::size_of::<crate::a::Thing>()\n}\npub struct More;\n",
        ),
    ]);
    let circles = crossing_circles("", &files);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(
        circles[0].starts_with("a/inner.rs -> b.rs -> a/mod.rs -> a/inner.rs (rooms a, b.rs;"),
        "{circles:?}"
    );
}

/// A circle inside one room is that room's business; the checker sees it and says nothing.
#[test]
fn the_checker_lets_a_circle_inside_one_room_be() {
    let files = made_up(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "mod x;\nmod y;\npub use x::X;\n"),
        ("a/x.rs", "use super::y::Y;\npub struct X(Y);\n"),
        ("a/y.rs", "pub struct Y(Box<super::X>);\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
        ("b.rs", "use crate::a::X;\n"),
    ]);
    let graph = graph(&files);
    let found: Vec<Vec<&str>> = components(&graph.next)
        .iter()
        .map(|component| component.iter().map(|&n| graph.names[n].as_str()).collect())
        .collect();
    assert_eq!(found, [["a/mod.rs", "a/x.rs", "a/y.rs"]]);
    assert_eq!(crossing_circles("", &files), Vec::<String>::new());
}

/// Paths in comments, strings, raw strings and character literals are not imports, nor is
/// `super` inside an inline module a step out of the file.
#[test]
fn the_checker_reads_code_only() {
    let b = concat!(
        "// use crate::a::Thing;\n/* crate::a::Thing /* nested */ crate::a::Thing */\n",
        "pub fn f<'a>(s: &'a str) -> (char, &'a str) {\n",
        "    let _ = r#\"crate::a::Thing \"\"#;\n    let _ = b\"crate::a::Thing\";\n",
        "    ('\"', \"crate::a::Thing \\\" crate::a::Thing\")\n}\n",
        "mod tests {\n    use super::f;\n}\n",
    );
    let files =
        made_up(&[("lib.rs", "pub mod a;\npub mod b;\n"), ("a.rs", "use crate::b::f;\n"), ("b.rs", b)]);
    let graph = graph(&files);
    assert_eq!(graph.next, [BTreeSet::new(), BTreeSet::from([2]), BTreeSet::new()]);
}

#[test]
fn the_line_limit_names_a_long_file() {
    let files = made_up(&[("short.rs", "fn main() {}\n"), ("long.js", &"x;\n".repeat(MAX_LINES + 1))]);
    assert_eq!(long_files("tests/", &files), ["tests/long.js: 601 lines"]);
}
