//! The built-in mechanisms written out as files (`mechanisms/`), for a team to start from
//! the one nearest its own. Each is made from the Rust registry's spec and the store's and
//! the lease's own texts, so the files cannot drift from what the simulation runs: a test
//! fails when `mechanisms/` is not what `fencesim mechanism export` writes.

use super::schema::{
    LeaseKindName, LeaseTable, MechanismFile, OnRejected, SafetyName, ScriptsTable, StatementsTable,
    TokenSourceName, TokenTable, WritesTable, BUILT_IN_RENEWALS_PER_TTL,
};
use fencesim_model::mechanism::TokenPolicy;
use fencesim_model::store::{NEXT_SEQUENCE, OPEN_ROWS};
use fencesim_model::{Mechanism, Statements};

/// Where the built-in files are kept.
pub const DIRECTORY: &str = "mechanisms";

/// The built-in mechanism as a file.
pub fn file_of(mechanism: Mechanism) -> MechanismFile {
    let spec = mechanism.spec();
    let fenced = spec.tokens != TokenPolicy::None;
    let statements = Statements::SQLITE;
    let (claim, confirm) = match fenced {
        true => (
            named(statements.claim_fenced, &[":token", ":id"]),
            named(statements.confirm_fenced, &[":token", ":id"]),
        ),
        false => (named(statements.claim_unfenced, &[":id"]), named(statements.confirm_unfenced, &[":id"])),
    };
    MechanismFile {
        name: spec.name.to_owned(),
        promise: spec.promise.to_owned(),
        without_faults: spec.without_faults.map(str::to_owned),
        safety: SafetyName::of(spec.safety),
        token: TokenTable {
            source: TokenSourceName::of(spec.tokens),
            key: (spec.tokens == TokenPolicy::RedisIncr).then(|| "fence:settle:{merchant}".to_owned()),
            seed_on_restart: spec.seed_counter_on_restart,
        },
        lease: LeaseTable {
            kind: LeaseKindName::of(spec.lease),
            key: "lock:settle:{merchant}".to_owned(),
            renewals_per_ttl: if spec.renewal { BUILT_IN_RENEWALS_PER_TTL } else { 0 },
            check_before_write: spec.check_before_write,
            wait_for_replica: spec.wait_replica,
        },
        writes: WritesTable {
            on_rejected: OnRejected::of(spec.on_rejected_write),
            on_row_already_sent: OnRejected::of(spec.on_row_already_sent),
            fence_settlement: spec.fence_settlement,
        },
        statements: StatementsTable {
            open_rows: named(OPEN_ROWS, &[":merchant"]),
            claim,
            confirm,
            sequence: (spec.tokens == TokenPolicy::DbSequence).then(|| named(NEXT_SEQUENCE, &[":merchant"])),
        },
        scripts: ScriptsTable {
            release: spec.scripts.release.to_owned(),
            renew: spec.scripts.renew.to_owned(),
        },
    }
}

/// A statement with its numbered parameters (`?1`, `?2`) given these names, and the
/// indentation of its continuation lines taken off.
fn named(sql: &str, names: &[&str]) -> String {
    let mut text = sql.lines().map(str::trim).collect::<Vec<_>>().join("\n");
    for (i, name) in names.iter().enumerate() {
        text = text.replace(&format!("?{}", i + 1), name);
    }
    text
}

/// The file's text: a header that says where it comes from, then the tables.
pub fn text_of(mechanism: Mechanism) -> String {
    let body = toml::to_string_pretty(&file_of(mechanism)).expect("a mechanism file serialises");
    format!(
        "# The built-in mechanism `{name}`, as a file: copy it to describe your own lock, check it\n\
         # with `fencesim mechanism check FILE`. Written by `fencesim mechanism export`; the\n\
         # schema is in docs/mechanism-files.md.\n\n{body}",
        name = mechanism.name()
    )
}

/// The file name of a built-in mechanism.
pub fn file_name(mechanism: Mechanism) -> String {
    format!("{}.toml", mechanism.name())
}
