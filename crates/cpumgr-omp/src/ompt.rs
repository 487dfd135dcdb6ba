//! LLVM libomp: the adapter as an OMPT tool (OpenMP 5.x §4.2). libomp finds `ompt_start_tool`
//! in the process at start-up and calls it; the tool registers `parallel_begin` and
//! `parallel_end` callbacks. libomp calls `parallel_begin` on the encountering thread *before* it
//! reads the `nthreads-var` ICV to size the team, so setting that ICV there (with the real
//! `omp_set_num_threads`) sizes this very region. A region with an explicit `num_threads` clause
//! keeps it (libomp does not read the ICV then); the adapter reports that team as it is.
//!
//! A region folds as libgomp's do ([`crate::fold`]): its [`Team`] lives in the
//! region's tool data, each thread becomes a member at its implicit task's begin callback, and
//! `__kmpc_barrier` (every barrier clang emits: `omp barrier`, the ends of worksharing constructs
//! and `single`) is the team's cooperative barrier. The barriers libomp runs inside itself
//! (blocking reductions, the join) stay libomp's: a member of a folded team sets its blocktime to
//! 0 so that they sleep at once rather than spin for libomp's 200 ms.
//!
//! libgomp never calls `ompt_start_tool`, so the symbol is inert there.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use std::sync::OnceLock;

use crate::adapter::{self, Region};
use crate::fold::{self, Team};
use crate::runtime;

/// `ompt_data_t`: one word of tool data per region.
#[repr(C)]
pub union OmptData {
    value: u64,
    ptr: *mut c_void,
}

/// `ompt_start_tool_result_t`.
#[repr(C)]
pub struct StartToolResult {
    initialize: unsafe extern "C" fn(Lookup, c_int, *mut OmptData) -> c_int,
    finalize: unsafe extern "C" fn(*mut OmptData),
    tool_data: OmptData,
}

/// `ompt_function_lookup_t`.
type Lookup = unsafe extern "C" fn(*const c_char) -> Option<unsafe extern "C" fn()>;
/// `ompt_set_callback_t`.
type SetCallback = unsafe extern "C" fn(c_int, Option<unsafe extern "C" fn()>) -> c_int;

/// `ompt_callback_parallel_begin`.
const CALLBACK_PARALLEL_BEGIN: c_int = 3;
/// `ompt_callback_parallel_end`.
const CALLBACK_PARALLEL_END: c_int = 4;
/// `ompt_callback_implicit_task`.
const CALLBACK_IMPLICIT_TASK: c_int = 7;
/// `ompt_scope_begin`.
const SCOPE_BEGIN: c_int = 1;
/// `ompt_task_implicit` in an implicit task's flags.
const TASK_IMPLICIT: c_int = 2;
/// `ompt_set_always`: the callback is invoked for every event.
const SET_ALWAYS: c_int = 5;

/// The team the adapter last set in the ICV (0: none yet): a requested parallelism that differs
/// from it came from a `num_threads` clause.
static LAST_SET: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The tracked region this thread forked: OMPT calls `parallel_begin` and `parallel_end` on
    /// the encountering thread, and only outermost regions are tracked, so there is at most one.
    /// The region's code address (`codeptr_ra`) is its key for the estimator.
    static OPEN: Cell<Option<Region>> = const { Cell::new(None) };
}

static mut RESULT: StartToolResult = StartToolResult { initialize, finalize, tool_data: OmptData { value: 0 } };

/// The OMPT entry point libomp looks for.
///
/// # Safety
/// Called once by the OpenMP runtime at start-up.
#[no_mangle]
pub unsafe extern "C" fn ompt_start_tool(
    _omp_version: c_uint,
    _runtime_version: *const c_char,
) -> *mut StartToolResult {
    // SAFETY: handed to the runtime, which is its only user.
    std::ptr::addr_of_mut!(RESULT)
}

