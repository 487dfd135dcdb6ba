//! Folding: a team that follows its allocation inside one long parallel region.
//!
//! Real OpenMP codes open one region around their whole time loop, so a team sized at the fork
//! stays that size for the run. Instead, the adapter lets a running team *fold*: it keeps its
//! threads, the manager pins them to fewer CPUs than threads, and at every barrier the compiler
//! emits (`GOMP_barrier`, the ends of `omp for` and `sections`: see [`crate::gomp`]; clang's
//! `__kmpc_barrier`: see [`crate::ompt`]) a thread of a folded team yields its CPU to the member
//! it waits for (or sleeps, when that member runs elsewhere) instead of spinning. When CPUs come
//! back the manager widens the affinity, the members move apart ([`crate::spread`]), and waiters
//! spin briefly again as the runtimes' would.
//!
//! Folding keeps every semantics (the team keeps its size, so `omp_get_num_threads` and code
//! that depends on it stay right) but is efficient only for a team that waits at the runtime's
//! barriers: one that waits in its own loops (point-to-point flags, hand-written spin barriers)
//! burns a time slice at every hand-over, and at very fine grains the hand-overs cost more than
//! the work. So a folded team is judged by what it does, every [`WINDOW`] barriers:
//! - a cooperative team folded onto `c` CPUs with `t` threads keeps `c` members busy while the
//!   other `t - c` wait at the barrier: `(t - c) / c` of waiting for each unit of its CPU time;
//!   one whose members wait less than an eighth of that waits somewhere else, in its own loops;
//! - once the team has run unfolded (alone at start, or when CPUs came back), the CPU time its
//!   threads take per barrier folded against unfolded is its *cost* of folding, which the
//!   manager is told ([`cpumgr_client::Client::fold_cost`], a running mean of its spans'): a
//!   team folded at cost `r` makes `1/r` of the progress it makes whole, and the manager runs
//!   it as a gang instead when that makes more progress on the machine, which depends on what
//!   else runs there (docs/LIVE.md, Folding). Both measures count CPU time, not wall time: a
//!   thread waiting for a CPU that another program holds, or stopped by the manager, spends
//!   none, so the cost does not depend on what else runs on the machine;
//! - a barrier that stays pending far longer than either explains (no member reaches it: all
//!   spin) is caught by a watcher thread;
//! - a fine-grained team folded from its first barrier has no reference: it is *probed* once,
//!   reported rigid until the manager has run it whole for [`PROBE_SPANS`] spans, then folding
//!   again with its cost against the best of them.
//!
//! A team judged rigid is reported so (the slot's phase `Parallel`: the
//! manager runs it whole, as a gang when squeezed) for the rest of its region, and its region key
//! starts rigid from then on ([`history`]); any other team reports
//! phase `Folding`.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use cpumgr_client::{monotonic_ns, Allocation};

use crate::{runtime, spread};

/// Barriers between two judgements of a team: its threads read their CPU time at every
/// `WINDOW`th barrier, and a *span* is the `WINDOW` barriers between two such reads.
pub const WINDOW: u32 = 16;

/// A folded team with no unfolded reference whose threads take less CPU time than this (ns) per
/// barrier is probed: at such grains a hand-over may cost as much as the work, and only a
/// reference can tell. Coarser teams lose little to folding and are left.
pub const PROBE_BELOW_NS: u64 = 50_000;

/// Unfolded spans a probed team runs before it is judged, against the best of them: the first
/// spans after the manager continues a team pay for its members' staggered restart and cold
/// caches, which a single span would take for the team's own cost.
pub const PROBE_SPANS: u32 = 8;

/// How long an unfolded waiter spins before it sleeps (libgomp's own spin is of this order).
const SPIN_NS: u64 = 100_000;

/// The longest sleep of a waiter before it looks at its barrier again (a safety net: every
/// completion wakes the sleepers).
const NAP: Duration = Duration::from_millis(100);

/// How often the watcher thread looks at the open team.
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// Whether the program has created an explicit task: tasks complete at barriers inside libgomp,
/// so from then on each barrier also runs libgomp's own after the cooperative one.
pub static TASKS: AtomicBool = AtomicBool::new(false);

/// What the manager is told about a team.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Verdict {
    /// Folds onto any allocation.
    Folding = 0,
    /// Waits in ways folding does not serve: rigid.
    Rigid = 1,
    /// Fine-grained and never seen unfolded: reported rigid until the manager has run it whole
    /// long enough to time a reference, then judged against it.
    Probing = 2,
}

