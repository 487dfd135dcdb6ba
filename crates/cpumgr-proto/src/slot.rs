//! The shared-memory slot: one small segment per program, shared by the program and the manager.
//!
//! Every field has exactly one writer. The program writes its [`ProgramFields`] (request, phase,
//! team size, heartbeat, speedup reports); the manager writes the [`Header`] once at creation and
//! its [`ManagerFields`] every quantum (allocation, preemption request, heartbeat, lease).
//! Multi-word values (the request triple, the speedup pair, the allocation) are read consistently
//! through a seqlock: the writer makes the sequence odd, stores, and makes it even again; a reader
//! retries while it sees an odd or changed sequence, a bounded number of times, so a program that
//! leaves its sequence odd forever only makes its own values unreadable.
//!
//! Every value read from a slot is untrusted: [`validate_request`] and [`validate_speedup`] clamp
//! or drop absurd values (a request of 10⁹ CPUs, a NaN or negative speedup) before the scheduler
//! sees them. The byte layout is documented in `docs/PROTOCOL.md`.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use cpumgr_core::{CpuSet, Request, SpeedupReport};

/// `CPUMGRS1` in little-endian bytes: the first word of every slot.
pub const MAGIC: u64 = u64::from_le_bytes(*b"CPUMGRS1");

/// The layout version; bumped on any incompatible change to [`Slot`].
pub const LAYOUT_VERSION: u32 = 2;

/// Words of the allocation's CPU set: 16 × 64 = 1024 CPUs.
pub const CPU_WORDS: usize = 16;

/// The most CPUs a slot's allocation can name.
pub const MAX_CPUS: u32 = (CPU_WORDS * 64) as u32;

/// Bytes of one slot segment (one page).
pub const SLOT_BYTES: usize = 4096;

/// How many times a seqlock reader retries before it gives up on a value this time.
pub const SEQLOCK_RETRIES: u32 = 64;

/// [`ManagerFields::preempt_to`] when the manager asks for nothing.
pub const NO_PREEMPT: u32 = u32::MAX;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of heartbeats and leases in slots (a vDSO call,
/// no system call).
#[inline]
pub fn monotonic_ns() -> u64 {
    let ts =
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap_or(nix::sys::time::TimeSpec::new(0, 0));
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// What a program says it is doing, in [`ProgramFields::phase`].
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// It does not say.
    Unknown = 0,
    /// Only its master thread works (between parallel regions): once this has lasted a quantum,
    /// the manager counts its request as 1 CPU until the next region.
    Serial = 1,
    /// Inside a parallel region with the team in [`ProgramFields::team`].
    Parallel = 2,
    /// Nothing to do; its CPUs may go to others.
    Idle = 3,
    /// Inside a parallel region whose team of [`ProgramFields::team`] threads folds onto whatever
    /// it is allocated: its threads wait for each other cooperatively (one that shares a CPU with
    /// its team sleeps at a barrier instead of spinning), so it runs on any allocation of at least
    /// one CPU and spreads out again when CPUs come back. The manager gangs it only when its
    /// [`ProgramFields::fold_cost`] says folding costs more than a gang.
    Folding = 4,
}

impl Phase {
    /// The phase a raw slot value names; anything unknown is [`Phase::Unknown`].
    pub fn from_raw(v: u32) -> Phase {
        match v {
            1 => Phase::Serial,
            2 => Phase::Parallel,
            3 => Phase::Idle,
            4 => Phase::Folding,
            _ => Phase::Unknown,
        }
    }
}

/// Written once by the manager when it creates the segment; read by the program to check it maps
/// a slot it understands.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: AtomicU64,
    /// [`LAYOUT_VERSION`].
    pub version: AtomicU32,
    /// `size_of::<Slot>()` as the manager built it.
    pub size: AtomicU32,
    /// The program's id in the manager.
    pub program_id: AtomicU64,
}

