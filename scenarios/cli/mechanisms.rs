//! `fencesim mechanisms` (also `strategies`): each mechanism and what it promises.

use fencesim::model::Mechanism;
use std::process::ExitCode;

pub fn run() -> ExitCode {
    for mechanism in Mechanism::ALL {
        println!("{:<20} {}", mechanism.name(), mechanism.spec().promise);
    }
    ExitCode::SUCCESS
}
