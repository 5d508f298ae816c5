//! What the tests against real components share.

pub mod chromium;
pub mod faketime;
pub mod page;
pub mod picture;
pub mod postgres;
pub mod programs;
pub mod redis_answers;
pub mod redis_server;
pub mod slots;
pub mod xmllint;
