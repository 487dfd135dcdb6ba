//! A GNU make jobserver whose tokens follow a program's CPU allocation.
//!
//! `cpumgr run -- make -j64` (or ninja, cargo) hands the build a jobserver: `allocation - 1`
//! tokens (the build's implicit job is the last CPU), more when CPUs come, fewer when they go:
//! tokens that come back are withheld until the count fits, so a running job always finishes
//! and none is stopped. [`command::plan`] decides which commands get one and rewrites their
//! `-j`; [`Jobserver`] is the server; [`slot_source`] reads the allocation from the program's
//! slot. docs/LIVE.md, "Builds (make, ninja, cargo)", says why the pipe style is the default.

pub mod command;
pub mod ledger;
mod server;
mod source;
pub mod tree;

pub use command::{plan, Plan, Style};
pub use server::{Error, Jobserver, Source};
pub use source::slot_source;
