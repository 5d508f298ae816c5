//! Every `fencesim ...` command that README.md and the guide in docs/ quote, in inline code
//! or in a code block (and the `cargo run -- ...` form of one), is one the command line
//! accepts: a renamed flag or subcommand fails here with the file and the line that still
//! says the old one.
//!
//! A quoted synopsis is read as the command it stands for: `[--seeds N]` as `--seeds N`,
//! `worked-example|random` and a choice of options (`--a A|--b B`) as their first choice,
//! `FILE...` as `FILE`, each bracketed group in turn (optional arguments may exclude each
//! other), and placeholders get a value of their kind (`COMMAND` a subcommand, `M` a
//! mechanism, `N` a count, `K/N` a shard, `NAME` a mutant; a path such as `FILE` stays as
//! it is). Inline code in prose, a bare `fencesim
//! NAME`, or a command with `...` left out of it, only has to name real subcommands and
//! flags: the arguments it leaves out may be required ones.

use clap::error::ErrorKind;
use clap::Parser;
use fencesim::cli::Cli;
use std::path::{Path, PathBuf};

/// A placeholder's value: one of its kind that the command line accepts.
const PLACEHOLDERS: [(&str, &str); 15] = [
    ("COMMAND", "demo"),
    ("M", "fenced"),
    ("MECHANISM", "fenced"),
    ("G", "idempotent"),
    ("N", "2"),
    ("K", "2"),
    ("J", "1"),
    ("SEED", "1"),
    ("K/N", "1/2"),
    ("F", "1"),
    ("SHELL", "bash"),
    ("MS", "1000"),
    ("P", "0"),
    ("KIND", "crash"),
    ("NAME", "confirm-without-fence"),
];

/// A command quoted in a Markdown file: its line, its text, and whether it is inline code
/// (a fragment of prose, which may leave required arguments out) or a code block's line.
#[derive(Debug)]
struct Quoted {
    line: usize,
    text: String,
    inline: bool,
}

/// The command a code block's line or an inline code span holds, if it is one.
fn command_in(text: &str) -> Option<String> {
    let text = text.trim().trim_start_matches("$ ");
    if let Some(rest) = text.strip_prefix("fencesim ") {
        return Some(format!("fencesim {rest}"));
    }
    let rest = text.strip_prefix("cargo run ")?;
    let (_, args) = rest.split_once("-- ")?;
    Some(format!("fencesim {args}"))
}

/// A code block's line that goes on with the command above it: after a `\`, or an
/// indented synopsis line of optional arguments.
fn goes_on(previous: &str, line: &str) -> bool {
    previous.trim_end().ends_with('\\') || (line.starts_with(' ') && line.trim_start().starts_with('['))
}

/// The commands of a code block's lines (from line `first`, counted from 1).
fn block_commands(lines: &[&str], first: usize) -> Vec<Quoted> {
    let mut found: Vec<Quoted> = Vec::new();
    let mut open = false;
    for (offset, line) in lines.iter().enumerate() {
        if open && offset > 0 && goes_on(lines[offset - 1], line) {
            let quoted = found.last_mut().expect("an open command");
            quoted.text = format!("{} {}", quoted.text.trim_end_matches('\\').trim_end(), line.trim());
            continue;
        }
        open = false;
        if let Some(text) = command_in(line) {
            found.push(Quoted { line: first + offset, text, inline: false });
            open = true;
        }
    }
    for quoted in &mut found {
        quoted.text = quoted.text.trim_end_matches('\\').trim_end().to_owned();
    }
    found
}

/// The commands of a paragraph's inline code spans, which may run over a line break.
fn inline_commands(lines: &[&str], first: usize) -> Vec<Quoted> {
    let paragraph = lines.join("\n");
    let mut found = Vec::new();
    let mut at = 0;
    for (index, piece) in paragraph.split('`').enumerate() {
        if index % 2 == 1 {
            if let Some(text) = command_in(&piece.replace('\n', " ")) {
                let line = first + paragraph[..at].matches('\n').count();
                found.push(Quoted { line, text, inline: true });
            }
        }
        at += piece.len() + 1;
    }
    found
}

