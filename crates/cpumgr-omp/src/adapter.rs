//! The region bookkeeping both runtimes' hooks share: how big a region's team is (the
//! allocation, the program's own cap, the region's history), its team and phase in the slot, and
//! its timing to the speedup estimator (SelfAnalyzer, paper 000 §4.4), whose estimates go to the
//! slot for `pdpa`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::Duration;

use cpumgr_client::estimator::Estimator;
use cpumgr_client::{monotonic_ns, Mode};

use crate::fold::{self, Verdict};
use crate::runtime::{client, default_team, level, log};

/// Whether regions are the adapter's to size and report: managed (or LLPC), and outermost.
#[inline]
fn tracks() -> bool {
    client().mode() != Mode::Unmanaged && level() == 0
}

/// Regions shorter than this are not timed for the speedup estimate: the clock's resolution and
/// the runtime's own fork and join cost would dominate.
const TIMED_NS: u64 = 50_000;

/// A region must take at least this long before one later instance of it is spent on the
/// baseline probe: shorter ones give noisy baselines, and the probe costs at most one instance.
const PROBE_NS: u64 = 1_000_000;

/// A region whose last instance took at least this long is sized to the program's whole default
/// team, folded onto its allocation, so that it can spread out when CPUs come back without
/// waiting for a next region that may never come; shorter ones are sized to the allocation at
/// each fork. A region never seen before counts as long.
const LONG_NS: u64 = 100_000_000;

/// An outermost region the adapter tracks, from its fork to its join.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// The region's code (the outlined body's or the fork's return address): what the estimator
    /// and the fold history group instances by; 0 when unknown.
    pub key: u64,
    /// The team it runs with.
    team: u32,
    /// When it started, `CLOCK_MONOTONIC` ns.
    start_ns: u64,
    /// Whether it is the SelfAnalyzer's baseline run (one thread) rather than the allocation.
    probe: bool,
    /// What its key's last instance was judged (see [`fold`]).
    pub verdict: Verdict,
}

/// Timings of the process's regions per key and team size (paper 000 §4.4's SelfAnalyzer).
static ESTIMATOR: LazyLock<Mutex<Estimator>> = LazyLock::new(|| Mutex::new(Estimator::new()));

/// The key whose next instance runs as the baseline probe; 0 for none.
static PROBE: AtomicU64 = AtomicU64::new(0);

/// Whether the baseline probe is on: unless `CPUMGR_OMP_PROBE=0`.
fn probing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CPUMGR_OMP_PROBE").map_or(true, |v| v != "0"))
}

/// A region with code `key` starts with `requested` threads asked by the program's
/// `num_threads` clause (0: no clause). `folds` says whether the runtime's hooks can fold its
/// team (libgomp's can: [`crate::gomp`]). Returns the team to pass to the runtime and the tracked
/// region (to hand to [`end`]), if it is tracked.
///
/// A clause is the program naming its team, which code may depend on (a hand-written barrier
/// for exactly that many threads), so it is kept. Without one, a region that folds and is long
/// (or new) gets the program's default team, folded onto the allocation; any other gets the
/// allocation (capped by the default team). Nested regions and unmanaged clients are left alone.
///
/// The SelfAnalyzer's baseline: an unmodified program never varies its own team, and a manager
/// may never vary its allocation (a program alone under `pdpa`), so after a region key has run
/// once for at least a millisecond on a team larger than one, its next instance runs on one thread,
/// once. Its time against the allocation's gives the speedup that [`end`] reports.
#[inline]
pub fn begin(requested: u32, key: u64, folds: bool) -> (u32, Option<Region>) {
    if !tracks() {
        return (requested, None);
    }
    let now = monotonic_ns();
    let history = fold::history(key);
    let verdict = if folds && !binds_threads() { history.verdict } else { Verdict::Rigid };
    if requested > 0 {
        return (requested, Some(start(Region { key, team: requested, start_ns: now, probe: false, verdict })));
    }
    let whole = verdict != Verdict::Rigid && history.took_ns.is_none_or(|t| t >= LONG_NS);
    let mut team = if whole { default_team() } else { client().team_at(default_team(), || now) };
    let probe = team > 1
        && key != 0
        && PROBE.load(Ordering::Relaxed) == key
        && PROBE.compare_exchange(key, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok();
    if probe {
        team = 1;
    }
    (team, Some(start(Region { key, team, start_ns: now, probe, verdict })))
}

/// Whether the program binds its threads to places itself (`OMP_PROC_BIND` other than `false`,
/// or `OMP_PLACES`): its teams do not fold, they are sized to the allocation at each fork. Both
/// runtimes bind a thread as they create it and fail hard when that fails (libgomp exits, libomp
/// aborts), and under the manager's cpuset backend a place outside the allocation does
/// (`EINVAL`): a whole team folded onto fewer CPUs would create threads bound outside them.
fn binds_threads() -> bool {
    static BINDS: OnceLock<bool> = OnceLock::new();
    *BINDS.get_or_init(|| {
        let bind = std::env::var("OMP_PROC_BIND").is_ok_and(|v| !v.trim().eq_ignore_ascii_case("false"));
        bind || std::env::var_os("OMP_PLACES").is_some()
    })
}

/// Tells the manager the region started: folding with its team when its key was judged so,
/// else rigid with it.
fn start(r: Region) -> Region {
    if r.verdict == Verdict::Folding {
        client().fold_region_at(r.team, r.start_ns);
    } else {
        client().begin_region_at(r.team, r.start_ns);
    }
    let how = if r.verdict == Verdict::Folding { "folding" } else { "rigid" };
    log(format_args!("cpumgr-omp: region team {} {how}{}", r.team, if r.probe { " (baseline probe)" } else { "" }));
    r
}

/// The tracked region that [`begin`] started has ended: the program is serial again, the fold
/// history takes its length, and a region long enough to time, never folded, goes to the
/// estimator (`folded`: whether its team ran folded at some barrier).
#[inline]
pub fn end(region: Option<Region>, folded: bool) {
    let Some(r) = region else { return };
    let now = monotonic_ns();
    client().end_region_at(now);
    let took = now.saturating_sub(r.start_ns);
    fold::ended(r.key, took);
    if r.key != 0 && took >= TIMED_NS && !folded {
        analyze(r, took);
    }
}

/// Records a timed region and reports the speedup estimate for its team to the slot (not the
/// probe's own: the manager decides on the allocation's). Arms the probe for a key timed on one
/// team size only.
#[cold]
fn analyze(r: Region, took_ns: u64) {
    let mut est = ESTIMATOR.lock().unwrap_or_else(|e| e.into_inner());
    let estimate = est.record(r.key, r.team, Duration::from_nanos(took_ns));
    if let Some(s) = estimate.filter(|_| !r.probe) {
        client().report_speedup(r.team, s);
    }
    if estimate.is_some() {
        // The allocation varied by itself: no probe needed.
        let _ = PROBE.compare_exchange(r.key, 0, Ordering::Relaxed, Ordering::Relaxed);
    } else if r.team > 1 && took_ns >= PROBE_NS && probing() {
        PROBE.store(r.key, Ordering::Relaxed);
    }
}
