//! Reads a mechanism file and checks everything that can be checked before a run: the
//! TOML and its schema, every statement prepared by SQLite against the store's schema
//! (its parameters and the columns it returns), every script compiled by the embedded Lua,
//! and the fields that only make sense together. Every problem is named by its field and
//! given in SQLite's, Lua's or the schema's own words.

use super::schema::{MechanismFile, TokenSourceName};
use fencesim_model::store::SCHEMA;
use rusqlite::Connection;

/// One thing wrong with a file: the field, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    fn new(field: &str, message: impl Into<String>) -> Problem {
        Problem { field: field.to_owned(), message: message.into() }
    }
}

/// The parameters a statement may be given.
const PARAMETERS: [&str; 3] = [":merchant", ":id", ":token"];

/// The columns each statement must return, in order.
const ROW_COLUMNS: [&str; 5] = ["id", "merchant", "amount_cents", "state", "fence"];
const IMAGE_COLUMNS: [&str; 2] = ["state", "fence"];

/// Parses `text` and checks it; the problems, all of them, when there are any.
pub fn check(text: &str) -> Result<MechanismFile, Vec<Problem>> {
    let file: MechanismFile = toml::from_str(text).map_err(|e| vec![schema_problem(text, &e)])?;
    let mut problems = Vec::new();
    fields(&file, &mut problems);
    // a built-in's own file is that mechanism; a changed copy under its name is not
    if let Some(builtin) = fencesim_model::Mechanism::ALL.into_iter().find(|m| m.name() == file.name) {
        if text != super::builtin::text_of(builtin) {
            problems.push(Problem::new(
                "name",
                format!(
                    "'{}' is a built-in mechanism's name, and this file is not {}: give the file's mechanism a name of its own",
                    file.name,
                    super::builtin::file_name(builtin)
                ),
            ));
        }
    }
    statements(&file, &mut problems);
    let acquire = file.scripts.acquire.iter().map(|script| ("scripts.acquire", script));
    let scripts = [("scripts.release", &file.scripts.release), ("scripts.renew", &file.scripts.renew)];
    for (field, script) in acquire.chain(scripts) {
        if let Err(message) = fencesim_sim::redis::compile_script(script) {
            problems.push(Problem::new(field, format!("Lua says: {message}")));
        } else if let Some(name) = unmodelled_command(script) {
            let modelled = fencesim_sim::redis::SCRIPT_COMMANDS;
            problems.push(Problem::new(
                field,
                format!(
                    "sends {name}, which the simulated Redis does not run (a script may send {modelled})"
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(file)
    } else {
        Err(problems)
    }
}

/// The first command a script sends by a literal name that the simulated Redis does not
/// run, in capitals (a name held in a variable is found only when the script runs).
fn unmodelled_command(script: &str) -> Option<String> {
    let mut rest = script;
    while let Some(at) = rest.find("redis.") {
        rest = &rest[at + "redis.".len()..];
        let Some(after) = rest.strip_prefix("pcall(").or_else(|| rest.strip_prefix("call(")) else {
            continue;
        };
        let after = after.trim_start();
        let Some(quote) = after.chars().next().filter(|c| *c == '\'' || *c == '"') else { continue };
        let Some(end) = after[1..].find(quote) else { continue };
        let name = after[1..1 + end].to_ascii_lowercase();
        if !fencesim_sim::redis::SCRIPT_COMMAND_NAMES.contains(&name.as_str()) {
            return Some(name.to_ascii_uppercase());
        }
    }
    None
}

/// A TOML or schema error, named by the line it is on.
fn schema_problem(text: &str, error: &toml::de::Error) -> Problem {
    let line = error.span().map_or(1, |span| text[..span.start.min(text.len())].lines().count().max(1));
    let line = match error.span() {
        Some(span) if text[..span.start.min(text.len())].ends_with('\n') => line + 1,
        _ => line,
    };
    Problem::new(&format!("line {line}"), error.message().trim_end().to_owned())
}

/// What is wrong with a lease's or a counter's key, if anything: it is a key, and only `{merchant}` and
/// `{worker}` are put in.
fn key_problem(key: &str) -> Option<String> {
    if key.trim().is_empty() || key.chars().any(char::is_whitespace) {
        return Some("a Redis key without spaces, e.g. \"fence:settle:{merchant}\"".to_owned());
    }
    let rest = key.replace("{merchant}", "").replace("{worker}", "");
    let stray = rest.find('{').or_else(|| rest.find('}'));
    stray.map(|_| format!("\"{key}\": only {{merchant}} and {{worker}} are put in a key"))
}

/// The fields that must agree with each other.
fn fields(file: &MechanismFile, problems: &mut Vec<Problem>) {
    let kebab = |s: &str| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !kebab(&file.name) {
        problems
            .push(Problem::new("name", "lower-case letters, digits and '-' only, e.g. \"our-fenced-lock\""));
    }
    if file.promise.trim().is_empty() {
        problems.push(Problem::new("promise", "say in one sentence what the mechanism promises"));
    }
    if let Some(problem) = key_problem(&file.lease.key) {
        problems.push(Problem::new("lease.key", problem));
    }
    match (file.token.source, &file.token.key) {
        (TokenSourceName::RedisIncr, None) => problems.push(Problem::new(
            "token.key",
            "redis-incr needs the counter's key, e.g. \"fence:settle:{merchant}\"",
        )),
        (TokenSourceName::RedisIncr, Some(key)) => {
            if let Some(problem) = key_problem(key) {
                problems.push(Problem::new("token.key", problem));
            }
        }
        (TokenSourceName::None | TokenSourceName::DbSequence, Some(_)) => {
            problems.push(Problem::new("token.key", "only a redis-incr token has a key"))
        }
        _ => {}
    }
    if file.token.seed_on_restart && file.token.source != TokenSourceName::RedisIncr {
        problems.push(Problem::new(
            "token.seed-on-restart",
            "only a counter on Redis is seeded when Redis starts",
        ));
    }
    if file.lease.renewals_per_ttl == 1 || file.lease.renewals_per_ttl > 10 {
        problems.push(Problem::new(
            "lease.renewals-per-ttl",
            "0 (never), or 2 to 10 renewals per TTL (at 1 the lease expires as it is renewed)",
        ));
    }
}

/// Each statement prepared against the store's schema, with the parameters and columns
/// the protocol needs.
fn statements(file: &MechanismFile, problems: &mut Vec<Problem>) {
    let db = Connection::open_in_memory().and_then(|db| db.execute_batch(SCHEMA).map(|()| db));
    let db = db.expect("an in-memory database with the store's schema");
    let fenced = file.token.source != TokenSourceName::None;
    // a fenced write may leave the token out: unsafe, and said so by `warnings`, but it runs
    let write_needs: &[&str] = if fenced { &[":id", ":token"] } else { &[":id"] };
    let s = &file.statements;
    let mut wanted = vec![
        Wanted {
            field: "statements.open-rows",
            sql: &s.open_rows,
            needs: &[":merchant"],
            columns: &ROW_COLUMNS,
            reads: true,
            or_nothing: false,
        },
        Wanted {
            field: "statements.claim",
            sql: &s.claim,
            needs: write_needs,
            columns: &IMAGE_COLUMNS,
            reads: false,
            or_nothing: true,
        },
        Wanted {
            field: "statements.confirm",
            sql: &s.confirm,
            needs: write_needs,
            columns: &IMAGE_COLUMNS,
            reads: false,
            or_nothing: true,
        },
    ];
    match (&s.sequence, file.token.source) {
        (Some(sequence), TokenSourceName::DbSequence) => wanted.push(Wanted {
            field: "statements.sequence",
            sql: sequence,
            needs: &[":merchant"],
            columns: &["value"],
            reads: false,
            or_nothing: false,
        }),
        (None, TokenSourceName::DbSequence) => problems.push(Problem::new(
            "statements.sequence",
            "a db-sequence token needs the statement that takes it",
        )),
        (Some(_), _) => {
            problems.push(Problem::new("statements.sequence", "only a db-sequence token has one"))
        }
        (None, _) => {}
    }
    for wanted in wanted {
        if let Err(message) = statement(&db, &wanted) {
            problems.push(Problem::new(wanted.field, message));
        }
    }
}

/// A statement the protocol needs: its field, its text, the parameters it must take, the
/// columns it must return (or may return none of: a write is decided by its row count, and
/// may return the row it changed), and whether it only reads.
struct Wanted<'a> {
    field: &'a str,
    sql: &'a str,
    needs: &'a [&'a str],
    columns: &'a [&'a str],
    reads: bool,
    or_nothing: bool,
}

/// Parameters a statement may leave out: the token, which a fenced write should compare
/// (a warning says so when it does not) but runs without.
const OPTIONAL: [&str; 1] = [":token"];

/// One statement: it prepares, takes exactly the parameters it needs, returns its
/// columns, and reads or writes as it must.
fn statement(db: &Connection, wanted: &Wanted<'_>) -> Result<(), String> {
    let Wanted { sql, needs, columns, reads: read_only, or_nothing, .. } = *wanted;
    let prepared = db.prepare(sql).map_err(|e| format!("SQLite says: {}", sqlite_message(&e)))?;
    let given: Vec<String> = (1..=prepared.parameter_count())
        .map(|i| prepared.parameter_name(i).unwrap_or("?").to_owned())
        .collect();
    if let Some(other) = given.iter().find(|p| !PARAMETERS.contains(&p.as_str())) {
        let known = PARAMETERS.join(", ");
        return Err(format!("the parameter {other} is not one the worker gives (it gives {known}, by name)"));
    }
    let required = needs.iter().filter(|need| !OPTIONAL.contains(need));
    if let Some(missing) = required.clone().find(|need| !given.iter().any(|p| p == *need)) {
        return Err(format!("the statement must use {missing}"));
    }
    if let Some(extra) = given.iter().find(|p| !needs.contains(&p.as_str())) {
        return Err(format!("{extra} is not given to this statement (it is given {})", needs.join(", ")));
    }
    let returned: Vec<&str> = prepared.column_names();
    if returned != columns && !(or_nothing && returned.is_empty()) {
        let nothing = if or_nothing { " (or nothing)" } else { "" };
        return Err(format!(
            "must return {}, in that order{nothing}; it returns {}",
            columns.join(", "),
            describe(&returned)
        ));
    }
    // a sequence that only reads (`SELECT MAX(fence) + 1 ...`) runs: `warnings` says why it is unsafe
    let sequence_reads = wanted.field == "statements.sequence" && prepared.readonly();
    if prepared.readonly() != read_only && !sequence_reads {
        return Err(if read_only {
            "must only read"
        } else {
            "must write (an UPDATE, or an INSERT for the sequence)"
        }
        .into());
    }
    Ok(())
}

fn describe(columns: &[&str]) -> String {
    if columns.is_empty() {
        "nothing".into()
    } else {
        columns.join(", ")
    }
}

/// SQLite's own message for an error.
fn sqlite_message(error: &rusqlite::Error) -> String {
    match error {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
        rusqlite::Error::SqlInputError { msg, offset, .. } => format!("{msg} (at character {offset})"),
        other => other.to_string(),
    }
}

/// What a file that runs does unsafely, in the protocol's words: a fenced write that does
/// not compare the fence or does not store the token, and a sequence that only reads.
/// Warnings, not problems: a team's bug must load for a search to find it.
pub fn warnings(file: &MechanismFile) -> Vec<Problem> {
    let mut found = lease_warnings(file);
    if file.token.source == TokenSourceName::None {
        return found;
    }
    if !file.lease.check_after_token {
        found.push(Problem::new("lease.check-after-token", "the worker does not read its lease again once its token is taken: a holder held up between its lease and its token draws a token newer than its successor's, and its writes win over the live holder's"));
    }
    if file.token.key.as_deref().is_some_and(|key| key.contains("{worker}")) {
        found.push(Problem::new("token.key", "the counter's key names the worker: each worker counts on its own, so a stale holder's token can be higher than its successor's, and the store will take the stale holder's writes"));
    }
    let s = &file.statements;
    let (set_of, where_of) = (|sql: &str| clause(sql, "set", "where"), |sql: &str| clause(sql, "where", ""));
    if !where_of(&s.claim).contains(":token") {
        found.push(Problem::new(
            "statements.claim",
            "the claim does not compare the row's fence with :token: a stale holder's claim will be accepted",
        ));
    }
    if !set_of(&s.claim).contains(":token") {
        found.push(Problem::new("statements.claim", "the claim does not store :token in the row's fence: a newer holder's claim will not turn an older token away"));
    }
    if !where_of(&s.confirm).contains(":token") {
        found.push(Problem::new("statements.confirm", "the confirm does not compare the row's fence with :token: a stale holder's confirm will be accepted"));
    }
    let reads = |sql: &str| sql.trim_start().to_ascii_lowercase().starts_with("select");
    if s.sequence.as_deref().is_some_and(reads) {
        found.push(Problem::new(
            "statements.sequence",
            "the sequence only reads: two workers that take a token before either writes get the same one",
        ));
    }
    found
}

/// What is unsafe in the lease's scripts: a release or a renewal that does not compare the
/// key's value with the holder's (`ARGV[1]`) acts on whoever's lease is there; an
/// acquisition whose answer does not come from `SET NX`'s says it took a lease another holds.
fn lease_warnings(file: &MechanismFile) -> Vec<Problem> {
    let mut found = Vec::new();
    if file.lease.key.contains("{worker}") {
        found.push(Problem::new("lease.key", "the lease's key names the worker: every worker takes a lease of its own, and none keeps another out"));
    }
    let compares = |script: &str| script.contains("ARGV[1]") && script.to_ascii_lowercase().contains("get");
    if !compares(&file.scripts.release) {
        found.push(Problem::new("scripts.release", "the release does not compare the key's value with the holder's: it deletes whoever's lease is there"));
    }
    if file.lease.renewals_per_ttl > 0 && !compares(&file.scripts.renew) {
        found.push(Problem::new("scripts.renew", "the renewal does not compare the key's value with the holder's: it extends whoever's lease is there"));
    }
    if let Some(acquire) = &file.scripts.acquire {
        let lower = acquire.to_ascii_lowercase().replace('"', "'");
        let answers_set = lower.contains("return redis.call('set'") || lower.contains("if ");
        if !answers_set {
            found.push(Problem::new("scripts.acquire", "the acquisition's answer does not come from SET NX's: it says the lease was taken when another holds it"));
        }
    }
    found
}

/// The text of `sql` from the keyword `from` to the keyword `to` (or its end), lower-cased:
/// a statement's SET or WHERE part.
fn clause(sql: &str, from: &str, to: &str) -> String {
    let lower = sql.to_ascii_lowercase();
    let word = |text: &str, key: &str| {
        text.match_indices(key)
            .find(|(at, _)| {
                let before =
                    text[..*at].chars().next_back().is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
                let after = text[at + key.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
                before && after
            })
            .map(|(at, _)| at)
    };
    let Some(start) = word(&lower, from) else { return String::new() };
    let rest = &lower[start..];
    let end = if to.is_empty() { None } else { word(rest, to) };
    rest[..end.unwrap_or(rest.len())].to_owned()
}
