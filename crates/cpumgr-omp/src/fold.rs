//! Folding: a team that follows its allocation inside one long parallel region.
//!
//! Real OpenMP codes open one region around their whole time loop, so a team sized at the fork
//! stays that size for the run. Instead, the adapter lets a running team *fold*: it keeps its
//! threads, the manager pins them to fewer CPUs than threads, and at every barrier the compiler
//! emits (`GOMP_barrier`, the ends of `omp for` and `sections`: see [`crate::gomp`]; clang's
//! `__kmpc_barrier`: see [`crate::ompt`]) a thread of a folded team sleeps instead of spinning,
//! so the thread it waits for gets the CPU at once. When CPUs come back the manager widens the
//! affinity, the threads spread out, and waiters spin briefly again as the runtimes' would.
//!
//! Folding keeps every semantics (the team keeps its size, so `omp_get_num_threads` and code
//! that depends on it stay right) but is efficient only for a team that waits at the runtime's
//! barriers: one that waits in its own loops (point-to-point flags, hand-written spin barriers)
//! burns a time slice at every hand-over, and at very fine grains the hand-overs cost more than
//! the work. So a folded team is judged by what it does, every [`WINDOW`] barriers:
//! - a cooperative team folded onto `c` CPUs with `t` threads has about `(t - c) / t` of its
//!   threads asleep at the barrier at any moment; one whose members sleep less than an eighth of
//!   that waits somewhere else, in its own loops;
//! - once the team has run unfolded (alone at start, or when CPUs came back), its median folded
//!   barrier interval scaled by `c / t` against its median unfolded interval says whether it makes
//!   more progress folded all the time or run whole for a share of the time (a gang): the
//!   break-even is 1, [`SLOWER_TENTHS`] leaves the gang's switches a margin;
//! - a barrier that stays pending far longer than either explains (no member reaches it: all
//!   spin) is caught by a watcher thread;
//! - a fine-grained team folded from its first barrier has no reference: it is *probed* once,
//!   reported rigid until the manager has run it whole for [`WINDOW`] barriers, then judged
//!   against them (folding again, or rigid).
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

use cpumgr_client::monotonic_ns;

use crate::runtime;

/// Folded barriers between two judgements of a team, and the intervals a median is taken of (a
/// migration or a cold cache right after the CPUs change makes a few intervals long, not the
/// median).
pub const WINDOW: usize = 16;

/// A folded team whose median barrier interval, scaled by its CPUs over its threads, exceeds its
/// unfolded median by more than this factor (in tenths) is rigid.
pub const SLOWER_TENTHS: u64 = 15;

/// A folded team with no unfolded reference whose median barrier interval scaled by its CPUs
/// over its threads is below this (ns) is probed: at such grains a hand-over may cost as much as
/// the work, and only a reference can tell. Coarser teams lose little to folding and are left.
pub const PROBE_BELOW_NS: u64 = 50_000;

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
    /// When the last barrier completed (or the region started), `CLOCK_MONOTONIC` ns, and the
    /// allocation epoch then: an interval the manager re-decided within is not timed (it may hold
    /// a stop).
    last_ns: AtomicU64,
    last_epoch: AtomicU64,
    /// The latest unfolded intervals, ns.
    reference: Window,
    /// The lowest median of a full window of them (see [`Team::reference_ns`]).
    best: AtomicU64,
    /// The latest folded intervals scaled by CPUs / threads, ns.
    folded: Window,
    /// Nanoseconds members have slept at its barrier, in all.
    slept: AtomicU64,
    /// `slept` when the last barrier completed.
    slept_mark: AtomicU64,
    /// Since the last judgement, over folded intervals only: the thread-time they spanned
    /// (interval × threads), the sleep a team waiting only at barriers would have had in them
    /// (interval × (threads - CPUs)), and the sleep members had.
    spanned: AtomicU64,
    ideal: AtomicU64,
    asleep: AtomicU64,
    /// Whether it ran folded at any barrier (its timing then says nothing of its speedup).
    ever_folded: AtomicBool,
    /// A [`Verdict`].
    verdict: AtomicU8,
    /// Whether it was probed once (a team is probed at most once per region).
    probed: AtomicBool,
}

/// The latest [`WINDOW`] values of a series, written by one thread at a time (a barrier's last
/// arriver) and read by any.
#[derive(Debug, Default)]
struct Window {
    values: [AtomicU64; WINDOW],
    count: AtomicU64,
}

