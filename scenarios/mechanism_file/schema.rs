//! A mechanism file, field by field: what a team writes to describe its own lock. Every
//! table and field is named in `docs/mechanism-files.md`; a field the schema does not know
//! is an error, never ignored.

use super::parameters::{positional_write, renamed};
use fencesim_model::mechanism::{
    LeaseKind, OnRejectedWrite, ReleasePolicy, Scripts, Spec, TokenPolicy, COUNTER_KEY, PLAIN_DEL_LUA,
};
use fencesim_model::{Safety, Statements};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MechanismFile {
    /// The mechanism's name, in lower case words joined by `-`.
    pub name: String,
    /// What it promises, in one sentence.
    pub promise: String,
    /// What it breaks with no fault at all, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_faults: Option<String>,
    /// How safe it claims to be: what the suite holds it to.
    pub safety: SafetyName,
    pub token: TokenTable,
    pub lease: LeaseTable,
    pub writes: WritesTable,
    pub statements: StatementsTable,
    pub scripts: ScriptsTable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SafetyName {
    Unsafe,
    UnlessCounterLost,
    UnlessRestartLosesCounter,
    Safe,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TokenTable {
    /// `none`, `redis-incr` (an `INCR` on Redis) or `db-sequence` (the database's own).
    pub source: TokenSourceName,
    /// The counter's key for `redis-incr`, any shape, with `{merchant}` and `{worker}`
    /// where the merchant and the worker go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// When Redis starts, set the counter from the largest fence of the merchant's rows.
    #[serde(default)]
    pub seed_on_restart: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSourceName {
    None,
    RedisIncr,
    DbSequence,
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LeaseTable {
    /// `single` (one Redis instance) or `majority` (five; a majority within the validity time).
    pub kind: LeaseKindName,
    /// The lease's key, with `{merchant}` where the merchant goes.
    pub key: String,
    /// How many times per TTL a background task renews the lease with `scripts.renew`; 0:
    /// never.
    #[serde(default)]
    pub renewals_per_ttl: u32,
    /// Read the lease's key before every write and give the batch up if it is not ours.
    #[serde(default)]
    pub check_before_write: bool,
    /// Read the lease's key again once the token is taken and give the batch up if it is
    /// not ours (a step beyond the article's; default `true`, as every built-in does).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub check_after_token: bool,
    /// Wait for the replica after taking the lease and the token, and use neither before it
    /// has them.
    #[serde(default)]
    pub wait_for_replica: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseKindName {
    Single,
    Majority,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WritesTable {
    /// What the worker does when a claim or confirm updates no row: `skip` the row or
    /// `abandon` the batch.
    pub on_rejected: OnRejected,
    /// What it does when the row is already `sent` by another holder.
    pub on_row_already_sent: OnRejected,
    /// Whether the settlement ledger's postings carry the token too.
    pub fence_settlement: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnRejected {
    Skip,
    Abandon,
}

/// The SQL the worker runs, with named parameters: `:merchant`, `:id`, `:token`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StatementsTable {
    /// The merchant's open rows, in id order: `id, merchant, amount_cents, state, fence`.
    pub open_rows: String,
    /// Marks a row `sending`; returns the row's `state, fence`.
    pub claim: String,
    /// Marks a row `sent`; returns the row's `state, fence`.
    pub confirm: String,
    /// The next token of the merchant's sequence, for `db-sequence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<String>,
}

/// The Redis scripts, in Lua, with `KEYS` and `ARGV` as Redis passes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ScriptsTable {
    /// Takes the lease, if the lock takes it with a script of its own: `KEYS[1]` the lease,
    /// `ARGV[1]` the worker's value, `ARGV[2]` the TTL in milliseconds; returns 1 (or `OK`)
    /// when it took the lease, 0 (or nil) when it did not. Without it the lease is taken
    /// with `SET key value NX PX ttl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire: Option<String>,
    /// Gives the lease back: `KEYS[1]` the lease, `ARGV[1]` the holder's value; returns 1
    /// when it deleted the lease.
    pub release: String,
    /// Renews the lease: `KEYS[1]`, `ARGV[1]` as above, `ARGV[2]` the TTL in milliseconds;
    /// returns 1 when it renewed.
    pub renew: String,
}

impl SafetyName {
    pub fn of(safety: Safety) -> SafetyName {
        match safety {
            Safety::Unsafe => SafetyName::Unsafe,
            Safety::UnlessCounterLost => SafetyName::UnlessCounterLost,
            Safety::UnlessRestartLosesCounter => SafetyName::UnlessRestartLosesCounter,
            Safety::Safe => SafetyName::Safe,
        }
    }

    pub fn safety(self) -> Safety {
        match self {
            SafetyName::Unsafe => Safety::Unsafe,
            SafetyName::UnlessCounterLost => Safety::UnlessCounterLost,
            SafetyName::UnlessRestartLosesCounter => Safety::UnlessRestartLosesCounter,
            SafetyName::Safe => Safety::Safe,
        }
    }
}

impl TokenSourceName {
    pub fn of(policy: TokenPolicy) -> TokenSourceName {
        match policy {
            TokenPolicy::None => TokenSourceName::None,
            TokenPolicy::RedisIncr => TokenSourceName::RedisIncr,
            TokenPolicy::DbSequence => TokenSourceName::DbSequence,
        }
    }

    pub fn policy(self) -> TokenPolicy {
        match self {
            TokenSourceName::None => TokenPolicy::None,
            TokenSourceName::RedisIncr => TokenPolicy::RedisIncr,
            TokenSourceName::DbSequence => TokenPolicy::DbSequence,
        }
    }
}

impl OnRejected {
    pub fn of(policy: OnRejectedWrite) -> OnRejected {
        match policy {
            OnRejectedWrite::Skip => OnRejected::Skip,
            OnRejectedWrite::Abandon => OnRejected::Abandon,
        }
    }

    pub fn policy(self) -> OnRejectedWrite {
        match self {
            OnRejected::Skip => OnRejectedWrite::Skip,
            OnRejected::Abandon => OnRejectedWrite::Abandon,
        }
    }
}

impl LeaseKindName {
    pub fn of(kind: LeaseKind) -> LeaseKindName {
        match kind {
            LeaseKind::Single => LeaseKindName::Single,
            LeaseKind::Redlock => LeaseKindName::Majority,
        }
    }

    pub fn kind(self) -> LeaseKind {
        match self {
            LeaseKindName::Single => LeaseKind::Single,
            LeaseKindName::Majority => LeaseKind::Redlock,
        }
    }
}

impl MechanismFile {
    /// The mechanism as the model's data (its texts leaked: a mechanism lives as long as
    /// the process). The release policy is read from the release script: the plain `DEL`
    /// script is `PlainDel`, any other is run as the script it is.
    pub fn spec(&self) -> Spec {
        let leak = |text: &str| -> &'static str { Box::leak(text.to_owned().into_boxed_str()) };
        let release = match self.scripts.release.trim() == PLAIN_DEL_LUA {
            true => ReleasePolicy::PlainDel,
            false => ReleasePolicy::CompareAndDelete,
        };
        Spec {
            name: leak(&self.name),
            promise: leak(&self.promise),
            without_faults: self.without_faults.as_deref().map(leak),
            safety: self.safety.safety(),
            tokens: self.token.source.policy(),
            on_rejected_write: self.writes.on_rejected.policy(),
            on_row_already_sent: self.writes.on_row_already_sent.policy(),
            lease: self.lease.kind.kind(),
            release,
            renewals_per_ttl: self.lease.renewals_per_ttl,
            check_before_write: self.lease.check_before_write,
            check_after_token: self.lease.check_after_token,
            seed_counter_on_restart: self.token.seed_on_restart,
            lease_key: leak(&self.lease.key),
            counter_key: self.token.key.as_deref().map_or(COUNTER_KEY, leak),
            fence_settlement: self.writes.fence_settlement,
            wait_replica: self.lease.wait_for_replica,
            scripts: Scripts {
                acquire: self.scripts.acquire.as_deref().map(&leak),
                release: leak(&self.scripts.release),
                renew: leak(&self.scripts.renew),
            },
            statements: self.statements.positional(self.token.source != TokenSourceName::None, leak),
        }
    }
}

impl StatementsTable {
    /// The statements as the stores run them, parameters by position. A mechanism without a
    /// token runs its writes unfenced and never the fenced texts, which stay the built-ins'.
    fn positional(&self, fenced: bool, leak: impl Fn(&str) -> &'static str) -> Statements {
        let merchant = |sql: &str| leak(&renamed(sql, &[":merchant"], &["?1"]));
        let (claim, confirm) =
            (leak(&positional_write(&self.claim, fenced)), leak(&positional_write(&self.confirm, fenced)));
        let base = Statements::SQLITE;
        let writes = match fenced {
            true => Statements { claim_fenced: claim, confirm_fenced: confirm, ..base },
            false => Statements { claim_unfenced: claim, confirm_unfenced: confirm, ..base },
        };
        Statements {
            open_rows: merchant(&self.open_rows),
            next_sequence: self.sequence.as_deref().map_or(base.next_sequence, merchant),
            ..writes
        }
    }
}
