//! The allocation as a build's supervisor sees it: the program's slot.

use std::time::Duration;

use cpumgr_proto::slot::monotonic_ns;
use cpumgr_proto::Segment;

use crate::server::Source;

/// A source reading the CPU count the manager publishes in `segment`: 1 until the first
/// publication (the build waits for the manager's decision on its implicit job), `None` once
/// the manager has not renewed the slot's lease for `frozen_after` (no manager: the build is
/// unmanaged and gets its unmanaged share).
pub fn slot_source(segment: Segment, frozen_after: Duration) -> Source {
    Box::new(move || {
        let slot = segment.slot();
        let lease = slot.lease_until();
        if lease != 0 && monotonic_ns() > lease.saturating_add(frozen_after.as_nanos() as u64) {
            return None;
        }
        Some(slot.allocation().map_or(1, |a| a.count))
    })
}
