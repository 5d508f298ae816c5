//! Places for live runs in a test binary: two at a time. A live run spends most of its
//! time waiting on its story (a fifth of one core, measured over `tests/live.rs`'s runs one
//! at a time: 27 s of processor time in 132 s), so two leave the machine more than half
//! idle, and more would crowd a slowed one.

#![allow(dead_code)] // each test binary uses part of it

use std::sync::{Condvar, Mutex};

static RUNNING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// A place among the live runs of this process, held until it is dropped.
pub struct Slot;

/// Waits for a place: at most two live runs of a test binary run at once.
pub fn live_slot() -> Slot {
    let (count, freed) = &RUNNING;
    let mut running = count.lock().unwrap_or_else(|p| p.into_inner());
    while *running >= 2 {
        running = freed.wait(running).unwrap_or_else(|p| p.into_inner());
    }
    *running += 1;
    Slot
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (count, freed) = &RUNNING;
        *count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        freed.notify_one();
    }
}