/// Written only by the program.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct ProgramFields {
    /// Seqlock of the request triple; 0 until the program first writes a request (the manager then
    /// uses the request given at registration).
    pub request_seq: AtomicU64,
    /// CPUs wanted at present.
    pub request_wanted: AtomicU32,
    /// Fewest CPUs the program can run on.
    pub request_min: AtomicU32,
    /// Most CPUs the program can use.
    pub request_max: AtomicU32,
    /// What the program is doing: 0 unknown, 1 serial, 2 parallel, 3 idle, 4 folding.
    pub phase: AtomicU32,
    /// Threads the program's runtime runs now (its team); 0 when it does not say.
    pub team: AtomicU32,
    /// A folding team's measured cost of folding: the CPU time its threads take per barrier
    /// folded, per mille of what they take unfolded (1500: half again); 0 when not measured.
    /// In what was padding: a manager that does not read it is unaffected.
    pub fold_cost: AtomicU32,
    /// The program's last sign of life, `CLOCK_MONOTONIC` nanoseconds; 0 when it never beats.
    pub heartbeat: AtomicU64,
    /// Seqlock of the speedup pair; 0 until the first report.
    pub speedup_seq: AtomicU64,
    /// CPUs the newest speedup was measured on.
    pub speedup_cpus: AtomicU32,
    /// The newest speedup, as `f64` bits.
    pub speedup_bits: AtomicU64,
}

/// Written only by the manager.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct ManagerFields {
    /// Seqlock of the allocation (epoch, count, running, CPU words).
    pub alloc_seq: AtomicU64,
    /// Increases with every published allocation.
    pub alloc_epoch: AtomicU64,
    /// CPUs allocated.
    pub alloc_count: AtomicU32,
    /// 1 when the program runs this quantum, 0 when it is stopped (time sharing).
    pub alloc_running: AtomicU32,
    /// The allocated CPU set, bit `c % 64` of word `c / 64` for CPU `c`.
    pub alloc_cpus: [AtomicU64; CPU_WORDS],
    /// "Shrink to N threads at your next safe point"; [`NO_PREEMPT`] when nothing is asked.
    pub preempt_to: AtomicU32,
    /// Words of [`ManagerFields::alloc_cpus`] the allocation spans (under the allocation's
    /// seqlock): a reader copies only these, one word on a machine of up to 64 CPUs.
    pub alloc_words: AtomicU32,
    /// When the manager's last step started, `CLOCK_MONOTONIC` nanoseconds.
    pub heartbeat: AtomicU64,
    /// Until when the allocation holds, `CLOCK_MONOTONIC` nanoseconds: past it, a cooperative
    /// runtime treats the manager as gone and falls back to its own default team.
    pub lease_until: AtomicU64,
}

/// One program's slot. `#[repr(C)]`, atomics only, so any bit pattern another process writes is
/// a valid value, and the layout is the same for every language that maps it.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Slot {
    /// Manager-written once.
    pub header: Header,
    /// Program-written.
    pub program: ProgramFields,
    /// Manager-written.
    pub manager: ManagerFields,
}

const _: () = assert!(std::mem::size_of::<Slot>() <= SLOT_BYTES);

/// A CPU set of at most [`MAX_CPUS`] CPUs held inline (no heap): what a program reads from its
/// slot on its hot path. Bit `c % 64` of word `c / 64` is CPU `c`, as in [`CpuSet::as_words`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuWords {
    words: [u64; CPU_WORDS],
    /// Words in use: every word from here on is 0.
    len: u8,
}

impl CpuWords {
    /// The set whose first words are `words` (at most [`CPU_WORDS`] are kept).
    pub fn from_words(words: &[u64]) -> CpuWords {
        let mut w = CpuWords::default();
        let n = words.len().min(CPU_WORDS);
        w.words[..n].copy_from_slice(&words[..n]);
        w.len = n as u8;
        w.trim();
        w
    }

    fn trim(&mut self) {
        while self.len > 0 && self.words[self.len as usize - 1] == 0 {
            self.len -= 1;
        }
    }

    /// The words in use, without trailing zero words (the layout of [`CpuSet::as_words`]).
    pub fn as_words(&self) -> &[u64] {
        &self.words[..self.len as usize]
    }

