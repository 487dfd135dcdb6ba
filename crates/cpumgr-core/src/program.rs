//! The program model: what the scheduler knows about each program it manages.
//!
//! The live manager fills these from shared-memory slots and `/proc`; the simulator fills them
//! from its job models. Policies read them through a [`crate::policy::View`] and never learn which
//! world they came from.

use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;

/// Time in nanoseconds since the scheduler started. The core reads no clock: the caller passes
/// the time in, which keeps every decision reproducible.
pub type Nanos = u64;

/// Nanoseconds per second.
pub const NANOS_PER_SEC: Nanos = 1_000_000_000;

/// Nanoseconds per millisecond.
pub const NANOS_PER_MS: Nanos = 1_000_000;

/// A program's identity, unique for the scheduler's lifetime and increasing with registration,
/// so ordering by id is ordering by arrival.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProgramId(pub u64);

/// How a program's parallelism can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "procs")]
pub enum Kind {
    /// Can change its thread count at run time (at parallel-region boundaries).
    Malleable,
    /// Chooses its thread count at start and keeps it.
    Moldable,
    /// A fixed number of processes or threads, all of which run at once (an MPI job).
    Rigid(u32),
    /// Changes its request by itself over time (paper 000's EPD and ltomcatv).
    Evolving,
}

impl Kind {
    /// The fixed number of processes of a rigid program.
    pub fn rigid_procs(self) -> Option<u32> {
        match self {
            Kind::Rigid(n) => Some(n),
            _ => None,
        }
    }

    /// Whether the program adapts its team when its allocation changes.
    pub fn adapts(self) -> bool {
        matches!(self, Kind::Malleable | Kind::Evolving)
    }
}

/// How many CPUs a program wants: at present, and the bounds it can work within.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// CPUs wanted at present (changes between serial and parallel phases).
    #[serde(alias = "now")]
    pub wanted: u32,
    /// Fewest CPUs the program can run on.
    pub min: u32,
    /// Most CPUs the program can use.
    pub max: u32,
}

impl Request {
    /// A request for exactly `n` CPUs at present, able to run on 1 to `n`.
    pub fn upto(n: u32) -> Self {
        Request { wanted: n, min: 1.min(n), max: n }
    }
}

/// One speedup measurement: running on `cpus` CPUs, the program ran `speedup` times as fast as on
/// one (paper 000's SelfAnalyzer reports these; PDPA uses them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedupReport {
    /// CPUs the measurement was taken on: at least one (a program on none measured nothing). Not
    /// zero, so that an absent report costs no flag of its own: a [`Program`] is 128 bytes, which
    /// the simulator moves as its program list loses finished programs at every quantum.
    pub cpus: NonZeroU32,
    /// Measured speedup against one CPU.
    pub speedup: f64,
}

impl SpeedupReport {
    /// A measurement of `speedup` on `cpus` CPUs; none on 0 CPUs.
    pub fn new(cpus: u32, speedup: f64) -> Option<SpeedupReport> {
        Some(SpeedupReport { cpus: NonZeroU32::new(cpus)?, speedup })
    }

    /// Efficiency: speedup per CPU.
    pub fn efficiency(&self) -> f64 {
        self.speedup / self.cpus.get() as f64
    }
}

/// A program's or job's name: a string kept in place up to 24 bytes (a command's name, a trace's
/// job number, a generated job's `g123`) and on the heap beyond, so that the simulator's jobs,
/// which each carry one through the view and into their records, allocate nothing for it.
pub type Name = compact_str::CompactString;

/// What the scheduler knows about one program at the start of a quantum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// Identity, increasing with arrival.
    pub id: ProgramId,
    /// A human name (command or workload name).
    pub name: Name,
    /// How its parallelism can change.
    pub kind: Kind,
    /// What it wants.
    pub request: Request,
    /// Relative share under weighted policies; 1.0 is the norm.
    pub weight: f64,
    /// When it registered.
    pub arrival: Nanos,
    /// CPU time received so far, in CPU-nanoseconds.
    pub cpu_time: Nanos,
    /// The newest speedup measurement, if the program reports any.
    pub speedup: Option<SpeedupReport>,
    /// The CPUs it last ran on (its home for affinity); empty before it first runs.
    pub cpus: CpuSet,
    /// Whether it ran in the last quantum.
    pub running: bool,
    /// Its live thread count (from `/proc` or its runtime), when known: the team the manager must
    /// never squeeze onto fewer CPUs.
    pub threads: Option<u32>,
}

// The simulator moves programs as its list loses finished ones, at every quantum: a copy of
// up to 128 bytes is inlined, and a larger one is a call (see `SpeedupReport::cpus`).
const _: () = assert!(std::mem::size_of::<Program>() <= 128);

impl Program {
    /// A malleable program wanting `request` CPUs, with defaults for everything else.
    pub fn new(id: u64, name: impl Into<Name>, request: u32) -> Self {
        Program {
            id: ProgramId(id),
            name: name.into(),
            kind: Kind::Malleable,
            request: Request::upto(request),
            weight: 1.0,
            arrival: 0,
            cpu_time: 0,
            speedup: None,
            cpus: CpuSet::new(),
            running: false,
            threads: None,
        }
    }

    /// The request a policy should work from: `wanted` clamped into `[min, max]`, and a rigid
    /// program's process count.
    pub fn wants(&self) -> u32 {
        match self.kind {
            Kind::Rigid(n) => n,
            _ => self.request.wanted.clamp(self.request.min, self.request.max.max(self.request.min)),
        }
    }
}
