//! A signal that asks a live command to stop (an interrupt from the terminal, a
//! termination from a supervisor or a CI job's timeout). The live run owns processes and
//! directories that only its own clean-up removes: worker processes, its redis-servers, a
//! PostgreSQL cluster and their temporary directories. So the signal only raises a flag;
//! the run's loops read it, return an error, and every owner's clean-up runs on the way
//! out, as it does after any other error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static ASKED: AtomicBool = AtomicBool::new(false);
static WATCHING: Once = Once::new();

/// What a stopped run says.
pub const STOPPED: &str = "stopped by a signal: every process and directory of the run was cleaned up";

/// From now on an interrupt or a termination of this process asks the live run to stop
/// instead of ending the process where it stands.
pub fn watch() {
    WATCHING.call_once(|| {
        if let Err(e) = ctrlc::set_handler(|| ASKED.store(true, Ordering::SeqCst)) {
            eprintln!("live: cannot watch for signals ({e}); an interrupt may leave servers running");
        }
    });
}

/// Whether a signal asked the run to stop.
pub fn asked() -> bool {
    ASKED.load(Ordering::SeqCst)
}

/// An error to return when a signal asked the run to stop.
pub fn check() -> Result<(), String> {
    match asked() {
        true => Err(STOPPED.to_owned()),
        false => Ok(()),
    }
}
