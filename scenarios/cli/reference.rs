//! The command reference, `docs/commands.md`, written from the command line's own
//! definitions by `fencesim report --commands`: every subcommand, what it is for, and its
//! arguments with their help. A test regenerates it in memory and fails when the committed
//! file is stale.

use crate::cli::Cli;
use clap::{Arg, CommandFactory};

/// Where the reference is kept, from the project root.
pub const COMMANDS_REFERENCE: &str = "docs/commands.md";

/// The command that writes the reference again.
pub const REGENERATE: &str = "cargo run -- report --commands";

/// The whole reference, as Markdown.
pub fn command_reference() -> String {
    let cli = Cli::command();
    let mut out = format!(
        "# Commands\n\n<!-- Generated from the command line's definitions by `fencesim report --commands`; \
         a test fails when it is stale. Do not edit by hand. -->\n\n{}\n\n\
         Exit codes: 0 no violation, 1 a violation was found, 2 bad usage or bad input (with a \
         message that says what is wrong), 3 a search cut short before it found anything. \
         `fencesim help explore` and `fencesim explore --help` say the same for one subcommand; \
         `fencesim manpage` prints it as a manual page.\n",
        one_line(cli.get_about().map(ToString::to_string).unwrap_or_default())
    );
    for command in cli.get_subcommands().filter(|command| !command.is_hide_set()) {
        out.push_str(&section(command, "fencesim"));
    }
    out
}

/// One subcommand's section: its purpose, its usage, a table of its arguments; then a
/// section for each of its own subcommands.
fn section(command: &clap::Command, parent: &str) -> String {
    let name = format!("{parent} {}", command.get_name());
    let about = command.get_long_about().or(command.get_about()).map(ToString::to_string).unwrap_or_default();
    let mut out = format!("\n## {name}\n\n{}\n", one_line(about));
    let aliases: Vec<&str> = command.get_visible_aliases().collect();
    if !aliases.is_empty() {
        out.push_str(&format!("\nAlso called: {}.\n", quoted(&aliases)));
    }
    let subcommands: Vec<&clap::Command> =
        command.get_subcommands().filter(|sub| !sub.is_hide_set() && sub.get_name() != "help").collect();
    if subcommands.is_empty() {
        let usage = command.clone().bin_name(&name).render_usage().to_string();
        out.push_str(&format!("\n```\n{}\n```\n", usage.trim_start_matches("Usage: ")));
    } else {
        let names: Vec<String> =
            subcommands.iter().map(|sub| format!("`{name} {}`", sub.get_name())).collect();
        out.push_str(&format!("\nIts subcommands: {}.\n", names.join(", ")));
    }
    let arguments: Vec<&Arg> = command.get_arguments().filter(|arg| shown(arg)).collect();
    if !arguments.is_empty() {
        out.push_str("\n| argument | what it does | default |\n|---|---|---|\n");
        for arg in arguments {
            out.push_str(&format!("| {} | {} | {} |\n", spelled(arg), cell(&help(arg)), cell(&default(arg))));
        }
    }
    for sub in subcommands {
        out.push_str(&section(sub, &name));
    }
    out
}

/// Whether an argument belongs in the reference (not the help and version flags clap adds,
/// nor hidden ones).
fn shown(arg: &Arg) -> bool {
    !arg.is_hide_set() && !matches!(arg.get_id().as_str(), "help" | "version")
}

/// How an argument is written: `--seeds <SEEDS>`, `--json`, `<FILE>`, with its aliases.
fn spelled(arg: &Arg) -> String {
    let value = || {
        let names = arg
            .get_value_names()
            .map(|names| names.join(" "))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase().replace('_', "-"));
        format!("<{names}>")
    };
    let Some(long) = arg.get_long() else { return format!("`{}`", value()) };
    let takes_value = arg.get_action().takes_values();
    let mut text = match (takes_value, arg.get_num_args().is_some_and(|n| n.min_values() == 0)) {
        (false, _) => format!("`--{long}`"),
        (true, true) => format!("`--{long} [{}]`", value().trim_matches(['<', '>'])),
        (true, false) => format!("`--{long} {}`", value()),
    };
    let aliases: Vec<String> =
        arg.get_all_aliases().unwrap_or_default().iter().map(|a| format!("--{a}")).collect();
    if !aliases.is_empty() {
        text.push_str(&format!(" (also {})", quoted(&aliases)));
    }
    text
}

/// Its help, with the values it accepts when there are few of them.
fn help(arg: &Arg) -> String {
    let text = arg.get_long_help().or(arg.get_help()).map(ToString::to_string).unwrap_or_default();
    let values: Vec<String> = arg.get_possible_values().iter().map(|v| v.get_name().to_owned()).collect();
    match values.is_empty() || !arg.get_action().takes_values() {
        true => one_line(text),
        false => format!("{} (one of: {})", one_line(text), values.join(", ")).trim_start().to_owned(),
    }
}

/// Its default, as on every machine: the number of threads is this machine's cores.
fn default(arg: &Arg) -> String {
    if arg.get_id() == "jobs" && !arg.get_default_values().is_empty() {
        return "the machine's cores".to_owned();
    }
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    match defaults.as_slice() {
        [] => String::new(),
        [one] if one.is_empty() => "(none)".to_owned(),
        _ => format!("`{}`", defaults.join(",")),
    }
}

/// Paragraphs and line breaks of a help text as one line.
fn one_line(text: String) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: a `|` would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn quoted<S: AsRef<str>>(names: &[S]) -> String {
    names.iter().map(|name| format!("`{}`", name.as_ref())).collect::<Vec<_>>().join(", ")
}