    /// Whether CPU `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.words.get(cpu as usize / 64).is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }

    /// How many CPUs the set holds.
    pub fn len(&self) -> usize {
        self.as_words().iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.as_words()
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| (0..64u32).filter(move |b| w & (1 << b) != 0).map(move |b| i as u32 * 64 + b))
    }

    /// The same set as a [`CpuSet`] (allocates; for the manager's and tools' side).
    pub fn to_cpuset(&self) -> CpuSet {
        CpuSet::from_words(self.as_words())
    }
}

impl From<&CpuSet> for CpuWords {
    fn from(s: &CpuSet) -> CpuWords {
        CpuWords::from_words(s.as_words())
    }
}

/// A consistent copy of the manager's allocation: plain data, no heap, so reading it costs a few
/// loads (see `cargo bench -p cpumgr-proto --bench slot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allocation {
    /// Increases with every publication.
    pub epoch: u64,
    /// CPUs allocated.
    pub count: u32,
    /// Whether the program runs this quantum.
    pub running: bool,
    /// Which CPUs.
    pub cpus: CpuWords,
}

/// A request as the program wrote it, before validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRequest {
    /// CPUs wanted at present.
    pub wanted: u32,
    /// Fewest.
    pub min: u32,
    /// Most.
    pub max: u32,
}

/// A speedup report as the program wrote it, before validation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawSpeedup {
    /// CPUs measured on.
    pub cpus: u32,
    /// Measured speedup.
    pub speedup: f64,
}

/// Writes a multi-word value under a seqlock. One writer per sequence, by construction.
fn seq_write(seq: &AtomicU64, store: impl FnOnce()) {
    let s = seq.load(Ordering::Relaxed);
    // Odd: a write is in progress.
    seq.store(s.wrapping_add(1) | 1, Ordering::Relaxed);
    fence(Ordering::Release);
    store();
    seq.store((s | 1).wrapping_add(1), Ordering::Release);
}

/// Reads a multi-word value under a seqlock: `None` when the writer never wrote (sequence 0) or
/// kept it inconsistent for [`SEQLOCK_RETRIES`] tries.
#[inline]
fn seq_read<T>(seq: &AtomicU64, mut load: impl FnMut() -> T) -> Option<T> {
    for _ in 0..SEQLOCK_RETRIES {
        let s1 = seq.load(Ordering::Acquire);
        if s1 == 0 {
            return None;
        }
        if s1 & 1 == 1 {
            std::hint::spin_loop();
            continue;
        }
        let value = load();
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) == s1 {
            return Some(value);
        }
    }
    None
}

impl Slot {
    /// Fills the header (manager, once, before the segment is handed out).
    pub fn init(&self, program_id: u64) {
        self.header.program_id.store(program_id, Ordering::Relaxed);
        self.header.size.store(std::mem::size_of::<Slot>() as u32, Ordering::Relaxed);
        self.header.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        self.manager.preempt_to.store(NO_PREEMPT, Ordering::Relaxed);
        self.header.magic.store(MAGIC, Ordering::Release);
    }

