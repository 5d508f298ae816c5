//! `fencesim mechanisms` (also `strategies`): each mechanism and what it promises, and
//! what it breaks with no fault at all when it breaks anything.

use crate::model::Mechanism;
use std::process::ExitCode;

pub fn run() -> ExitCode {
    for mechanism in Mechanism::ALL {
        let spec = mechanism.spec();
        match spec.without_faults {
            Some(weakness) => {
                println!("{:<20} {}; with no fault at all, {weakness}", spec.name, spec.promise)
            }
            None => println!("{:<20} {}", spec.name, spec.promise),
        }
    }
    ExitCode::SUCCESS
}
