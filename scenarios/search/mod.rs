//! Searching for failures: one parallel pool, and what runs on it. Exploration by seed,
//! the matrix of mechanisms and the TTL sweep, the mutants and their shrinker, the
//! exhaustive small scope, the false-alarm runs of the mechanisms that promise safety,
//! the property suite over small worlds, and failures drawn afresh for a measurement.

pub mod closeness;
pub mod debate;
pub mod exhaustive;
pub mod explore;
pub mod failover;
pub mod false_alarms;
pub mod fresh;
pub mod guided;
pub mod lagging;
pub mod matrix;
pub mod matrix_shards;
pub mod merge;
pub mod mutant_shards;
pub mod mutants;
pub mod pool;
pub mod props;
pub mod second_store;
pub mod seeds;
pub mod shrink;
pub mod smaller;
pub mod verdicts;
pub mod widen;

pub use pool::Pool;
