//! The mechanisms a worker can use to protect its writes, one small module each, behind
//! one type. A mechanism decides where the worker's token comes from (if anywhere) and
//! what it does when a write matches no row.

use crate::ids::Token;
use crate::refund::WriteGuard;
use std::fmt;
use std::str::FromStr;

pub mod fenced;
pub mod ttl_only;

/// Where a holder's token comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenPolicy {
    /// No token: writes carry no predicate on the fence.
    None,
    /// `INCR fence:settle:<merchant>` right after the lease is granted.
    Incr,
}

/// What a worker does when a claim or confirm updates zero rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnRejectedWrite {
    /// Skip the row and go on: nothing tells the worker its lease is gone.
    Skip,
    /// A fence violation: abandon the batch, never retry with the same token.
    Abandon,
}

/// What a mechanism is, in data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub name: &'static str,
    pub promise: &'static str,
    pub tokens: TokenPolicy,
    pub on_rejected_write: OnRejectedWrite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Mechanism {
    TtlOnly,
    Fenced,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::TtlOnly, Mechanism::Fenced];

    pub fn policy(self) -> &'static Policy {
        match self {
            Mechanism::TtlOnly => &ttl_only::POLICY,
            Mechanism::Fenced => &fenced::POLICY,
        }
    }

    pub fn name(self) -> &'static str {
        self.policy().name
    }

    /// The guard this mechanism puts on every write of a holder with `token`.
    pub fn guard(self, token: Option<Token>) -> WriteGuard {
        match (self.policy().tokens, token) {
            (TokenPolicy::Incr, Some(t)) => WriteGuard::Fence(t),
            _ => WriteGuard::Unfenced,
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mechanism {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mechanism::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
            format!("unknown strategy '{s}': expected one of {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused_with_the_choices() {
        for m in Mechanism::ALL {
            assert_eq!(m.name().parse::<Mechanism>(), Ok(m));
        }
        let err = "fencing".parse::<Mechanism>().unwrap_err();
        assert!(err.contains("unknown strategy 'fencing'"), "{err}");
        assert!(err.contains("ttl-only") && err.contains("fenced"), "{err}");
    }

    #[test]
    fn only_a_token_taking_mechanism_fences_its_writes() {
        assert_eq!(Mechanism::TtlOnly.guard(Some(Token(3))), WriteGuard::Unfenced);
        assert_eq!(Mechanism::Fenced.guard(Some(Token(3))), WriteGuard::Fence(Token(3)));
    }
}
