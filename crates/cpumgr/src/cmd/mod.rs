//! One module per subcommand, each with its clap `Args` and a `run` function.

pub mod attach;
pub mod config;
pub mod control;
pub mod daemon;
pub mod decide;
pub mod demo;
pub mod launch;
pub mod policies;
pub mod policy;
pub mod quantum;
pub mod report;
pub mod run;
pub mod session;
pub mod sim;
pub mod status;
pub mod step;
pub mod top;
pub mod topology;
pub mod trace;