    /// Checks that the header is one this code understands (program, after mapping).
    pub fn check_header(&self) -> Result<(), crate::SlotError> {
        let magic = self.header.magic.load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(crate::SlotError::Magic(magic));
        }
        let version = self.header.version.load(Ordering::Relaxed);
        if version != LAYOUT_VERSION {
            return Err(crate::SlotError::Version { found: version, expected: LAYOUT_VERSION });
        }
        let size = self.header.size.load(Ordering::Relaxed) as usize;
        if size != std::mem::size_of::<Slot>() {
            return Err(crate::SlotError::Size { found: size, expected: std::mem::size_of::<Slot>() });
        }
        Ok(())
    }

    // ---- program side -------------------------------------------------------------------

    /// Writes the request triple (program).
    pub fn set_request(&self, wanted: u32, min: u32, max: u32) {
        let p = &self.program;
        seq_write(&p.request_seq, || {
            p.request_wanted.store(wanted, Ordering::Relaxed);
            p.request_min.store(min, Ordering::Relaxed);
            p.request_max.store(max, Ordering::Relaxed);
        });
    }

    /// Writes a speedup report (program).
    pub fn report_speedup(&self, cpus: u32, speedup: f64) {
        let p = &self.program;
        seq_write(&p.speedup_seq, || {
            p.speedup_cpus.store(cpus, Ordering::Relaxed);
            p.speedup_bits.store(speedup.to_bits(), Ordering::Relaxed);
        });
    }

    /// Writes the team size and a heartbeat (program).
    pub fn set_team(&self, team: u32, now_ns: u64) {
        self.program.team.store(team, Ordering::Relaxed);
        self.program.heartbeat.store(now_ns, Ordering::Release);
    }

    /// Writes the measured cost of folding its team, per mille (program; see
    /// [`ProgramFields::fold_cost`]).
    pub fn set_fold_cost(&self, permille: u32) {
        self.program.fold_cost.store(permille, Ordering::Relaxed);
    }

    /// The cost of folding the program's team, per mille; 0 when not measured (manager).
    pub fn raw_fold_cost(&self) -> u32 {
        self.program.fold_cost.load(Ordering::Relaxed)
    }

    /// Writes the phase, the team running it and a heartbeat (program): what a runtime does at
    /// every region boundary, three stores and no system call.
    #[inline]
    pub fn set_phase(&self, phase: Phase, team: u32, now_ns: u64) {
        self.program.phase.store(phase as u32, Ordering::Relaxed);
        self.set_team(team, now_ns);
    }

    /// Reads the allocation consistently (program); `None` before the first publication or while
    /// the manager keeps its sequence inconsistent for [`SEQLOCK_RETRIES`] tries. A runtime that
    /// reads it often keeps one [`Allocation`] and uses [`Slot::read_allocation`] instead: moving
    /// this 152-byte value costs more than reading it.
    #[inline]
    pub fn allocation(&self) -> Option<Allocation> {
        let mut out = Allocation::default();
        self.read_allocation(&mut out).then_some(out)
    }

    /// Reads the allocation consistently into `out` (program), copying only the words the
    /// allocation spans ([`ManagerFields::alloc_words`]: one on a machine of up to 64 CPUs) and
    /// clearing only those `out` held beyond them: no heap, no system call. False (and `out` left
    /// holding no consistent value) before the first publication or while the manager keeps its
    /// sequence inconsistent for [`SEQLOCK_RETRIES`] tries.
    #[inline]
    pub fn read_allocation(&self, out: &mut Allocation) -> bool {
        let m = &self.manager;
        let read = seq_read(&m.alloc_seq, || {
            out.epoch = m.alloc_epoch.load(Ordering::Relaxed);
            out.count = m.alloc_count.load(Ordering::Relaxed);
            out.running = m.alloc_running.load(Ordering::Relaxed) != 0;
            // Untrusted like every slot value: never more words than the slot has.
            let n = (m.alloc_words.load(Ordering::Relaxed) as usize).min(CPU_WORDS);
            for (w, a) in out.cpus.words[..n].iter_mut().zip(&m.alloc_cpus) {
                *w = a.load(Ordering::Relaxed);
            }
            let held = (out.cpus.len as usize).max(n);
            out.cpus.words[n..held].fill(0);
            out.cpus.len = n as u8;
        });
        out.cpus.trim();
        read.is_some()
    }

    /// The allocated CPU count alone, one relaxed load: what a runtime reads before each parallel
    /// region. It may be one publication newer than a concurrent [`Slot::allocation`].
    #[inline]
    pub fn allocated_count(&self) -> u32 {
        self.manager.alloc_count.load(Ordering::Relaxed)
    }

    // ---- manager side -------------------------------------------------------------------

    /// Publishes an allocation (manager). CPUs at or above [`MAX_CPUS`] are not representable
    /// and are left out of the words (the count still says how many).
    pub fn publish(&self, epoch: u64, count: u32, running: bool, cpus: &CpuSet) {
        let m = &self.manager;
        let words = cpus.as_words();
        seq_write(&m.alloc_seq, || {
            m.alloc_epoch.store(epoch, Ordering::Relaxed);
            m.alloc_count.store(count, Ordering::Relaxed);
            m.alloc_running.store(running as u32, Ordering::Relaxed);
            m.alloc_words.store(words.len().min(CPU_WORDS) as u32, Ordering::Relaxed);
            for (i, a) in m.alloc_cpus.iter().enumerate() {
                a.store(words.get(i).copied().unwrap_or(0), Ordering::Relaxed);
            }
        });
    }

    /// Asks the program to shrink to `threads` at its next safe point, or withdraws the ask with
    /// [`NO_PREEMPT`] (manager).
    pub fn set_preempt(&self, threads: u32) {
        self.manager.preempt_to.store(threads, Ordering::Release);
    }

    /// Writes the manager's heartbeat and lease (manager).
    pub fn beat(&self, now_ns: u64, lease_until_ns: u64) {
        self.manager.heartbeat.store(now_ns, Ordering::Relaxed);
        self.manager.lease_until.store(lease_until_ns, Ordering::Release);
    }

    /// The raw request (manager); `None` when the program never wrote one or keeps its seqlock
    /// inconsistent.
    pub fn raw_request(&self) -> Option<RawRequest> {
        let p = &self.program;
        seq_read(&p.request_seq, || RawRequest {
            wanted: p.request_wanted.load(Ordering::Relaxed),
            min: p.request_min.load(Ordering::Relaxed),
            max: p.request_max.load(Ordering::Relaxed),
        })
    }

    /// The raw newest speedup report (manager).
    pub fn raw_speedup(&self) -> Option<RawSpeedup> {
        let p = &self.program;
        seq_read(&p.speedup_seq, || RawSpeedup {
            cpus: p.speedup_cpus.load(Ordering::Relaxed),
            speedup: f64::from_bits(p.speedup_bits.load(Ordering::Relaxed)),
        })
    }

    /// The team size the program reports (manager); 0 when it says nothing.
    pub fn raw_team(&self) -> u32 {
        self.program.team.load(Ordering::Relaxed)
    }

    /// The program's last heartbeat (manager).
    pub fn raw_heartbeat(&self) -> u64 {
        self.program.heartbeat.load(Ordering::Acquire)
    }

    /// The phase the program says it is in (manager, or the program reading its own).
    pub fn raw_phase(&self) -> Phase {
        Phase::from_raw(self.program.phase.load(Ordering::Relaxed))
    }

    /// The preemption ask: `Some(n)` when the manager wants the program down to `n` threads.
    #[inline]
    pub fn preempt_to(&self) -> Option<u32> {
        Some(self.manager.preempt_to.load(Ordering::Acquire)).filter(|&n| n != NO_PREEMPT)
    }

    /// Until when the published allocation holds, `CLOCK_MONOTONIC` ns; 0 once the manager let go.
    #[inline]
    pub fn lease_until(&self) -> u64 {
        self.manager.lease_until.load(Ordering::Acquire)
    }
}

