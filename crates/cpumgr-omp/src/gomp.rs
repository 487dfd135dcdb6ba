//! GNU libgomp: the fork entry points GCC emits for `#pragma omp parallel` and its combined forms,
//! interposed. Each wrapper sizes the team ([`adapter::begin`], the outlined body's address as the
//! region's key), calls the real entry point found with `dlsym(RTLD_NEXT)`, and reports the
//! region's end with its timing. The `_start` forms end in
//! `GOMP_parallel_end`, which reports it there.
//!
//! The team of a region forked by `GOMP_parallel` or a combined loop or sections form can fold
//! ([`fold`]): its body runs through a trampoline that makes each thread a member of the region's
//! [`Team`], and the barriers GCC emits inside it (`GOMP_barrier`, the ends of worksharing loops
//! and sections) are the team's cooperative barrier. `GOMP_parallel_reductions` (its data is
//! libgomp's to read) and the old `_start` forms keep rigid teams.
//!
//! Signatures are libgomp's ABI (`libgomp_g.h`, GCC 4.9 and later).

use std::cell::Cell;
use std::ffi::{c_int, c_long, c_uint, c_ulong, c_void};

use crate::adapter::{self, Region};
use crate::fold::{self, Team};

/// An outlined region body.
type Body = Option<unsafe extern "C" fn(*mut c_void)>;

thread_local! {
    /// The `_start` regions this thread has open, innermost in the low bit: 1 when tracked. A
    /// `_start` region ends in `GOMP_parallel_end` on the thread that opened it.
    static OPEN_STARTS: Cell<u64> = const { Cell::new(0) };
    /// The tracked `_start` region this thread has open: only outermost regions are tracked, so
    /// there is at most one.
    static TRACKED_START: Cell<Option<Region>> = const { Cell::new(None) };
}

/// The argument a folding region's threads get instead of the body's: the body, its data, and
/// the team.
struct Member {
    body: unsafe extern "C" fn(*mut c_void),
    data: *mut c_void,
    team: *const Team,
}

/// The body libgomp runs on every thread of a folding region: the real body, as a team member.
unsafe extern "C" fn member(arg: *mut c_void) {
    // SAFETY: `arg` is the `Member` the forking wrapper passed, alive until its call returns.
    let m = unsafe { &*(arg as *const Member) };
    // SAFETY: the team outlives the region; the body and data are the program's own.
    unsafe { (*m.team).member(m.body, m.data) }
}

/// Defines an interposed libgomp entry point: `$name(fn, data, num_threads, $rest...)`. The
/// real function is looked up once; `$kind` says whether the region's team folds (`fold`),
/// ends in the call with a rigid team (`whole`), or ends at `GOMP_parallel_end` (`start`).
macro_rules! fork_entry {
    ($kind:ident, $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)?) => {
        #[doc = concat!("Interposed `", stringify!($name), "`: the region's team follows the allocation.")]
        ///
        /// # Safety
        /// Called by GCC-compiled code with libgomp's ABI.
        #[no_mangle]
        pub unsafe extern "C" fn $name(body: Body, data: *mut c_void, num_threads: c_uint $(, $arg: $ty)*) $(-> $ret)? {
            let real = real!($name, unsafe extern "C" fn(Body, *mut c_void, c_uint $(, $ty)*) $(-> $ret)?);
            let key = body.map_or(0, |b| b as usize as u64);
            fork_entry!(@call $kind, key, num_threads, |b: Body, d: *mut c_void, t: c_uint| unsafe { real(b, d, t $(, $arg)*) }, body, data)
        }
    };
    (@call fold, $key:ident, $n:ident, $real:expr, $body:ident, $data:ident) => {{
        let real = $real;
        let (team, region) = adapter::begin($n, $key, true);
        match (region, $body) {
            (Some(r), Some(b)) => {
                let members = Team::new(r.key, r.verdict);
                members.open();
                let mut m = Member { body: b, data: $data, team: &members };
                let out = real(Some(member), &mut m as *mut Member as *mut c_void, team);
                members.close();
                adapter::end(Some(r), members.ever_folded());
                out
            }
            _ => {
                let out = real($body, $data, team);
                adapter::end(region, false);
                out
            }
        }
    }};
    (@call whole, $key:ident, $n:ident, $real:expr, $body:ident, $data:ident) => {{
        let (team, region) = adapter::begin($n, $key, false);
        let out = ($real)($body, $data, team);
        adapter::end(region, false);
        out
    }};
    (@call start, $key:ident, $n:ident, $real:expr, $body:ident, $data:ident) => {{
        let (team, region) = adapter::begin($n, $key, false);
        OPEN_STARTS.with(|o| o.set(o.get() << 1 | region.is_some() as u64));
        if region.is_some() {
            TRACKED_START.with(|t| t.set(region));
        }
        ($real)($body, $data, team)
    }};
}

