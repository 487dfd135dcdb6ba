//! What a run tells its caller as it goes: trace events and finished jobs, and whether to stop.

use cpumgr_core::trace::Event;

use crate::metrics::JobRecord;

/// Receives what a run produces as it happens: trace events and finished jobs.
pub trait Observer {
    /// Whether to build trace events at all (building them costs time).
    fn wants_events(&self) -> bool {
        false
    }

    /// One trace event, in time order.
    fn event(&mut self, _event: &Event) {}

    /// One finished job.
    fn job(&mut self, _record: &JobRecord) {}

    /// Whether the run should stop now (asked at every scheduler step): a caller whose policy
    /// failed, or whose user gave up, ends the run with [`crate::SimError::Stopped`] instead of letting
    /// it go on.
    fn stop(&self) -> bool {
        false
    }
}

impl Observer for () {}
