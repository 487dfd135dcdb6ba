//! The trace: one event stream that the live manager and the simulator both write, and that
//! metrics, reports, exports and `cpumgr top` read. Pure data here; writers live at the edges.
//!
//! On disk a trace is JSON lines: one [`Event`] per line, in time order, e.g.
//! `{"t":100000000,"program":3,"kind":"allocate","count":2,"cpus":"0-1","running":true}`.

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;
use crate::program::{Nanos, ProgramId};

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A trace header: the run's machine and settings; the first event of every trace.
    Start {
        /// Where the trace comes from (`live`, `sim`).
        source: String,
        /// Managed CPUs.
        cpus: CpuSet,
        /// The policy spec in force.
        policy: String,
        /// The quantum in nanoseconds.
        quantum: Nanos,
    },
    /// A program registered (or a job arrived).
    Arrive {
        /// Its name.
        name: String,
        /// CPUs it requested.
        request: u32,
    },
    /// A program changed its request.
    Request {
        /// CPUs it wants at present.
        #[serde(alias = "now")]
        wanted: u32,
    },
    /// The scheduler's decision for a program this quantum.
    Allocate {
        /// CPUs given.
        count: u32,
        /// Which.
        cpus: CpuSet,
        /// Whether it runs (time-sharing policies stop the others).
        running: bool,
    },
    /// A program reported a speedup measurement.
    Speedup {
        /// CPUs measured on.
        cpus: u32,
        /// Speedup against one CPU.
        speedup: f64,
    },
    /// How a program's team runs changed (what its runtime says in its slot): `serial`,
    /// `rigid` (a parallel team that must run whole: it spins, or is not judged yet), `folding`
    /// (a team that folds onto whatever it is given), `idle`.
    Team {
        /// How it runs.
        team: String,
        /// Its threads (0 when it does not say).
        threads: u32,
    },
    /// A program ended.
    Exit {
        /// Exit status (or 128 + signal); `None` when unknown.
        status: Option<i32>,
    },
    /// The active policy changed.
    Policy {
        /// The new policy spec.
        policy: String,
    },
    /// The quantum changed.
    Quantum {
        /// The new quantum in nanoseconds.
        quantum: Nanos,
    },
    /// The simulator's fast-forward jumped over whole periods of a repeating schedule: every
    /// program's allocations over the `period` nanoseconds before this event's time repeat from
    /// it until `until`, where the trace goes on (with the allocations in force at this event).
    /// The stops and resumes in between are not listed: a run of millions of quanta stays a few
    /// lines, and readers fold the span as a share of each program's time
    /// (`cpumgr_report::timeline`).
    Repeat {
        /// The schedule's period in nanoseconds.
        period: Nanos,
        /// When the repetition ends.
        until: Nanos,
    },
}

/// One trace event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When, in nanoseconds since the trace started.
    pub t: Nanos,
    /// The program concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramId>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}