fork_entry!(fold, GOMP_parallel(flags: c_uint));
fork_entry!(whole, GOMP_parallel_reductions(flags: c_uint) -> c_uint);
fork_entry!(fold, GOMP_parallel_sections(count: c_uint, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_static(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_dynamic(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_guided(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_runtime(start: c_long, end: c_long, incr: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_nonmonotonic_dynamic(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_nonmonotonic_guided(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_nonmonotonic_runtime(start: c_long, end: c_long, incr: c_long, flags: c_uint));
fork_entry!(fold, GOMP_parallel_loop_maybe_nonmonotonic_runtime(start: c_long, end: c_long, incr: c_long, flags: c_uint));
fork_entry!(start, GOMP_parallel_start());
fork_entry!(start, GOMP_parallel_sections_start(count: c_uint));
fork_entry!(start, GOMP_parallel_loop_static_start(start: c_long, end: c_long, incr: c_long, chunk: c_long));
fork_entry!(start, GOMP_parallel_loop_dynamic_start(start: c_long, end: c_long, incr: c_long, chunk: c_long));
fork_entry!(start, GOMP_parallel_loop_guided_start(start: c_long, end: c_long, incr: c_long, chunk: c_long));
fork_entry!(start, GOMP_parallel_loop_runtime_start(start: c_long, end: c_long, incr: c_long));

/// Interposed `GOMP_parallel_end`: the end of a region opened by a `_start` entry point.
///
/// # Safety
/// Called by GCC-compiled code with libgomp's ABI.
#[no_mangle]
pub unsafe extern "C" fn GOMP_parallel_end() {
    let real = real!(GOMP_parallel_end, unsafe extern "C" fn());
    // SAFETY: the real GOMP_parallel_end.
    unsafe { real() };
    let tracked = OPEN_STARTS.with(|o| {
        let open = o.get();
        o.set(open >> 1);
        open & 1 == 1
    });
    if tracked {
        adapter::end(TRACKED_START.with(|t| t.take()), false);
    }
}

/// Interposed `GOMP_barrier` (`omp barrier`, and the end of `single` and static loops): the
/// team's cooperative barrier in a folding region, libgomp's elsewhere.
///
/// # Safety
/// Called by GCC-compiled code with libgomp's ABI.
#[no_mangle]
pub unsafe extern "C" fn GOMP_barrier() {
    match Team::current() {
        Some(t) => t.barrier(|_| {}, real_barrier),
        None => real_barrier(),
    }
}

/// libgomp's own `GOMP_barrier`.
fn real_barrier() {
    let real = real!(GOMP_barrier, unsafe extern "C" fn());
    // SAFETY: the real barrier, called from a team member.
    unsafe { real() }
}

/// Defines an interposed worksharing end: in a folding region, the `_nowait` end (which
/// frees the construct when the last thread passes) then the team's barrier; elsewhere the real
/// end with libgomp's barrier.
macro_rules! workshare_end {
    ($name:ident, $nowait:ident) => {
        #[doc = concat!("Interposed `", stringify!($name), "`: a worksharing end whose barrier is the team's.")]
        ///
        /// # Safety
        /// Called by GCC-compiled code with libgomp's ABI.
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            let real = real!($name, unsafe extern "C" fn());
            match Team::current() {
                Some(t) => {
                    let nowait = real!($nowait, unsafe extern "C" fn());
                    // SAFETY: the real functions, no arguments.
                    unsafe { nowait() };
                    t.barrier(|_| {}, real_barrier);
                }
                // SAFETY: the real function.
                None => unsafe { real() },
            }
        }
    };
}

workshare_end!(GOMP_loop_end, GOMP_loop_end_nowait);
workshare_end!(GOMP_sections_end, GOMP_sections_end_nowait);

/// Defines an interposed task-creating entry point: it marks that the program has tasks (they
/// complete at libgomp's barriers, which folding teams then also run) and calls the real one.
macro_rules! task_entry {
    ($name:ident ( $($arg:ident : $ty:ty),* )) => {
        #[doc = concat!("Interposed `", stringify!($name), "`: notes that the program uses tasks.")]
        ///
        /// # Safety
        /// Called by GCC-compiled code with libgomp's ABI.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) {
            fold::TASKS.store(true, std::sync::atomic::Ordering::SeqCst);
            let real = real!($name, unsafe extern "C" fn($($ty),*));
            // SAFETY: the real entry point, with the arguments as given.
            unsafe { real($($arg),*) }
        }
    };
}

type CopyFn = Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;

task_entry!(GOMP_task(body: Body, data: *mut c_void, cpyfn: CopyFn, arg_size: c_long, arg_align: c_long, if_clause: bool, flags: c_uint, depend: *mut *mut c_void, priority: c_int, detach: *mut c_void));
task_entry!(GOMP_taskloop(body: Body, data: *mut c_void, cpyfn: CopyFn, arg_size: c_long, arg_align: c_long, flags: c_uint, num_tasks: c_ulong, priority: c_int, start: c_long, end: c_long, step: c_long));
task_entry!(GOMP_taskloop_ull(body: Body, data: *mut c_void, cpyfn: CopyFn, arg_size: c_long, arg_align: c_long, flags: c_uint, num_tasks: c_ulong, priority: c_int, up: bool, start: u64, end: u64, step: u64));