/// Every command quoted in `markdown`, with the line it starts on (from 1).
fn quoted_commands(markdown: &str) -> Vec<Quoted> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut found = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let fence = |line: &str| line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        if lines[start].trim().is_empty() {
            start += 1;
        } else if fence(lines[start]) {
            let end = (start + 1..lines.len()).find(|&i| fence(lines[i])).unwrap_or(lines.len());
            found.extend(block_commands(&lines[start + 1..end], start + 2));
            start = end + 1;
        } else {
            let end = (start..lines.len()).find(|&i| lines[i].trim().is_empty() || fence(lines[i]));
            let end = end.unwrap_or(lines.len());
            found.extend(inline_commands(&lines[start..end], start + 1));
            start = end;
        }
    }
    found
}

/// Words as a shell splits them (quotes kept together), up to a pipe, a redirection, a
/// second command or a comment; a synopsis's description after two spaces is left out.
fn words(command: &str) -> Vec<String> {
    let command = command.split("  ").next().unwrap_or_default();
    let mut words = Vec::new();
    let (mut word, mut quote, mut started) = (String::new(), None, false);
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => (quote, started) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    let end = words.iter().position(|w| {
        ["|", "||", "&&", ";", "#"].contains(&w.as_str()) || w.starts_with('>') || w.starts_with("2>")
    });
    words.truncate(end.unwrap_or(words.len()));
    words
}

/// A synopsis's words as commands: the words outside brackets with each bracketed group
/// in turn (optional arguments may exclude each other), or the words themselves.
fn alternatives(words: Vec<String>) -> Vec<Vec<String>> {
    let (mut base, mut groups, mut depth) = (Vec::new(), Vec::<Vec<String>>::new(), 0i32);
    for word in words {
        let (opens, closes) = (word.matches('[').count() as i32, word.matches(']').count() as i32);
        match (depth, opens) {
            (0, 0) => base.push(word),
            (0, _) => groups.push(vec![word]),
            _ => groups.last_mut().expect("an open group").push(word),
        }
        depth = (depth + opens - closes).max(0);
    }
    if groups.is_empty() {
        return vec![base];
    }
    groups.into_iter().map(|group| base.iter().cloned().chain(group).collect()).collect()
}

/// A synopsis's words as a command's: brackets gone, the first of several choices, no
/// `...`, placeholders given values. `true` with them when something was left out (`...`).
fn as_command(words: Vec<String>) -> (Vec<String>, bool) {
    let mut elided = false;
    let mut argv = Vec::new();
    for word in words {
        let mut word = word.replace(['[', ']', '<', '>'], "");
        if word.contains('|') {
            word = word.split('|').next().unwrap_or_default().to_owned();
        }
        if word.contains("...") || word.contains('…') {
            elided |= word.trim_matches(['.', ',', '…']).is_empty();
            word = word.replace(",...", "").replace("...", "").replace('…', "");
        }
        let value = PLACEHOLDERS.iter().find(|(name, _)| *name == word).map(|(_, value)| value.to_string());
        if !word.is_empty() && word != "OPTIONS" {
            argv.push(value.unwrap_or(word));
        }
    }
    (argv, elided)
}

/// Why the command line refuses these words, or `None` when it accepts them. A fragment
/// (inline code, a bare subcommand, a command with `...` in it) may leave out required
/// arguments and end on a flag whose value the prose goes on to give.
fn refused_words(words: Vec<String>, inline: bool) -> Option<String> {
    let (argv, elided) = as_command(words);
    let error = Cli::try_parse_from(&argv).err()?;
    let fragment = inline || argv.len() <= 2 || elided;
    let ends_on_a_flag = argv.last().is_some_and(|word| word.starts_with("--"));
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => None,
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingRequiredArgument
            if fragment =>
        {
            None
        }
        ErrorKind::InvalidValue if fragment && ends_on_a_flag => None,
        _ => Some(format!(
            "{} (read as: {})",
            error.to_string().lines().next().unwrap_or_default(),
            argv.join(" ")
        )),
    }
}

