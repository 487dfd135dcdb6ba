//! The crate's errors: bad input in a workload or trace file ([`InputError`]: always names the
//! file, the line and the field), and a run that cannot finish ([`SimError`]).

use cpumgr_core::placer::PlacementError;

/// A workload file, SWF trace or preset that cannot be used, located at `file:line` and naming
/// the offending `field`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: field `{field}`: {message}")]
pub struct InputError {
    /// The file (or `preset:NAME`, `generator`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// An error at `file:line` in `field`.
    pub fn new(file: impl Into<String>, line: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        InputError { file: file.into(), line, field: field.into(), message: message.into() }
    }
}

/// Why a run could not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The policy gives no job any CPU and nothing else can happen.
    #[error("at t = {at:.3} s the policy gives none of the {jobs} jobs in the system a CPU it can progress on and no job can arrive: the run would never end")]
    Starved {
        /// Simulated time, seconds.
        at: f64,
        /// Jobs in the system.
        jobs: usize,
    },
    /// The placer broke an invariant (a bug in the policy or the placer).
    #[error("at t = {at:.3} s the placement is invalid: {error}")]
    Placement {
        /// Simulated time, seconds.
        at: f64,
        /// What broke.
        error: PlacementError,
    },
    /// Simulated time passed [`crate::limits::HORIZON`]: some job's work is far too large for
    /// the share it gets, or the backlog grows faster than the machine drains it (`os` at a high
    /// load: each job more it runs beside slows every other through the cost of
    /// oversubscription).
    #[error("at t = {at:.3e} s the run passed the simulator's horizon with {jobs} jobs unfinished: their work is too large for the shares they get (one job far too large for its share, or a backlog that grows faster than the machine drains it, as under os when oversubscription's cost outgrows the spare capacity)")]
    Horizon {
        /// Simulated time, seconds.
        at: f64,
        /// Jobs in the system.
        jobs: usize,
    },
    /// The observer asked the run to stop ([`crate::Observer::stop`]).
    #[error("at t = {at:.3} s the run was stopped")]
    Stopped {
        /// Simulated time, seconds.
        at: f64,
    },
    /// A job cannot run on this machine.
    #[error("job {name:?}: field `{field}`: {message}")]
    Job {
        /// The job.
        name: String,
        /// The field at fault.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}
