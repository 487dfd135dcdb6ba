//! The allocation as a build's supervisor sees it: the program's slot.

use std::time::Duration;

use cpumgr_proto::slot::{monotonic_ns, Phase};
use cpumgr_proto::Segment;

use crate::server::Source;

/// The program's slot as the jobserver's [`Source`].
struct SlotSource {
    segment: Segment,
    frozen_after: Duration,
}

/// A source reading the CPU count the manager publishes in `segment`: 1 until the first
/// publication (the build waits for the manager's decision on its implicit job), `None` once
/// the manager has not renewed the slot's lease for `frozen_after` (no manager: the build is
/// unmanaged and gets its unmanaged share).
///
/// It tells the manager the build *folds* ([`Phase::Folding`], its jobs as the team): a build's
/// jobs never wait for each other, so it runs on any allocation and is never run as a gang;
/// a shrink is enforced at once, and the jobs it no longer allows end on the CPUs left.
pub fn slot_source(segment: Segment, frozen_after: Duration) -> Box<dyn Source> {
    Box::new(SlotSource { segment, frozen_after })
}

impl Source for SlotSource {
    fn cpus(&mut self) -> Option<u32> {
        let slot = self.segment.slot();
        let lease = slot.lease_until();
        if lease != 0 && monotonic_ns() > lease.saturating_add(self.frozen_after.as_nanos() as u64) {
            return None;
        }
        Some(slot.allocation().map_or(1, |a| a.count))
    }

    fn report(&mut self, jobs: u32) {
        self.segment.slot().set_phase(Phase::Folding, jobs, monotonic_ns());
    }
}
