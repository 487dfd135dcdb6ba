//! cpumgr's pure core: the machine's topology, CPU sets, the program model, the policy contract
//! with every policy of the papers, and the placer that turns CPU counts into CPU sets.
//!
//! Nothing here does I/O or reads a clock: the live manager and the simulator feed the same code
//! the same kind of inputs, and a policy cannot tell which world it runs in. Reading sysfs is done
//! by the caller, through a file-reading callback.

#![warn(missing_docs)]

pub mod cpuset;
mod free_map;
pub mod params;
pub mod placer;
pub mod policies;
pub mod policy;
pub mod program;
pub mod sources;
pub mod topology;
pub mod trace;

pub use cpuset::CpuSet;
pub use placer::Placer;
pub use policy::{Allocation, Decision, Policy, Rotation, SimHints, View};
pub use program::{Kind, Name, Nanos, Program, ProgramId, Request, SpeedupReport};
pub use topology::{Level, Topology};