/// One tracked region's team: its cooperative barrier and what is known of its waiting.
#[derive(Debug)]
pub struct Team {
    /// The region's key (0: none), to remember its verdict.
    key: u64,
    /// Threads in the team (each member stores the same value as it starts).
    size: AtomicU32,
    /// Members arrived at the current barrier.
    arrived: AtomicU32,
    /// Completed barriers: the futex word waiters sleep on.
    generation: AtomicU32,
    /// Members asleep on `generation`.
    sleepers: AtomicU32,
    /// Whether the barrier that just completed also runs libgomp's (set by its last arriver).
    also_real: AtomicBool,
    /// The current span: the CPU time its members took so far (each adds its own at the span's
    /// end, before it arrives), how many did, which CPUs it ran on ([`cpus_key`]; 0 when they
    /// changed within it), and whether the span before ran on the same CPUs throughout. A span
    /// counts only then: the one after a change pays for migrations and cold caches, which are
    /// no measure of folding.
    span_cpu: AtomicU64,
    span_clocked: AtomicU32,
    span_cpus: AtomicU64,
    span_warm: AtomicBool,
    /// Whether a member was off its CPU for a part of the current span (its wall time passed its
    /// CPU time by more than [`held_off`] allows): held off by another program, or asleep at a
    /// barrier. Such an unfolded span is no reference, its members' spin meanwhile inflating it.
    span_held_off: AtomicBool,
    /// Folded spans judged since the CPUs last changed: the manager is told a cost from the
    /// second on.
    folded_spans: AtomicU32,
    /// The running mean of its folded spans' costs, each span weighing a quarter, per mille of
    /// the reference (0: none): one span's swings by a third either way at fine grains.
    mean_cost: AtomicU64,
    /// The cost the manager was last told, per mille (0: none).
    told_cost: AtomicU64,
    /// The lowest CPU time per thread per barrier of an unfolded span, ns (0: none yet).
    best: AtomicU64,
    /// The latest folded span's CPU time per thread per barrier, ns.
    folded: AtomicU64,
    /// Nanoseconds members have waited at its barrier (yielding or asleep), in all, and when the
    /// current span began.
    slept: AtomicU64,
    span_slept: AtomicU64,
    /// Whether it ran folded at any barrier (its timing then says nothing of its speedup).
    ever_folded: AtomicBool,
    /// A [`Verdict`].
    verdict: AtomicU8,
    /// Whether it was probed once (a team is probed at most once per region), and the unfolded
    /// spans it has run while probed.
    probed: AtomicBool,
    probe_spans: AtomicU32,
}

thread_local! {
    /// The tracked team this thread is a member of, while it runs the region's body.
    static MEMBER: Cell<*const Team> = const { Cell::new(std::ptr::null()) };
    /// This thread's clocks at its last span end: the team (as `usize`), the barrier's
    /// generation, its CPU time and the monotonic time, ns.
    static CLOCKED: Cell<(usize, u32, u64, u64)> = const { Cell::new((0, 0, 0, 0)) };
}

/// The open tracked team the watcher thread looks at (a `*const Team` as `usize`; 0: none).
/// Registered by the forking thread for the region's lifetime, under the lock, so the watcher
/// never reads a team that is gone.
static OPEN: Mutex<usize> = Mutex::new(0);

/// What the process has seen of one region key.
#[derive(Debug, Clone, Copy)]
pub struct History {
    /// Its last team's verdict (folding when none ended yet).
    pub verdict: Verdict,
    /// How long its last instance took; `None` before any ended.
    pub took_ns: Option<u64>,
    /// The cost of folding its team last told the manager, per mille (0: none).
    pub cost: u32,
}

/// The history of every region key seen (a handful per program).
static HISTORY: Mutex<Vec<(u64, History)>> = Mutex::new(Vec::new());

/// What is known of region `key` (nothing for key 0).
pub fn history(key: u64) -> History {
    let h = HISTORY.lock().unwrap_or_else(|e| e.into_inner());
    h.iter()
        .find(|(k, _)| *k == key && key != 0)
        .map_or(History { verdict: Verdict::Folding, took_ns: None, cost: 0 }, |e| e.1)
}

fn record(key: u64, change: impl FnOnce(&mut History)) {
    if key == 0 {
        return;
    }
    let mut h = HISTORY.lock().unwrap_or_else(|e| e.into_inner());
    let i = match h.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            h.push((key, History { verdict: Verdict::Folding, took_ns: None, cost: 0 }));
            h.len() - 1
        }
    };
    change(&mut h[i].1);
}

