//! Mutants: realistic bugs in the worker and lock code, each switched on at run time, so
//! that the harness's power to catch bugs can be measured without editing code. With no
//! mutant selected (the default) none of this changes anything.

use crate::mechanism::Mechanism;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mutant {
    /// The claim accepts `fence <= token` instead of `fence < token`.
    ClaimFenceAtMost,
    /// The confirm accepts `fence >= token` instead of `fence = token`.
    ConfirmFenceAtLeast,
    /// The confirm has no fence predicate at all.
    ConfirmWithoutFence,
    /// A claim that updated no row is treated as a success.
    ClaimRowCountIgnored,
    /// A worker keeps the token it took for a job and reuses it when the job comes back.
    TokenPerJob,
    /// A worker takes one token and reuses it for every batch.
    TokenPerWorker,
    /// The lease is released with a plain `DEL`.
    ReleaseWithDel,
    /// Every worker uses the same lock value.
    SharedLockValue,
    /// The renewal sets the key again when it finds it missing.
    ExtendRecreates,
    /// A restarted Redis's counter is not seeded from `MAX(fence)`.
    NoReseedAfterRestart,
    /// The idempotency key is made per attempt instead of per refund.
    KeyPerAttempt,
    /// The claim also accepts rows already `sent`.
    ClaimAcceptsSent,
}

impl Mutant {
    pub const ALL: [Mutant; 12] = [
        Mutant::ClaimFenceAtMost,
        Mutant::ConfirmFenceAtLeast,
        Mutant::ConfirmWithoutFence,
        Mutant::ClaimRowCountIgnored,
        Mutant::TokenPerJob,
        Mutant::TokenPerWorker,
        Mutant::ReleaseWithDel,
        Mutant::SharedLockValue,
        Mutant::ExtendRecreates,
        Mutant::NoReseedAfterRestart,
        Mutant::KeyPerAttempt,
        Mutant::ClaimAcceptsSent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::ClaimFenceAtMost => "claim-fence-at-most",
            Mutant::ConfirmFenceAtLeast => "confirm-fence-at-least",
            Mutant::ConfirmWithoutFence => "confirm-without-fence",
            Mutant::ClaimRowCountIgnored => "claim-row-count-ignored",
            Mutant::TokenPerJob => "token-per-job",
            Mutant::TokenPerWorker => "token-per-worker",
            Mutant::ReleaseWithDel => "release-with-del",
            Mutant::SharedLockValue => "shared-lock-value",
            Mutant::ExtendRecreates => "extend-recreates",
            Mutant::NoReseedAfterRestart => "no-reseed-after-restart",
            Mutant::KeyPerAttempt => "key-per-attempt",
            Mutant::ClaimAcceptsSent => "claim-accepts-sent",
        }
    }

    /// The mechanism the bug is planted in: one whose code has the buggy line.
    pub fn baseline(self) -> Mechanism {
        match self {
            Mutant::ClaimFenceAtMost => Mechanism::Fenced,
            Mutant::ExtendRecreates => Mechanism::TtlRenewal,
            Mutant::NoReseedAfterRestart => Mechanism::FencedSeeded,
            _ => Mechanism::FencedDbSequence,
        }
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mutant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mutant::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
            format!("unknown mutant '{s}': expected one of {}", names.join(", "))
        })
    }
}

impl serde::Serialize for Mutant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Mutant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}