/// What validation changed in a value read from a slot, for the log line.
#[derive(Debug, Clone, PartialEq)]
pub enum Clamp {
    /// A count above the managed CPUs was lowered.
    Request {
        /// The field (`wanted`, `min`, `max`).
        field: &'static str,
        /// What the program wrote.
        from: u32,
        /// What is used.
        to: u32,
    },
    /// A speedup report was dropped (NaN, infinite, negative, or on 0 or too many CPUs).
    SpeedupDropped(RawSpeedup),
    /// A superlinear speedup was lowered to its CPU count.
    SpeedupCapped {
        /// What the program wrote.
        from: f64,
        /// What is used.
        to: f64,
    },
}

impl std::fmt::Display for Clamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Clamp::Request { field, from, to } => write!(f, "request.{field} {from} clamped to {to}"),
            Clamp::SpeedupDropped(r) => write!(f, "speedup {} on {} CPUs dropped", r.speedup, r.cpus),
            Clamp::SpeedupCapped { from, to } => write!(f, "speedup {from} capped to {to}"),
        }
    }
}

/// Makes a raw request usable on `cpus` managed CPUs: every count at most `cpus`, `max` at least
/// 1, `min` at most `max`, `wanted` at most `max` (0 is allowed: the program is idle). Returns the
/// request and what was changed.
pub fn validate_request(raw: RawRequest, cpus: u32, clamps: &mut Vec<Clamp>) -> Request {
    let cpus = cpus.max(1);
    let mut clamp = |field: &'static str, v: u32, hi: u32, lo: u32| {
        let to = v.clamp(lo, hi.max(lo));
        if to != v {
            clamps.push(Clamp::Request { field, from: v, to });
        }
        to
    };
    let max = clamp("max", raw.max, cpus, 1);
    let min = clamp("min", raw.min, max, 0);
    let wanted = clamp("wanted", raw.wanted, max, 0);
    Request { wanted, min, max }
}

