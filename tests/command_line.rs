//! The command line's definitions as one importable thing: the completions, the manual page
//! and the command reference are made from them, and `--mechanism` names a mechanism on
//! every subcommand.

use clap::{CommandFactory, Parser};
use fencesim::cli::reference::{command_reference, COMMANDS_REFERENCE, REGENERATE};
use fencesim::cli::{Cli, Command};
use std::path::Path;
use std::process::Output;

fn fencesim(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("the binary runs")
}

/// Every subcommand a user may type (the hidden worker process's is not one).
fn subcommands() -> Vec<String> {
    let cli = Cli::command();
    let names: Vec<String> =
        cli.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name().to_owned()).collect();
    assert!(names.len() >= 14, "the subcommands are found: {names:?}");
    names
}

#[test]
fn bash_completions_offer_every_subcommand() {
    let output = fencesim(&["completions", "bash"]);
    assert_eq!(output.status.code(), Some(0));
    let script = String::from_utf8(output.stdout).expect("text");
    // the words offered after `fencesim `: the first `opts="..."` that lists subcommands
    let top =
        script.lines().find(|line| line.trim_start().starts_with("opts=\"-h -V")).expect("the top level");
    let offered: Vec<&str> =
        top.trim().trim_start_matches("opts=\"").trim_end_matches('"').split(' ').collect();
    for name in subcommands() {
        assert!(offered.contains(&name.as_str()), "bash completion does not offer `{name}`: {top}");
    }
    assert!(script.contains("--mechanism"), "flags are completed too");
    assert!(script.contains("complete -F _fencesim"), "the script registers itself for fencesim");
}

#[test]
fn completions_for_an_unknown_shell_exit_2_with_the_shells_it_knows() {
    let output = fencesim(&["completions", "tcsh"]);
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("invalid value 'tcsh'") && err.contains("bash"), "{err}");
}

#[test]
fn the_manual_page_names_every_subcommand() {
    let output = fencesim(&["manpage"]);
    assert_eq!(output.status.code(), Some(0));
    let page = String::from_utf8(output.stdout).expect("text");
    assert!(page.contains(".TH fencesim 1"), "a roff page of section 1");
    for name in subcommands() {
        // roff escapes the hyphen: fencesim\-explore(1)
        let entry = format!("fencesim\\-{}(1)", name.replace('-', "\\-"));
        assert!(page.contains(&entry), "the manual page does not name `{name}` ({entry})");
    }
}

#[test]
fn the_manual_pages_go_into_a_directory_one_per_subcommand() {
    let dir = std::env::temp_dir().join(format!("fencesim-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = fencesim(&["manpage", "--out", dir.to_str().expect("a path")]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(dir.join("fencesim.1").exists());
    for name in subcommands() {
        let page = std::fs::read_to_string(dir.join(format!("fencesim-{name}.1")))
            .unwrap_or_else(|e| panic!("fencesim-{name}.1: {e}"));
        assert!(page.contains(".SH SYNOPSIS"), "fencesim-{name}.1 is a page");
    }
    let explore = std::fs::read_to_string(dir.join("fencesim-explore.1")).expect("explore's page");
    assert!(explore.contains("\\-\\-mechanism"), "a subcommand's page has its flags");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

#[test]
fn the_command_reference_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(COMMANDS_REFERENCE);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == command_reference(),
        "{COMMANDS_REFERENCE} is stale: regenerate it with `{REGENERATE}` and commit it"
    );
}

#[test]
fn the_command_reference_has_every_subcommand_its_about_and_its_flags_with_their_help() {
    let text = command_reference();
    for name in subcommands() {
        assert!(text.contains(&format!("\n## fencesim {name}\n")), "no section for {name}");
    }
    assert!(text.contains("Run many seeds in parallel and keep every failure as a replay file"));
    assert!(text.contains("| `--seeds <SEEDS>` | How many seeds to run | `1000` |"), "{text}");
    assert!(text.contains("| `--jobs <JOBS>` | Threads to run seeds on"), "machine-free default");
    assert!(!text.contains("live-worker"), "the hidden worker process is not a user's command");
    let empty: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("| `") && line.split(" | ").nth(1).is_none_or(str::is_empty))
        .collect();
    assert!(empty.is_empty(), "arguments without help: {empty:?}");
}

#[test]
fn the_written_reference_is_what_report_commands_writes() {
    let root = std::env::temp_dir().join(format!("fencesim-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let output = fencesim(&["report", "--commands", "--root", root.to_str().expect("a path")]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(std::fs::read_to_string(root.join(COMMANDS_REFERENCE)).expect("written"), command_reference());
    assert!(!root.join("reports").exists(), "--commands writes the reference and nothing else");
    std::fs::remove_dir_all(&root).expect("cleaned up");
}

/// Whether the definitions accept a command line.
fn parses(args: &[&str]) -> bool {
    Cli::try_parse_from(args).is_ok()
}

#[test]
fn live_takes_mechanism_and_still_takes_strategy_as_an_alias() {
    assert!(parses(&["fencesim", "live", "--mechanism", "ttl-only"]));
    assert!(parses(&["fencesim", "live", "--strategy", "ttl-only"]));
    assert!(!parses(&["fencesim", "live", "--mechanism", "no-such-mechanism"]));
    let Ok(Cli { command: Command::Live(_) }) =
        Cli::try_parse_from(["fencesim", "live", "--mechanism", "fenced"])
    else {
        panic!("`live --mechanism fenced` is the live subcommand")
    };
}

#[test]
fn every_flag_that_names_a_mechanism_is_spelled_mechanism_and_strategy_is_only_an_alias() {
    let cli = Cli::command();
    let mut named = Vec::new();
    for command in cli.get_subcommands() {
        for arg in command.get_arguments() {
            let long = arg.get_long().unwrap_or_default();
            assert_ne!(long, "strategy", "`{} --strategy` must be `--mechanism`", command.get_name());
            let aliases = arg.get_all_aliases().unwrap_or_default();
            if aliases.contains(&"strategy") {
                assert_eq!(
                    long,
                    "mechanism",
                    "{}: --strategy is an alias of --mechanism only",
                    command.get_name()
                );
                named.push(command.get_name().to_owned());
            }
        }
    }
    assert_eq!(named, ["run", "explore", "live"], "the subcommands that take one mechanism");
}