unsafe extern "C" fn initialize(lookup: Lookup, _device: c_int, _data: *mut OmptData) -> c_int {
    // SAFETY: `lookup` is the runtime's and takes a NUL-terminated name.
    let Some(set) = (unsafe { lookup(c"ompt_set_callback".as_ptr()) }) else {
        cpumgr_client::say(format_args!(
            "cpumgr: libcpumgr_omp.so: this OpenMP runtime has no ompt_set_callback; regions are not sized"
        ));
        return 0;
    };
    // SAFETY: ompt_set_callback has this signature.
    let set = unsafe { std::mem::transmute::<unsafe extern "C" fn(), SetCallback>(set) };
    // SAFETY: the callbacks have the signatures OMPT gives these events.
    let ok = unsafe {
        set(CALLBACK_PARALLEL_BEGIN, Some(std::mem::transmute::<ParallelBegin, unsafe extern "C" fn()>(parallel_begin)))
            == SET_ALWAYS
            && set(
                CALLBACK_PARALLEL_END,
                Some(std::mem::transmute::<ParallelEnd, unsafe extern "C" fn()>(parallel_end)),
            ) == SET_ALWAYS
            && set(
                CALLBACK_IMPLICIT_TASK,
                Some(std::mem::transmute::<ImplicitTask, unsafe extern "C" fn()>(implicit_task)),
            ) == SET_ALWAYS
    };
    if !ok {
        cpumgr_client::say(format_args!(
            "cpumgr: libcpumgr_omp.so: the OpenMP runtime refused the parallel callbacks; regions are not sized"
        ));
    }
    1
}

unsafe extern "C" fn finalize(_data: *mut OmptData) {}

type ParallelBegin = unsafe extern "C" fn(*mut OmptData, *const c_void, *mut OmptData, c_uint, c_int, *const c_void);
type ParallelEnd = unsafe extern "C" fn(*mut OmptData, *mut OmptData, c_int, *const c_void);
type ImplicitTask = unsafe extern "C" fn(c_int, *mut OmptData, *mut OmptData, c_uint, c_uint, c_int);

unsafe extern "C" fn parallel_begin(
    _task: *mut OmptData,
    _frame: *const c_void,
    region: *mut OmptData,
    requested: c_uint,
    _flags: c_int,
    code: *const c_void,
) {
    let last = LAST_SET.load(Ordering::Relaxed);
    let explicit = last != 0 && requested != last && requested != runtime::default_team();
    let tracked = if explicit {
        adapter::begin(requested, 0, true).1
    } else {
        let (team, tracked) = adapter::begin(0, code as usize as u64, true);
        if tracked.is_some() && team != last {
            runtime::real_set_num_threads(team);
            LAST_SET.store(team, Ordering::Relaxed);
        }
        tracked
    };
    let team = tracked.map(|r| {
        OPEN.with(|o| o.set(tracked));
        let t = Box::new(Team::new(r.key, r.verdict));
        t.open();
        Box::into_raw(t)
    });
    if !region.is_null() {
        // SAFETY: the runtime's per-region tool word.
        unsafe { (*region).ptr = team.map_or(std::ptr::null_mut(), |t| t.cast()) };
    }
}

unsafe extern "C" fn parallel_end(region: *mut OmptData, _task: *mut OmptData, _flags: c_int, _code: *const c_void) {
    // SAFETY: the word parallel_begin wrote: a team of ours, or null.
    let team = if region.is_null() { std::ptr::null_mut() } else { unsafe { (*region).ptr } };
    if !team.is_null() {
        // SAFETY: made by Box::into_raw in parallel_begin; every member's implicit task has ended.
        let team = unsafe { Box::from_raw(team.cast::<Team>()) };
        team.close();
        adapter::end(OPEN.with(|o| o.take()), team.ever_folded());
    }
}