/// An instance of region `key` ended after `took_ns`.
pub fn ended(key: u64, took_ns: u64) {
    record(key, |h| h.took_ns = Some(took_ns));
}

/// CPUs the allocation pins the program to; `None` unmanaged.
fn allocated() -> Option<u32> {
    runtime::client().allocation().map(|a| a.cpus.len() as u32)
}

/// A key of the CPUs `a` pins the program to, never 0 (0 marks a span whose CPUs changed).
fn cpus_key(a: &Allocation) -> u64 {
    a.cpus.as_words().iter().fold(a.cpus.len() as u64, |h, &w| h.rotate_left(17) ^ w).max(1)
}

/// What one span of a team took: its members' CPU time and their waits at its barriers, ns.
#[derive(Debug, Clone, Copy)]
struct Span {
    cpu: u64,
    slept: u64,
    /// A member was off its CPU for a part of it.
    held_off: bool,
}

/// Whether a thread that took `cpu` ns of CPU time over `wall` ns was off its CPU for a part of
/// them: more than an eighth of its CPU time and 10 us (clock reads and a spin's last lap).
fn held_off(cpu: u64, wall: u64) -> bool {
    wall > cpu + cpu / 8 + 10_000
}

impl Team {
    /// A team about to start, with the verdict its region key had.
    pub fn new(key: u64, verdict: Verdict) -> Team {
        Team {
            key,
            size: AtomicU32::new(0),
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            also_real: AtomicBool::new(false),
            span_cpu: AtomicU64::new(0),
            span_clocked: AtomicU32::new(0),
            span_cpus: AtomicU64::new(0),
            span_warm: AtomicBool::new(false),
            span_held_off: AtomicBool::new(false),
            folded_spans: AtomicU32::new(0),
            mean_cost: AtomicU64::new(0),
            told_cost: AtomicU64::new(0),
            best: AtomicU64::new(0),
            folded: AtomicU64::new(0),
            slept: AtomicU64::new(0),
            span_slept: AtomicU64::new(0),
            ever_folded: AtomicBool::new(false),
            verdict: AtomicU8::new(verdict as u8),
            probed: AtomicBool::new(false),
            probe_spans: AtomicU32::new(0),
        }
    }

    /// Its size (0 before a member entered).
    pub fn size(&self) -> u32 {
        self.size.load(Ordering::Relaxed)
    }

    /// Its verdict.
    pub fn verdict(&self) -> Verdict {
        match self.verdict.load(Ordering::Relaxed) {
            0 => Verdict::Folding,
            2 => Verdict::Probing,
            _ => Verdict::Rigid,
        }
    }

    /// Whether it ran folded at some barrier.
    pub fn ever_folded(&self) -> bool {
        self.ever_folded.load(Ordering::Relaxed)
    }

    /// Registers it as the process's open team (for the watcher) until [`Team::close`].
    /// Its region key's cost of folding, if it has one, replaces the program's last (another
    /// region's, whose grain may differ).
    pub fn open(&self) {
        runtime::client().restore_fold_cost(history(self.key).cost);
        *OPEN.lock().unwrap_or_else(|e| e.into_inner()) = self as *const Team as usize;
        static WATCHER: Once = Once::new();
        WATCHER.call_once(|| {
            let _ = std::thread::Builder::new().name("cpumgr-omp-watch".into()).spawn(watch);
        });
    }

    /// Unregisters it; remembers its verdict for its region key.
    pub fn close(&self) {
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if *open == self as *const Team as usize {
            *open = 0;
        }
        drop(open);
        // A probe that did not end leaves the key unjudged.
        let v = match self.verdict() {
            Verdict::Probing => Verdict::Folding,
            v => v,
        };
        record(self.key, |h| h.verdict = v);
    }

    /// Runs `body(data)` as a member of this team (every thread of the region calls it).
    ///
    /// # Safety
    /// `body` is the region's outlined body and `data` its argument.
    pub unsafe fn member(&self, body: unsafe extern "C" fn(*mut c_void), data: *mut c_void) {
        self.enter(runtime::team_size());
        // SAFETY: the caller's contract.
        unsafe { body(data) };
        leave();
    }

    /// Makes the calling thread a member of this team of `size` threads until [`leave`].
    pub fn enter(&self, size: u32) {
        self.size.store(size, Ordering::Relaxed);
        MEMBER.with(|m| m.set(self));
    }