impl Window {
    /// Adds `v`; returns how many values were ever added.
    fn push(&self, v: u64) -> u64 {
        let n = self.count.load(Ordering::Relaxed);
        self.values[n as usize % WINDOW].store(v, Ordering::Relaxed);
        self.count.store(n + 1, Ordering::Relaxed);
        n + 1
    }

    /// The median of the values held (0 before any).
    fn median(&self) -> u64 {
        let n = (self.count.load(Ordering::Relaxed) as usize).min(WINDOW);
        let mut v: Vec<u64> = self.values[..n].iter().map(|x| x.load(Ordering::Relaxed)).collect();
        v.sort_unstable();
        v.get(n / 2).copied().unwrap_or(0)
    }
}

thread_local! {
    /// The tracked team this thread is a member of, while it runs the region's body.
    static MEMBER: Cell<*const Team> = const { Cell::new(std::ptr::null()) };
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
}

/// The history of every region key seen (a handful per program).
static HISTORY: Mutex<Vec<(u64, History)>> = Mutex::new(Vec::new());

/// What is known of region `key` (nothing for key 0).
pub fn history(key: u64) -> History {
    let h = HISTORY.lock().unwrap_or_else(|e| e.into_inner());
    h.iter().find(|(k, _)| *k == key && key != 0).map_or(History { verdict: Verdict::Folding, took_ns: None }, |e| e.1)
}

fn record(key: u64, change: impl FnOnce(&mut History)) {
    if key == 0 {
        return;
    }
    let mut h = HISTORY.lock().unwrap_or_else(|e| e.into_inner());
    let i = match h.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            h.push((key, History { verdict: Verdict::Folding, took_ns: None }));
            h.len() - 1
        }
    };
    change(&mut h[i].1);
}

/// An instance of region `key` ended after `took_ns`.
pub fn ended(key: u64, took_ns: u64) {
    record(key, |h| h.took_ns = Some(took_ns));
}

/// CPUs the allocation pins the program to and the allocation's epoch; `None` unmanaged.
fn allocated() -> Option<(u32, u64)> {
    runtime::client().allocation().map(|a| (a.cpus.len() as u32, a.epoch))
}