/// An implicit task begins or ends: a thread joins or leaves a tracked region's team. The task's
/// own tool word says, at its end, whether it had joined one.
unsafe extern "C" fn implicit_task(
    endpoint: c_int,
    parallel: *mut OmptData,
    task: *mut OmptData,
    size: c_uint,
    _index: c_uint,
    flags: c_int,
) {
    if flags & TASK_IMPLICIT == 0 || task.is_null() {
        return;
    }
    if endpoint == SCOPE_BEGIN {
        // SAFETY: the runtime's tool words; the region's holds a team of ours or null.
        let team = if parallel.is_null() { std::ptr::null_mut() } else { unsafe { (*parallel).ptr } };
        // SAFETY: as above.
        unsafe { (*task).ptr = team };
        if !team.is_null() {
            // SAFETY: a live team: its region has not ended.
            unsafe { (*team.cast::<Team>()).enter(size) };
        }
    } else if !unsafe { (*task).ptr }.is_null() {
        // SAFETY: as above.
        unsafe { (*task).ptr = std::ptr::null_mut() };
        // The blocktime stays as the last barrier set it: libomp may be shutting down here.
        fold::leave();
    }
}

/// Interposed `__kmpc_barrier`: the team's cooperative barrier in a tracked region, libomp's
/// elsewhere.
///
/// # Safety
/// Called by clang-compiled code with libomp's ABI.
#[no_mangle]
pub unsafe extern "C" fn __kmpc_barrier(loc: *mut c_void, gtid: i32) {
    let real = real!(__kmpc_barrier, unsafe extern "C" fn(*mut c_void, i32));
    match Team::current() {
        // SAFETY: the real barrier, with the arguments as given.
        Some(t) => t.barrier(set_blocktime, || unsafe { real(loc, gtid) }),
        // SAFETY: as above.
        None => unsafe { real(loc, gtid) },
    }
}

/// Interposed `__kmpc_omp_task_alloc`: notes that the program uses tasks (see [`fold::TASKS`]).
///
/// # Safety
/// Called by clang-compiled code with libomp's ABI.
#[no_mangle]
pub unsafe extern "C" fn __kmpc_omp_task_alloc(
    loc: *mut c_void,
    gtid: i32,
    flags: i32,
    task_size: usize,
    shareds_size: usize,
    entry: *mut c_void,
) -> *mut c_void {
    fold::TASKS.store(true, Ordering::SeqCst);
    type Alloc = unsafe extern "C" fn(*mut c_void, i32, i32, usize, usize, *mut c_void) -> *mut c_void;
    let real = real!(__kmpc_omp_task_alloc, Alloc);
    // SAFETY: the real entry point, with the arguments as given.
    unsafe { real(loc, gtid, flags, task_size, shareds_size, entry) }
}

thread_local! {
    /// Whether this thread set its libomp blocktime to 0 (folded).
    static PASSIVE: Cell<bool> = const { Cell::new(false) };
}

/// Makes this thread's waits in libomp's own barriers passive (`folded`: blocktime 0) or libomp's
/// default again; a call only on a change.
fn set_blocktime(folded: bool) {
    if PASSIVE.with(|p| p.replace(folded)) == folded {
        return;
    }
    static SET: OnceLock<Option<unsafe extern "C" fn(c_int)>> = OnceLock::new();
    static DEFAULT: OnceLock<c_int> = OnceLock::new();
    let set = SET.get_or_init(|| {
        let p = runtime::next_symbol(c"kmp_set_blocktime");
        // SAFETY: kmp_set_blocktime(int) is libomp's.
        (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int)>(p) })
    });
    let default = *DEFAULT.get_or_init(|| {
        let p = runtime::next_symbol(c"kmp_get_blocktime");
        // SAFETY: kmp_get_blocktime() is libomp's.
        if p.is_null() {
            200
        } else {
            // SAFETY: as above.
            unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(p)() }
        }
    });
    if let Some(set) = set {
        // SAFETY: the real function.
        unsafe { set(if folded { 0 } else { default }) };
    }
}