/// A choice between options, `--a A|--b B` or the command line's own `<--a <A>|--b <B>>`,
/// read as its first: the second option and its value go, the brackets that close the
/// group stay.
fn first_choice(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(bar) = out.find("|--") {
        let rest = &out[bar + 1..];
        let flag_end = rest.find(' ').unwrap_or(rest.len());
        let value_end =
            rest.get(flag_end + 1..).and_then(|r| r.find(' ')).map_or(rest.len(), |i| flag_end + 1 + i);
        let value = rest.get(flag_end + 1..value_end).unwrap_or_default();
        let closers: String = value.chars().rev().take_while(|c| *c == ']' || *c == '>').collect();
        out = format!("{}{closers}{}", &out[..bar], &rest[value_end..]);
    }
    out
}

/// Why the command line refuses a quoted command, or `None` when it accepts it.
fn refusal(text: &str, inline: bool) -> Option<String> {
    alternatives(words(&first_choice(text))).into_iter().find_map(|words| refused_words(words, inline))
}

/// README.md and every page of docs/.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("an entry").path();
            match path.is_dir() {
                true => dirs.push(path),
                false if path.extension().is_some_and(|e| e == "md") => files.push(path),
                false => {}
            }
        }
    }
    files.sort();
    files
}

/// `file:line: command: why` for each quoted command that does not parse.
fn refused_in(name: &str, markdown: &str) -> Vec<String> {
    quoted_commands(markdown)
        .into_iter()
        .filter_map(|quoted| {
            refusal(&quoted.text, quoted.inline)
                .map(|why| format!("{name}:{}: `{}`: {why}", quoted.line, quoted.text))
        })
        .collect()
}

#[test]
fn every_command_the_readme_and_the_guide_quote_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut refused, mut checked) = (Vec::new(), 0);
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        checked += quoted_commands(&text).len();
        refused.extend(refused_in(&path.strip_prefix(root).unwrap_or(&path).display().to_string(), &text));
    }
    assert!(checked > 20, "the scan finds the quoted commands ({checked})");
    eprintln!("{checked} quoted commands checked");
    assert!(refused.is_empty(), "quoted commands the command line refuses:\n{}", refused.join("\n"));
}

#[test]
fn a_quoted_command_with_a_flag_that_does_not_exist_is_named_with_its_file_and_line() {
    let page = "# A page\n\nRun `fencesim demo --seed 3`, then:\n\n```sh\n$ fencesim explore --mechanism fenced \\\n    --seedz 10 > out.json\nfencesim run --mechanism fenced --seed 2 | head\n```\n\nor `cargo run --release -- explore --strategy fenced --no-such-flag`.\n";
    let quoted = quoted_commands(page);
    assert_eq!(quoted.iter().map(|q| q.line).collect::<Vec<_>>(), [3, 6, 8, 11], "{quoted:?}");
    let refused = refused_in("docs/page.md", page);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].starts_with("docs/page.md:6: `fencesim explore --mechanism fenced --seedz 10 > out.json`"),
        "{refused:?}"
    );
    assert!(refused[0].contains("--seedz"), "{refused:?}");
    assert!(
        refused[1].starts_with("docs/page.md:11: ") && refused[1].contains("--no-such-flag"),
        "{refused:?}"
    );
}

#[test]
fn a_synopsis_is_read_as_the_command_it_stands_for() {
    for accepted in [
        "fencesim explore --mechanism M [--scenario random] [--gateway G] [--seeds N] [--from SEED]",
        "fencesim run --mechanism M [--scenario worked-example|random] [--gateway idempotent|non-idempotent]",
        "fencesim merge FILE... [--root DIR] [--jobs J]   the shards of an exploration",
        "fencesim matrix [--seeds N] [--shard K/N]",
        "fencesim bench [--record [ROOT]]",
        "fencesim run ... --html FILE",
        "fencesim replay",
        "fencesim completions SHELL",
        "fencesim explore --help",
        "fencesim COMMAND --help",
    ] {
        assert_eq!(refusal(accepted, false), None, "{accepted}");
    }
    for refused in [
        "fencesim explore --seeds 10",
        "fencesim replay FILE --no-such-flag",
        "fencesim no-such-command",
        "fencesim matrix [--seeds 0]",
    ] {
        assert!(refusal(refused, false).is_some(), "{refused} is refused");
    }
}