/// Makes a raw speedup report usable on `cpus` managed CPUs: dropped when not finite, negative,
/// or measured on 0 or more than `cpus` CPUs; a speedup above its CPU count is capped to it (a
/// program that claims superlinear speedup gains nothing by it).
pub fn validate_speedup(raw: RawSpeedup, cpus: u32, clamps: &mut Vec<Clamp>) -> Option<SpeedupReport> {
    if !raw.speedup.is_finite() || raw.speedup < 0.0 || raw.cpus == 0 || raw.cpus > cpus {
        clamps.push(Clamp::SpeedupDropped(raw));
        return None;
    }
    let cap = raw.cpus as f64;
    if raw.speedup > cap {
        clamps.push(Clamp::SpeedupCapped { from: raw.speedup, to: cap });
        return SpeedupReport::new(raw.cpus, cap);
    }
    SpeedupReport::new(raw.cpus, raw.speedup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_the_documented_one() {
        use std::mem::offset_of;
        // docs/PROTOCOL.md lists these offsets; a change here is a new LAYOUT_VERSION.
        assert_eq!(offset_of!(Slot, program), 64);
        assert_eq!(offset_of!(Slot, manager), 128);
        assert_eq!(std::mem::size_of::<Slot>(), 320);
        assert_eq!(offset_of!(ProgramFields, team), 24);
        assert_eq!(offset_of!(ProgramFields, fold_cost), 28);
        assert_eq!(offset_of!(ProgramFields, heartbeat), 32);
        assert_eq!(offset_of!(ProgramFields, speedup_bits), 56);
        assert_eq!(offset_of!(ManagerFields, alloc_cpus), 24);
        assert_eq!(offset_of!(ManagerFields, preempt_to), 152);
        assert_eq!(offset_of!(ManagerFields, alloc_words), 156);
        assert_eq!(offset_of!(ManagerFields, lease_until), 168);
    }

    #[test]
    fn header_checks_magic_version_and_size() {
        let s = Slot::default();
        assert!(matches!(s.check_header(), Err(crate::SlotError::Magic(0))));
        s.init(7);
        s.check_header().unwrap();
        s.header.version.store(9, Ordering::Relaxed);
        assert!(matches!(s.check_header(), Err(crate::SlotError::Version { found: 9, .. })));
    }

    #[test]
    fn allocation_round_trips_through_the_seqlock() {
        let s = Slot::default();
        assert_eq!(s.allocation(), None, "nothing published yet");
        let cpus = CpuSet::parse("0,5,64-66,1023").unwrap();
        s.publish(3, 6, true, &cpus);
        let a = s.allocation().unwrap();
        assert_eq!(a, Allocation { epoch: 3, count: 6, running: true, cpus: CpuWords::from(&cpus) });
        assert_eq!(a.cpus.to_cpuset(), cpus);
        assert_eq!(a.cpus.as_words().len(), 16, "CPU 1023 is in the last word");
        assert_eq!(s.allocated_count(), 6);
        s.publish(4, 0, false, &CpuSet::new());
        assert!(s.allocation().unwrap().cpus.is_empty());
        // Fewer words than before: the stale high words are neither read nor reported.
        s.publish(5, 2, true, &CpuSet::parse("1,3").unwrap());
        let a = s.allocation().unwrap();
        assert_eq!(a.cpus.as_words(), &[0b1010]);
        assert_eq!(a.cpus.iter().collect::<Vec<_>>(), vec![1, 3]);
        assert!(a.cpus.contains(3) && !a.cpus.contains(1023));
        // An absurd word count written by someone else is bounded by the slot.
        s.manager.alloc_words.store(u32::MAX, Ordering::Relaxed);
        assert_eq!(s.allocation().unwrap().cpus.len(), 2);
    }

    #[test]
    fn a_reused_allocation_loses_the_words_it_held_beyond_the_new_one() {
        let s = Slot::default();
        let mut a = Allocation::default();
        assert!(!s.read_allocation(&mut a), "nothing published yet");
        let wide = CpuSet::parse("0,200,1023").unwrap();
        s.publish(1, 3, true, &wide);
        assert!(s.read_allocation(&mut a));
        assert_eq!(a.cpus.to_cpuset(), wide);
        s.publish(2, 1, false, &CpuSet::parse("5").unwrap());
        assert!(s.read_allocation(&mut a));
        assert_eq!(a, Allocation { epoch: 2, count: 1, running: false, cpus: CpuWords::from_words(&[1 << 5]) });
        assert!(!a.cpus.contains(1023) && !a.cpus.contains(200));
    }

    #[test]
    fn a_writer_stuck_mid_write_makes_only_its_value_unreadable() {
        let s = Slot::default();
        assert_eq!(s.raw_request(), None);
        s.set_request(2, 1, 4);
        assert_eq!(s.raw_request(), Some(RawRequest { wanted: 2, min: 1, max: 4 }));
        s.program.request_seq.store(5, Ordering::Relaxed); // odd forever
        assert_eq!(s.raw_request(), None);
        s.report_speedup(2, 1.5);
        assert_eq!(s.raw_speedup(), Some(RawSpeedup { cpus: 2, speedup: 1.5 }));
    }

    #[test]
    fn absurd_requests_are_clamped_and_logged() {
        let mut c = Vec::new();
        let r = validate_request(RawRequest { wanted: 1_000_000_000, min: 7, max: 0 }, 4, &mut c);
        assert_eq!(r, Request { wanted: 1, min: 1, max: 1 });
        assert_eq!(c.len(), 3, "{c:?}");
        c.clear();
        let r = validate_request(RawRequest { wanted: 0, min: 0, max: 3 }, 4, &mut c);
        assert_eq!(r, Request { wanted: 0, min: 0, max: 3 });
        assert!(c.is_empty());
    }

    #[test]
    fn bad_speedups_are_dropped_or_capped() {
        let mut c = Vec::new();
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(validate_speedup(RawSpeedup { cpus: 2, speedup: bad }, 4, &mut c), None);
        }
        assert_eq!(validate_speedup(RawSpeedup { cpus: 9, speedup: 1.0 }, 4, &mut c), None);
        assert_eq!(validate_speedup(RawSpeedup { cpus: 0, speedup: 1.0 }, 4, &mut c), None);
        assert_eq!(c.len(), 5);
        let capped = validate_speedup(RawSpeedup { cpus: 2, speedup: 50.0 }, 4, &mut c).unwrap();
        assert_eq!(capped.speedup, 2.0);
        let fine = validate_speedup(RawSpeedup { cpus: 4, speedup: 3.2 }, 4, &mut c).unwrap();
        assert_eq!(fine.speedup, 3.2);
    }

    proptest::proptest! {
        #[test]
        fn validated_requests_are_always_usable(wanted: u32, min: u32, max: u32, cpus in 1u32..2048) {
            let mut c = Vec::new();
            let r = validate_request(RawRequest { wanted, min, max }, cpus, &mut c);
            proptest::prop_assert!(r.max >= 1 && r.max <= cpus);
            proptest::prop_assert!(r.min <= r.max && r.wanted <= r.max);
        }
    }
}
