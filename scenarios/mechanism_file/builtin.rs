//! The built-in mechanisms written out as files (`mechanisms/`), for a team to start from
//! the one nearest its own. Each is made from the Rust registry's spec and the store's and
//! the lease's own texts, so the files cannot drift from what the simulation runs: a test
//! fails when `mechanisms/` is not what `fencesim mechanism export` writes.

use super::parameters::{named_write, renamed};
use super::schema::{
    LeaseKindName, LeaseTable, MechanismFile, OnRejected, SafetyName, ScriptsTable, StatementsTable,
    TokenSourceName, TokenTable, WritesTable,
};
use fencesim_model::mechanism::TokenPolicy;
use fencesim_model::Mechanism;

/// Where the built-in files are kept.
pub const DIRECTORY: &str = "mechanisms";

/// The built-in mechanism as a file.
pub fn file_of(mechanism: Mechanism) -> MechanismFile {
    let spec = mechanism.spec();
    let fenced = spec.tokens != TokenPolicy::None;
    let statements = spec.statements;
    let (claim, confirm) = match fenced {
        true => (statements.claim_fenced, statements.confirm_fenced),
        false => (statements.claim_unfenced, statements.confirm_unfenced),
    };
    let merchant = |sql: &str| renamed(sql, &["?1"], &[":merchant"]);
    MechanismFile {
        name: spec.name.to_owned(),
        promise: spec.promise.to_owned(),
        without_faults: spec.without_faults.map(str::to_owned),
        safety: SafetyName::of(spec.safety),
        token: TokenTable {
            source: TokenSourceName::of(spec.tokens),
            key: (spec.tokens == TokenPolicy::RedisIncr).then(|| spec.counter_key.to_owned()),
            seed_on_restart: spec.seed_counter_on_restart,
        },
        lease: LeaseTable {
            kind: LeaseKindName::of(spec.lease),
            key: spec.lease_key.to_owned(),
            renewals_per_ttl: spec.renewals_per_ttl,
            check_before_write: spec.check_before_write,
            check_after_token: spec.check_after_token,
            wait_for_replica: spec.wait_replica,
        },
        writes: WritesTable {
            on_rejected: OnRejected::of(spec.on_rejected_write),
            on_row_already_sent: OnRejected::of(spec.on_row_already_sent),
            fence_settlement: spec.fence_settlement,
        },
        statements: StatementsTable {
            open_rows: merchant(statements.open_rows),
            claim: named_write(claim, fenced),
            confirm: named_write(confirm, fenced),
            sequence: (spec.tokens == TokenPolicy::DbSequence).then(|| merchant(statements.next_sequence)),
        },
        scripts: ScriptsTable {
            acquire: spec.scripts.acquire.map(str::to_owned),
            release: spec.scripts.release.to_owned(),
            renew: spec.scripts.renew.to_owned(),
        },
    }
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
