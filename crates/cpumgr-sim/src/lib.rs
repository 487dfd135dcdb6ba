//! cpumgr's simulator: the policies ([`cpumgr_core::Policy`], with the simulator's hints,
//! [`cpumgr_core::SimHints`]) and the [`cpumgr_core::Placer`] the live manager runs, on modelled
//! jobs on a modelled machine, by a discrete-event engine; and a cluster of such machines under a
//! batch scheduler.
//!
//! - [`run()`]: the entry point, which hands a run to the engine that models its policy: the
//!   managed engine (`engine/`, which builds the policy's `View` as the live manager does) or, for
//!   the unmanaged `os` baseline, processor sharing on virtual clocks (`sharing.rs`); [`config`],
//!   [`observer`] and [`error`] are what a caller gives and gets;
//! - [`speedup`]: how fast a phase runs on `p` CPUs (Amdahl, Downey, measured table);
//! - [`job`]: jobs (malleable, moldable, rigid, evolving) made of phases, EPD and ltomcatv patterns;
//! - [`cost`]: the documented cost-of-sharing model (oversubscription, CPU moves, resumed gangs);
//! - [`limits`]: the largest machine, time and quantum the simulator accepts;
//! - [`metrics`]: per-job and per-run figures, streamed so memory stays flat in finished jobs;
//! - [`workload`], [`swf`], [`generate`], [`presets`]: where jobs come from;
//! - [`cluster`]: nodes under a batch scheduler (FCFS, EASY), whole or shared under a policy;
//! - [`mod@bench`]: CPU time and peak memory, for the benchmarks' figures.
//!
//! Everything is deterministic: ties are broken by time then job id, and randomness comes only
//! from seeded generators.

#![warn(missing_docs)]

pub mod bench;
pub mod cluster;
pub mod config;
pub mod cost;
mod engine;
pub mod error;
mod feed;
pub mod generate;
pub mod job;
pub mod limits;
mod list;
pub mod metrics;
pub mod observer;
pub mod presets;
mod run;
mod sharing;
mod slots;
pub mod speedup;
pub mod swf;
mod tally;
pub mod workload;

pub use config::SimConfig;
pub use cost::CostModel;
pub use error::{InputError, SimError};
pub use job::{JobSpec, Phase, Phases};
pub use metrics::{JobRecord, RunSummary};
pub use observer::Observer;
pub use run::run;
pub use speedup::SpeedupModel;
pub use workload::Workload;
