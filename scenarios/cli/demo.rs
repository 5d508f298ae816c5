//! `fencesim demo`: the worked example told second by second, with the fence and without.

use crate::cli::args::parse_seed;
use crate::cli::bad_input;
use crate::runner::DEFAULT_SEED;
use crate::tell::demo;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// The seed the two runs are made with (the worked example's story is told at seed 1)
    #[arg(long, default_value_t = DEFAULT_SEED, value_parser = parse_seed, allow_hyphen_values = true)]
    seed: u64,
}

pub fn run(args: DemoArgs) -> ExitCode {
    match demo::render(args.seed) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => bad_input(error),
    }
}
