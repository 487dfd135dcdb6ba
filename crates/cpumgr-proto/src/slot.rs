//! The slot: one small shared-memory segment per program (a memfd the manager creates and hands to
//! the program over the control socket, so no other process can open it by name).
//!
//! Every field has exactly one writer. The manager writes the header, the allocation (published
//! under a seqlock so a reader never sees a count from one quantum with CPUs from another), the
//! shrink request and its heartbeat; the program writes its request, phase, team size, heartbeat
//! and speedup reports. A reader validates every value before use ([`Slot::request`] clamps).

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// `b"CPUMGRSL"` as a little-endian integer: marks a cpumgr slot.
pub const MAGIC: u64 = u64::from_le_bytes(*b"CPUMGRSL");
/// The layout version; a client refuses a slot of another version.
pub const VERSION: u32 = 1;
/// CPUs a slot's CPU set can name (16 words of 64 bits).
pub const MAX_CPUS: usize = 1024;
/// Size of the segment: one page.
pub const SEGMENT_SIZE: usize = 4096;
/// `shrink_to` value meaning "no shrink requested".
pub const NO_SHRINK: u32 = u32::MAX;

/// The shared layout. `#[repr(C)]`, atomics only, so both sides may map it at any address.
#[repr(C)]
#[derive(Debug)]
pub struct Slot {
    /// [`MAGIC`] (manager, once).
    pub magic: AtomicU64,
    /// [`VERSION`] (manager, once).
    pub version: AtomicU32,
    /// The program's id in the manager (manager, once).
    pub program_id: AtomicU32,
    /// Seqlock over the allocation fields: odd while the manager writes them.
    pub seq: AtomicU64,
    /// CPUs allocated (manager).
    pub alloc_count: AtomicU32,
    /// 1 when the program may run this quantum, 0 when it is to wait (manager).
    pub alloc_running: AtomicU32,
    /// Increases with every published allocation (manager).
    pub alloc_epoch: AtomicU64,
    /// The allocated CPU set, CPU `i` at bit `i % 64` of word `i / 64` (manager).
    pub alloc_cpus: [AtomicU64; MAX_CPUS / 64],
    /// Shrink to this many threads at the next safe point, or [`NO_SHRINK`] (manager).
    pub shrink_to: AtomicU32,
    /// Reserved, zero.
    pub _pad0: AtomicU32,
    /// Manager heartbeat: milliseconds since the manager started, every quantum (manager).
    pub manager_heartbeat: AtomicU64,
    /// CPUs the program wants now (program).
    pub req_now: AtomicU32,
    /// Fewest CPUs it can run on (program).
    pub req_min: AtomicU32,
    /// Most CPUs it can use (program).
    pub req_max: AtomicU32,
    /// 0 serial, 1 inside a parallel region (program).
    pub phase: AtomicU32,
    /// Threads of the running team, 0 when unknown (program).
    pub team: AtomicU32,
    /// 1 once a runtime inside the program cooperates (reads the allocation, resizes) (program).
    pub cooperative: AtomicU32,
    /// Program heartbeat: increases while the runtime is alive (program).
    pub program_heartbeat: AtomicU64,
    /// CPUs of the newest speedup report (program).
    pub speedup_cpus: AtomicU32,
    /// Speedup of the newest report × 1000 (program).
    pub speedup_milli: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Slot>() <= SEGMENT_SIZE);

/// A consistent copy of the allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllocationView {
    /// CPUs allocated.
    pub count: u32,
    /// Whether the program may run.
    pub running: bool,
    /// Publication counter.
    pub epoch: u64,
    /// The CPU set's words.
    pub cpus: Vec<u64>,
}

/// A request read from a slot, clamped to sane values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestView {
    /// CPUs wanted now.
    pub now: u32,
    /// Fewest.
    pub min: u32,
    /// Most.
    pub max: u32,
}

impl Slot {
    /// Initialises a fresh (zeroed) slot for program `id` with an initial request.
    pub fn init(&self, id: u32, request: RequestView) {
        self.program_id.store(id, Ordering::Relaxed);
        self.shrink_to.store(NO_SHRINK, Ordering::Relaxed);
        self.req_now.store(request.now, Ordering::Relaxed);
        self.req_min.store(request.min, Ordering::Relaxed);
        self.req_max.store(request.max, Ordering::Relaxed);
        self.version.store(VERSION, Ordering::Relaxed);
        self.magic.store(MAGIC, Ordering::Release);
    }

    /// Whether the slot is a cpumgr slot of this layout version.
    pub fn is_valid(&self) -> bool {
        self.magic.load(Ordering::Acquire) == MAGIC && self.version.load(Ordering::Relaxed) == VERSION
    }