impl Team {
    /// A team about to start, with the verdict its region key had.
    pub fn new(key: u64, verdict: Verdict) -> Team {
        let now = monotonic_ns();
        Team {
            key,
            size: AtomicU32::new(0),
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            also_real: AtomicBool::new(false),
            last_ns: AtomicU64::new(now),
            last_epoch: AtomicU64::new(allocated().map_or(0, |a| a.1)),
            reference: Window::default(),
            best: AtomicU64::new(0),
            folded: Window::default(),
            slept: AtomicU64::new(0),
            spanned: AtomicU64::new(0),
            ideal: AtomicU64::new(0),
            slept_mark: AtomicU64::new(0),
            asleep: AtomicU64::new(0),
            ever_folded: AtomicBool::new(false),
            verdict: AtomicU8::new(verdict as u8),
            probed: AtomicBool::new(false),
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
    pub fn open(&self) {
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

    /// A team barrier: every member waits until all have arrived, sleeping when the team is
    /// folded. Then, once the program has created tasks, `real` (libgomp's own barrier, where
    /// they complete), called by every member or by none.
    pub fn barrier(&self, real: impl FnOnce()) {
        let size = self.size.load(Ordering::Relaxed);
        if size > 1 {
            let generation = self.generation.load(Ordering::Acquire);
            let alloc = allocated();
            if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == size {
                self.complete(size, alloc);
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

    /// Waits for the barrier of `generation` to complete: at once asleep when folded, else after
    /// a short spin (rechecking the allocation, which may fold the team meanwhile).
    fn wait(&self, generation: u32, size: u32, alloc: Option<(u32, u64)>) {
        let mut is_folded = alloc.is_some_and(|(cpus, _)| cpus < size);
        let start = if is_folded { 0 } else { monotonic_ns() };
        let mut spins = 0u32;
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
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if self.generation.load(Ordering::SeqCst) == generation {
                let asleep = monotonic_ns();
                futex_wait(&self.generation, generation, NAP);
                self.slept.fetch_add(monotonic_ns().saturating_sub(asleep), Ordering::Relaxed);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The last arriver's bookkeeping: times the interval since the last barrier, judges the
    /// team, and says whether members also run libgomp's barrier.
    fn complete(&self, size: u32, alloc: Option<(u32, u64)>) {
        self.also_real.store(TASKS.load(Ordering::SeqCst), Ordering::Release);
        let now = monotonic_ns();
        let took = now.saturating_sub(self.last_ns.swap(now, Ordering::Relaxed));
        let Some((cpus, epoch)) = alloc else { return };
        let same = self.last_epoch.swap(epoch, Ordering::Relaxed) == epoch;
        let slept = self.slept.load(Ordering::Relaxed);
        let slept_in = slept.saturating_sub(self.slept_mark.swap(slept, Ordering::Relaxed));
        let folded = cpus < size;
        if folded {
            self.ever_folded.store(true, Ordering::Relaxed);
        }
        let verdict = self.verdict();
        if !same || cpus == 0 || verdict == Verdict::Rigid {
            return;
        }
        if !folded {
            if self.reference.push(took).is_multiple_of(WINDOW as u64) {
                // The best window stands: contention from outside (or start-up page faults)
                // only ever makes intervals longer.
                let m = self.reference.median();
                let best = self.best.load(Ordering::Relaxed);
                self.best.store(if best == 0 { m } else { best.min(m) }, Ordering::Relaxed);
                if verdict == Verdict::Probing {
                    let (folded, reference) = (self.folded.median(), self.reference_ns());
                    let v = if folded * 10 > SLOWER_TENTHS * reference { Verdict::Rigid } else { Verdict::Folding };
                    self.judge(v, size, now, format_args!(", {} us folded per CPU", folded / 1000));
                }
            }
            return;
        }
        if verdict == Verdict::Probing {
            return;
        }
        self.spanned.fetch_add(took * size as u64, Ordering::Relaxed);
        self.ideal.fetch_add(took * (size - cpus) as u64, Ordering::Relaxed);
        self.asleep.fetch_add(slept_in, Ordering::Relaxed);
        if !self.folded.push(took * cpus as u64 / size as u64).is_multiple_of(WINDOW as u64) {
            return;
        }
        let (ideal, asleep) = (self.ideal.swap(0, Ordering::Relaxed), self.asleep.swap(0, Ordering::Relaxed));
        let spanned = self.spanned.swap(0, Ordering::Relaxed).max(1);
        let (folded, reference) = (self.folded.median(), self.reference_ns());
        if asleep * 8 < ideal {
            let share = |v: u64| v * 100 / spanned;
            self.judge(
                Verdict::Rigid,
                size,
                now,
                format_args!(", {}% asleep at barriers folded, {}% if it waited there", share(asleep), share(ideal)),
            );
        } else if reference > 0 && folded * 10 > SLOWER_TENTHS * reference {
            self.judge(Verdict::Rigid, size, now, format_args!(", {} us folded per CPU", folded / 1000));
        } else if reference == 0 && folded < PROBE_BELOW_NS && !self.probed.swap(true, Ordering::Relaxed) {
            self.judge(Verdict::Probing, size, now, format_args!(", {} us folded per CPU", folded / 1000));
        }
    }

    /// The team's unfolded barrier interval: the lowest median of [`WINDOW`] unfolded intervals
    /// seen, ns (0 before a window was full).
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
            "cpumgr-omp: team of {size} {} (a barrier every {} us unfolded{why})",
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
    allocated().is_some_and(|(cpus, _)| cpus < size)
}

/// The watcher: a folding team whose current barrier has stayed pending far longer than folding
/// explains (every member spins in its own loops, none reaches a barrier) is judged rigid. Only
/// time the watcher itself ran counts: a tick that took much longer than asked means the process
/// was stopped (a gang's other quanta) or starved, which says nothing of how it waits.
fn watch() {
    let mut seen = (0usize, 0u32);
    let mut pending = 0u64;
    let mut last = monotonic_ns();
    loop {
        std::thread::sleep(WATCH_EVERY);
        let now = monotonic_ns();
        let tick = now.saturating_sub(last);
        last = now;
        let open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if *open == 0 {
            continue;
        }
        // SAFETY: registered teams stay alive until they unregister under this lock.
        let team = unsafe { &*(*open as *const Team) };
        let size = team.size.load(Ordering::Relaxed);
        let generation = team.generation.load(Ordering::Relaxed);
        let folded = allocated().filter(|&(c, _)| c > 0 && c < size);
        if seen != (*open, generation) || team.verdict() != Verdict::Folding || folded.is_none() {
            seen = (*open, generation);
            pending = 0;
            continue;
        }
        if tick < 2 * WATCH_EVERY.as_nanos() as u64 {
            pending += tick;
        }
        let cpus = folded.map_or(1, |(c, _)| c) as u64;
        let limit = (8 * team.reference_ns() * size as u64 / cpus).max(50_000_000);
        if pending > limit {
            team.judge(Verdict::Rigid, size, now, format_args!(", one pending {} ms folded", pending / 1_000_000));
        }
    }
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
