//! The program side of cpumgr (papers 000 §4, 001 and 003, summarised in docs/PAPERS.md): what a
//! runtime links to follow the manager's allocation.
//!
//! - [`Client`]: registers with the manager (or finds the registration `cpumgr run` made), maps
//!   the program's slot, and answers the one question a runtime asks before every parallel region
//!   — *how many threads now?* — with an atomic load. It also carries the program's side of the
//!   conversation: request, phase and team, speedup reports, the preemption ask.
//! - [`Pool`]: a malleable fork-join pool whose team follows the allocation region by region.
//! - [`llpc`]: the zero-infrastructure mode of paper 001, sizing each region from the system load
//!   when no manager runs.
//! - [`estimator`]: region timings turned into speedup reports for `pdpa` (SelfAnalyzer, paper
//!   000 §4.4).
//!
//! A program never fails because cpumgr is absent: with no manager the client says so once on
//! stderr and keeps the program's own thread count (or runs LLPC when `CPUMGR_MODE=llpc`).

#![warn(missing_docs)]

pub mod client;
pub mod estimator;
mod fork;
pub mod llpc;
mod managed;
pub mod pool;
mod rejoin;
pub mod say;

pub use client::{global, Client, Mode, Options};
pub use cpumgr_proto::slot::{monotonic_ns, Allocation, Phase};
pub use pool::Pool;
pub use say::say;