    /// Publishes an allocation (manager only).
    pub fn publish(&self, count: u32, running: bool, cpus: &[u64]) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.alloc_count.store(count, Ordering::Relaxed);
        self.alloc_running.store(running as u32, Ordering::Relaxed);
        for (i, w) in self.alloc_cpus.iter().enumerate() {
            w.store(cpus.get(i).copied().unwrap_or(0), Ordering::Relaxed);
        }
        self.alloc_epoch.fetch_add(1, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
    }

    /// The allocation count alone: one atomic load, what a runtime reads before each region.
    #[inline]
    pub fn count(&self) -> u32 {
        self.alloc_count.load(Ordering::Acquire)
    }

    /// A consistent copy of the whole allocation (retries while the manager writes).
    pub fn allocation(&self) -> AllocationView {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let v = AllocationView {
                count: self.alloc_count.load(Ordering::Relaxed),
                running: self.alloc_running.load(Ordering::Relaxed) != 0,
                epoch: self.alloc_epoch.load(Ordering::Relaxed),
                cpus: self.alloc_cpus.iter().map(|w| w.load(Ordering::Relaxed)).collect(),
            };
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return v;
            }
        }
    }

    /// The program's request, validated: every value clamped into `1..=cpus`, `min ≤ now ≤ max`.
    /// Returns the clamped request and whether anything had to be clamped (worth a log line).
    pub fn request(&self, cpus: u32) -> (RequestView, bool) {
        let raw = (self.req_now.load(Ordering::Relaxed), self.req_min.load(Ordering::Relaxed), self.req_max.load(Ordering::Relaxed));
        let cpus = cpus.max(1);
        let max = raw.2.clamp(1, cpus);
        let min = raw.1.clamp(1, max);
        let now = raw.0.clamp(min, max);
        let r = RequestView { now, min, max };
        (r, (now, min, max) != raw)
    }

    /// Sets the request (program only).
    pub fn set_request(&self, r: RequestView) {
        self.req_min.store(r.min, Ordering::Relaxed);
        self.req_max.store(r.max, Ordering::Relaxed);
        self.req_now.store(r.now, Ordering::Release);
    }

    /// The newest speedup report, if valid (finite, positive, on at least one CPU).
    pub fn speedup(&self) -> Option<(u32, f64)> {
        let cpus = self.speedup_cpus.load(Ordering::Relaxed);
        let s = self.speedup_milli.load(Ordering::Relaxed) as f64 / 1000.0;
        (cpus > 0 && s > 0.0 && s <= cpus as f64 * 4.0).then_some((cpus, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Box<Slot> {
        // SAFETY: every field is an atomic integer; all-zero is a valid value for each.
        unsafe { Box::new(std::mem::zeroed()) }
    }

    #[test]
    fn publishes_and_reads_consistently() {
        let s = fresh();
        assert!(!s.is_valid());
        s.init(7, RequestView { now: 4, min: 1, max: 8 });
        assert!(s.is_valid());
        s.publish(2, true, &[0b1010]);
        let a = s.allocation();
        assert_eq!((a.count, a.running, a.epoch, a.cpus[0]), (2, true, 1, 0b1010));
        assert_eq!(s.count(), 2);
        assert_eq!(s.seq.load(Ordering::Relaxed) % 2, 0);
    }

    #[test]
    fn layout_matches_the_protocol_document() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(Slot, seq), 16);
        assert_eq!(offset_of!(Slot, alloc_cpus), 40);
        assert_eq!(offset_of!(Slot, shrink_to), 168);
        assert_eq!(offset_of!(Slot, manager_heartbeat), 176);
        assert_eq!(offset_of!(Slot, req_now), 184);
        assert_eq!(offset_of!(Slot, cooperative), 204);
        assert_eq!(offset_of!(Slot, speedup_milli), 220);
    }

    #[test]
    fn absurd_requests_are_clamped() {
        let s = fresh();
        s.init(1, RequestView { now: 1_000_000_000, min: 0, max: u32::MAX });
        let (r, clamped) = s.request(8);
        assert_eq!(r, RequestView { now: 8, min: 1, max: 8 });
        assert!(clamped);
        s.set_request(RequestView { now: 1, min: 5, max: 2 });
        assert_eq!(s.request(8).0, RequestView { now: 2, min: 2, max: 2 });
        s.speedup_cpus.store(2, Ordering::Relaxed);
        s.speedup_milli.store(u32::MAX, Ordering::Relaxed);
        assert_eq!(s.speedup(), None, "a speedup of 4 million on 2 CPUs is a lie");
    }
}