    /// The team the calling thread runs the body of, at the outermost level; `None` in nested
    /// regions and outside tracked ones.
    pub fn current() -> Option<&'static Team> {
        let p = MEMBER.with(|m| m.get());
        // SAFETY: MEMBER points at the team whose body this thread is running; the team outlives
        // the body (it lives in the forking call, which returns after the join).
        (!p.is_null() && runtime::level() == 1).then(|| unsafe { &*p })
    }

    /// A team barrier: every member waits until all have arrived, handing its CPU over when the
    /// team is folded. `folded` first learns whether it is (from the allocation the barrier
    /// reads anyway). Then, once the program has created tasks, `real` (libgomp's own barrier,
    /// where they complete), called by every member or by none.
    pub fn barrier(&self, folded: impl FnOnce(bool), real: impl FnOnce()) {
        let size = self.size.load(Ordering::Relaxed);
        if size <= 1 {
            folded(false);
        } else {
            let generation = self.generation.load(Ordering::Acquire);
            let allocation = runtime::client().allocation();
            if let Some(a) = &allocation {
                spread::follow(self as *const Team as usize, a);
            }
            let alloc = allocation.map(|a| (a.cpus.len() as u32, cpus_key(&a)));
            folded(alloc.is_some_and(|(cpus, _)| cpus < size));
            if generation.is_multiple_of(WINDOW) {
                self.clock(generation);
            }
            if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == size {
                self.complete(size, generation, alloc);
                self.arrived.store(0, Ordering::Relaxed);
                self.generation.store(generation.wrapping_add(1), Ordering::SeqCst);
                if self.sleepers.load(Ordering::SeqCst) > 0 {
                    futex_wake_all(&self.generation);
                }
            } else {
                self.wait(generation, size, alloc);
            }
        }
        if size <= 1 || self.also_real.load(Ordering::Acquire) {
            real();
        }
    }

    /// At a span's end: adds the calling thread's CPU time since the last span's end to the
    /// span's, if it was a member then.
    fn clock(&self, generation: u32) {
        let (cpu, wall) = (thread_cpu_ns(), monotonic_ns());
        let me = self as *const Team as usize;
        let (team, at, last_cpu, last_wall) = CLOCKED.with(|c| c.replace((me, generation, cpu, wall)));
        if team == me && at.wrapping_add(WINDOW) == generation {
            let cpu = cpu.saturating_sub(last_cpu);
            self.span_cpu.fetch_add(cpu, Ordering::Relaxed);
            self.span_clocked.fetch_add(1, Ordering::Relaxed);
            if held_off(cpu, wall.saturating_sub(last_wall)) {
                self.span_held_off.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Waits for the barrier of `generation` to complete. Folded, it hands its CPU over: it
    /// yields while each yield lets another member reach the barrier (a member that shares its
    /// CPU runs at once, with no wake-up to pay), and sleeps once one does not (the members it
    /// waits for run elsewhere). Unfolded, it spins a short while first, rechecking the
    /// allocation, which may fold the team meanwhile. Time spent yielding or asleep is the
    /// team's sleep at barriers.
    fn wait(&self, generation: u32, size: u32, alloc: Option<(u32, u64)>) {
        let mut is_folded = alloc.is_some_and(|(cpus, _)| cpus < size);
        let start = if is_folded { 0 } else { monotonic_ns() };
        let mut spins = 0u32;
        let mut yielding = true;
        while self.generation.load(Ordering::Acquire) == generation {
            if !is_folded {
                spins += 1;
                std::hint::spin_loop();
                if !spins.is_multiple_of(256) {
                    continue;
                }
                is_folded = folded(size);
                if !is_folded && monotonic_ns().saturating_sub(start) < SPIN_NS {
                    continue;
                }
            }
            if is_folded && yielding {
                let arrived = self.arrived.load(Ordering::Acquire);
                let from = monotonic_ns();
                std::thread::yield_now();
                self.slept.fetch_add(monotonic_ns().saturating_sub(from), Ordering::Relaxed);
                yielding = self.arrived.load(Ordering::Acquire) != arrived;
                continue;
            }
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if self.generation.load(Ordering::SeqCst) == generation {
                let asleep = monotonic_ns();
                futex_wait(&self.generation, generation, NAP);
                self.slept.fetch_add(monotonic_ns().saturating_sub(asleep), Ordering::Relaxed);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The last arriver's bookkeeping at the barrier of `generation`: judges the team at a
    /// span's end, and says whether members also run libgomp's barrier.
    fn complete(&self, size: u32, generation: u32, alloc: Option<(u32, u64)>) {
        self.also_real.store(TASKS.load(Ordering::SeqCst), Ordering::Release);
        let Some((cpus, key)) = alloc else { return };
        let folded = cpus < size;
        if folded {
            self.ever_folded.store(true, Ordering::Relaxed);
        }
        let span = self.span(size, generation, key);
        let verdict = self.verdict();
        let Some(span) = span.filter(|_| cpus > 0 && verdict != Verdict::Rigid) else { return };
        let per = span.cpu / (WINDOW as u64 * size as u64);
        let now = monotonic_ns();
        if !folded {
            // The best span stands: contention from outside (or start-up page faults) only ever
            // makes a thread's spin at a barrier longer; a span a member spent partly off its CPU
            // is left out (its partner spun meanwhile).
            if !span.held_off {
                let best = self.best.load(Ordering::Relaxed);
                self.best.store(if best == 0 { per } else { best.min(per) }, Ordering::Relaxed);
            }
            if verdict == Verdict::Probing && self.probe_spans.fetch_add(1, Ordering::Relaxed) + 1 >= PROBE_SPANS {
                let folded = self.folded.load(Ordering::Relaxed);
                self.judge(Verdict::Folding, size, now, format_args!(", {} us folded", folded / 1000));
                // Every span held off (a machine loaded from outside): no cost, the team folds.
                if let Some(cost) = (folded * 1000).checked_div(self.reference_ns()) {
                    self.tell_cost(cost);
                }
            }
            return;
        }
        if verdict == Verdict::Probing {
            return;
        }
        self.folded.store(per, Ordering::Relaxed);
        // Folded onto `cpus` CPUs, a team that waits only at barriers keeps them busy with
        // `cpus` members while the other `size - cpus` wait there: for each nanosecond of CPU
        // time, `(size - cpus) / cpus` of waiting, whatever else shares the CPUs.
        let expected = span.cpu * (size - cpus) as u64 / cpus as u64;
        let reference = self.reference_ns();
        if span.slept * 8 < expected {
            let share = |v: u64| v * 100 / span.cpu.max(1);
            self.judge(
                Verdict::Rigid,
                size,
                now,
                format_args!(
                    ", waiting at barriers folded {}% of its CPU time, {}% if it waited only there",
                    share(span.slept),
                    share(expected)
                ),
            );
        } else if let Some(cost) = (per * 1000).checked_div(reference) {
            let mean = match self.mean_cost.load(Ordering::Relaxed) {
                0 => cost,
                mean => (3 * mean + cost) / 4,
            };
            self.mean_cost.store(mean, Ordering::Relaxed);
            if self.folded_spans.fetch_add(1, Ordering::Relaxed) >= 1 {
                self.tell_cost(mean);
            }
        } else if per < PROBE_BELOW_NS && !self.probed.swap(true, Ordering::Relaxed) {
            self.judge(Verdict::Probing, size, now, format_args!(", {} us folded", per / 1000));
        }
    }

    /// Tells the manager the team's cost of folding, per mille, when it changed by a tenth or
    /// more since it last did (a write the manager reads every quantum; a ring the first time).
    fn tell_cost(&self, permille: u64) {
        let told = self.told_cost.load(Ordering::Relaxed);
        if told == 0 || permille.abs_diff(told) * 10 >= told {
            let permille = permille.clamp(1, u32::MAX as u64) as u32;
            self.told_cost.store(permille as u64, Ordering::Relaxed);
            runtime::client().fold_cost(permille);
            record(self.key, |h| h.cost = permille);
            runtime::log(format_args!(
                "cpumgr-omp: team folds at {}.{:03} its cost whole",
                permille / 1000,
                permille % 1000
            ));
        }
    }

    /// The span's bookkeeping at the barrier of `generation`, run on the CPUs of `key`: at a
    /// span's end, what the span that ends took, if every member took part and it ran on the
    /// same CPUs as the span before, throughout.
    fn span(&self, size: u32, generation: u32, key: u64) -> Option<Span> {
        let changed = self.span_cpus.load(Ordering::Relaxed) != key;
        if !generation.is_multiple_of(WINDOW) {
            if changed {
                self.span_cpus.store(0, Ordering::Relaxed);
            }
            return None;
        }
        let cpu = self.span_cpu.swap(0, Ordering::Relaxed);
        let held_off = self.span_held_off.swap(false, Ordering::Relaxed);
        let whole = self.span_clocked.swap(0, Ordering::Relaxed) == size;
        let slept = self.slept.load(Ordering::Relaxed);
        let slept = slept.saturating_sub(self.span_slept.swap(slept, Ordering::Relaxed));
        self.span_cpus.store(key, Ordering::Relaxed);
        let warm = self.span_warm.swap(!changed, Ordering::Relaxed);
        if changed {
            self.folded_spans.store(0, Ordering::Relaxed);
        }
        (whole && !changed && warm).then_some(Span { cpu, slept, held_off })
    }

    /// The team's unfolded CPU time per thread per barrier: the lowest of its unfolded spans,
    /// ns (0 before one ended).
    fn reference_ns(&self) -> u64 {
        self.best.load(Ordering::Relaxed)
    }

    /// Takes `v` as the team's verdict and tells the manager.
    fn judge(&self, v: Verdict, size: u32, now: u64, why: std::fmt::Arguments) {
        self.verdict.store(v as u8, Ordering::Relaxed);
        let client = runtime::client();
        match v {
            Verdict::Folding => client.fold_region_at(size, now),
            Verdict::Rigid | Verdict::Probing => client.begin_region_at(size, now),
        }
        runtime::log(format_args!(
            "cpumgr-omp: team of {size} {} ({} us per barrier unfolded{why})",
            match v {
                Verdict::Folding => "folds",
                Verdict::Rigid => "is rigid",
                Verdict::Probing => "is probed unfolded",
            },
            self.reference_ns() / 1000
        ));
    }
}

/// The calling thread is no member of a team any more (its implicit task ended).
pub fn leave() {
    MEMBER.with(|m| m.set(std::ptr::null()));
}

/// Whether a team of `size` threads is folded now (its allocation pins it to fewer CPUs).
pub fn folded(size: u32) -> bool {
    allocated().is_some_and(|cpus| cpus < size)
}

/// The watcher: a folding team whose current barrier has stayed pending far longer than folding
/// explains (every member spins in its own loops, none reaches a barrier) is judged rigid. Only
/// time the watcher itself ran counts: a lap that took much longer than asked means the process
/// was stopped (a gang's other quanta) or starved, which says nothing of how it waits.
fn watch() {
    let mut seen = (0usize, 0u32);
    let mut pending = 0u64;
    let mut last = monotonic_ns();
    loop {
        std::thread::sleep(WATCH_EVERY);
        let now = monotonic_ns();
        let lap = now.saturating_sub(last);
        last = now;
        let open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if *open == 0 {
            continue;
        }
        // SAFETY: registered teams stay alive until they unregister under this lock.
        let team = unsafe { &*(*open as *const Team) };
        let size = team.size.load(Ordering::Relaxed);
        let generation = team.generation.load(Ordering::Relaxed);
        let folded = allocated().filter(|&c| c > 0 && c < size);
        if seen != (*open, generation) || team.verdict() != Verdict::Folding || folded.is_none() {
            seen = (*open, generation);
            pending = 0;
            continue;
        }
        if lap < 2 * WATCH_EVERY.as_nanos() as u64 {
            pending += lap;
        }
        let cpus = folded.unwrap_or(1) as u64;
        let limit = (8 * team.reference_ns() * size as u64 / cpus).max(50_000_000);
        if pending > limit {
            team.judge(Verdict::Rigid, size, now, format_args!(", one pending {} ms folded", pending / 1_000_000));
        }
    }
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a live timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a valid timeout; spurious returns are fine.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cost a team tells is remembered for its region key, where the key's next team starts
    /// from; another key has none. A change under a tenth is not told again.
    #[test]
    fn a_region_key_remembers_the_cost_its_team_told() {
        let team = Team::new(0x5eed, Verdict::Folding);
        team.tell_cost(1400);
        assert_eq!(history(0x5eed).cost, 1400);
        assert_eq!(history(0x5eee).cost, 0);
        team.tell_cost(1450);
        assert_eq!(history(0x5eed).cost, 1400);
        team.tell_cost(2000);
        assert_eq!(history(0x5eed).cost, 2000);
    }

    /// A thread is held off when its wall time passes its CPU time by more than an eighth and
    /// 10 us; a span's clock reads and a spin's last lap are not.
    #[test]
    fn a_thread_off_its_cpu_for_part_of_a_span_is_held_off() {
        assert!(!held_off(100_000, 105_000));
        assert!(!held_off(2_000, 11_000));
        assert!(held_off(100_000, 130_000));
        assert!(held_off(2_000, 13_000));
    }
}
