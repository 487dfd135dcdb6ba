//! One module per subcommand, each with its clap `Args` and a `run` function.

pub mod decide;
pub mod launch;
pub mod policies;
pub mod report;
pub mod sim;
pub mod trace;
pub mod topology;
