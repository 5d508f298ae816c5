//! The live run's movable clock, as the tests use it: they skip, loudly, when the machine
//! lacks what it needs, and fail instead when `CI` is set.

#![allow(dead_code)] // each test binary uses part of it

pub use fencesim::live::faketime::FakeClock as LiveFakeClock;

pub struct FakeClock {
    inner: LiveFakeClock,
    /// What to add to the server's environment.
    pub env: Vec<(String, String)>,
}

impl FakeClock {
    /// A clock at the real time, or `None` (having said why) when the machine lacks
    /// libfaketime, a redis-server or a C compiler and `CI` is not set.
    pub fn new(test: &str) -> Option<FakeClock> {
        match LiveFakeClock::new(test) {
            Ok(inner) => Some(FakeClock { env: inner.env.clone(), inner }),
            Err(why) => {
                assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and {why}");
                eprintln!("SKIPPED {test}: {why}");
                None
            }
        }
    }

    /// The server's clock stands `seconds` ahead of the real one from its next time call.
    pub fn set_offset_s(&self, seconds: u64) {
        self.inner.set_offset_ms(seconds * 1000).expect("the offset file");
    }

    /// The server's clock stops at `second` (below 60) past 2030-01-01 00:00:00.
    pub fn freeze_at_s(&self, second: u64) {
        self.inner.freeze_at_s(second).expect("the offset file");
    }
}
