//! cpumgr's simulator: the *same* [`cpumgr_core::Policy`] and [`cpumgr_core::Placer`] code as the
//! live manager, run against modelled jobs on a modelled machine by a discrete-event engine.
//!
//! - [`speedup`]: how fast a phase runs on `p` CPUs (Amdahl, Downey, measured table);
//! - [`job`]: jobs (malleable, moldable, rigid, evolving) made of phases, EPD and ltomcatv patterns;
//! - [`mod@bench`]: CPU time and peak memory, for the benchmarks' figures;
//! - [`cost`]: the documented cost-of-sharing model (oversubscription, CPU moves, resumed gangs);
//! - [`limits`]: the largest machine, time and quantum the simulator accepts;
//! - [`engine`]: the event loop that builds the policy's `View` exactly as the live manager does;
//!   the unmanaged `os` baseline runs as processor sharing on virtual clocks (`sharing.rs`);
//! - [`metrics`]: per-job and per-run figures, streamed so memory stays flat in finished jobs;
//! - [`workload`], [`swf`], [`generate`], [`presets`]: where jobs come from.
//!
//! Everything is deterministic: ties are broken by time then job id, and randomness comes only
//! from seeded generators.

#![warn(missing_docs)]

pub mod bench;
pub mod cost;
pub mod engine;
pub mod error;
mod feed;
pub mod generate;
pub mod job;
pub mod limits;
mod list;
pub mod metrics;
pub mod presets;
mod sharing;
mod slots;
pub mod speedup;
pub mod swf;
mod tally;
pub mod workload;

pub use cost::CostModel;
pub use engine::{run, Observer, SimConfig, SimError};
pub use error::InputError;
pub use job::{JobSpec, Phase, Phases};
pub use metrics::{JobRecord, RunSummary};
pub use speedup::SpeedupModel;
pub use workload::Workload;
