//! The invariants, as one table: each a name, a kind and a function over what a run
//! recorded. Checkers judge by the truth, not by any worker's belief: every lease Redis
//! really granted is an epoch, and every write is attributed to the epoch of its writer's
//! own acquisition. Each breach names the event that caused it, in words. Coverage says
//! what a set of runs exercised.

pub mod before;
pub mod chain;
pub mod coverage;
pub mod facts;
pub mod hops;
pub mod lease;
pub mod liveness;
pub mod money;
pub mod order;
pub mod rows;
pub mod settlement;
pub mod table;

pub use facts::{Breach, Facts, PerRow};
pub use table::{check_all, invariant, known_invariant, violations, Check, CheckKind, Invariant, INVARIANTS};
