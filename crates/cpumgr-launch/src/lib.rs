//! The launcher behind `cpumgr launch` and `cpumgr demo`: workload files of real commands
//! ([`workload`]), one run of a workload under one configuration with real processes
//! ([`runner`]), and the figures that compare runs ([`metrics`]).

#![warn(missing_docs)]

pub mod adapter;
pub mod metrics;
pub mod mpi;
pub mod runner;
pub mod tcm;
pub mod workload;

pub use runner::{run, Config, Outcome, RunOptions, RunResult};
pub use workload::{Expand, Workload, WorkloadError};
