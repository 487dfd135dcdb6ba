//! LLVM libomp: the adapter as an OMPT tool (OpenMP 5.x §4.2). libomp finds `ompt_start_tool`
//! in the process at start-up and calls it; the tool registers `parallel_begin` and
//! `parallel_end` callbacks. libomp calls `parallel_begin` on the encountering thread *before* it
//! reads the `nthreads-var` ICV to size the team, so setting that ICV there (with the real
//! `omp_set_num_threads`) sizes this very region. A region with an explicit `num_threads` clause
//! keeps it (libomp does not read the ICV then); the adapter reports that team as it is.
//!
//! libgomp never calls `ompt_start_tool`, so the symbol is inert there.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::adapter::{self, Region};

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
/// `ompt_set_always`: the callback is invoked for every event.
const SET_ALWAYS: c_int = 5;

/// The team the adapter last set in the ICV (0: none yet): a requested parallelism that differs
/// from it came from a `num_threads` clause.
static LAST_SET: AtomicU32 = AtomicU32::new(0);

/// Region tool data: tracked by the adapter.
const TRACKED: u64 = 1;

thread_local! {
    /// The tracked region this thread forked: OMPT calls `parallel_begin` and `parallel_end` on
    /// the encountering thread, and only outermost regions are tracked, so there is at most one.
    /// The region's code address (`codeptr_ra`) is its key for the estimator.
    static OPEN: Cell<Option<Region>> = const { Cell::new(None) };
}

static mut RESULT: StartToolResult =
    StartToolResult { initialize, finalize, tool_data: OmptData { value: 0 } };

/// The OMPT entry point libomp looks for.
///
/// # Safety
/// Called once by the OpenMP runtime at start-up.
#[no_mangle]
pub unsafe extern "C" fn ompt_start_tool(_omp_version: c_uint, _runtime_version: *const c_char) -> *mut StartToolResult {
    // SAFETY: handed to the runtime, which is its only user.
    std::ptr::addr_of_mut!(RESULT)
}

unsafe extern "C" fn initialize(lookup: Lookup, _device: c_int, _data: *mut OmptData) -> c_int {
    // SAFETY: `lookup` is the runtime's and takes a NUL-terminated name.
    let Some(set) = (unsafe { lookup(c"ompt_set_callback".as_ptr()) }) else {
        cpumgr_client::say(format_args!("cpumgr: libcpumgr_omp.so: this OpenMP runtime has no ompt_set_callback; regions are not sized"));
        return 0;
    };
    // SAFETY: ompt_set_callback has this signature.
    let set = unsafe { std::mem::transmute::<unsafe extern "C" fn(), SetCallback>(set) };
    // SAFETY: the callbacks have the signatures OMPT gives these events.
    let ok = unsafe {
        set(CALLBACK_PARALLEL_BEGIN, Some(std::mem::transmute::<ParallelBegin, unsafe extern "C" fn()>(parallel_begin)))
            == SET_ALWAYS
            && set(CALLBACK_PARALLEL_END, Some(std::mem::transmute::<ParallelEnd, unsafe extern "C" fn()>(parallel_end)))
                == SET_ALWAYS
    };
    if !ok {
        cpumgr_client::say(format_args!("cpumgr: libcpumgr_omp.so: the OpenMP runtime refused the parallel callbacks; regions are not sized"));
    }
    1
}

unsafe extern "C" fn finalize(_data: *mut OmptData) {}

type ParallelBegin = unsafe extern "C" fn(*mut OmptData, *const c_void, *mut OmptData, c_uint, c_int, *const c_void);
type ParallelEnd = unsafe extern "C" fn(*mut OmptData, *mut OmptData, c_int, *const c_void);

unsafe extern "C" fn parallel_begin(
    _task: *mut OmptData,
    _frame: *const c_void,
    region: *mut OmptData,
    requested: c_uint,
    _flags: c_int,
    code: *const c_void,
) {
    let last = LAST_SET.load(Ordering::Relaxed);
    let explicit = last != 0 && requested != last && requested != adapter::default_team();
    let tracked = if explicit {
        adapter::begin(requested, 0, false).1
    } else {
        let (team, tracked) = adapter::begin(0, code as usize as u64, false);
        if tracked.is_some() && team != last {
            adapter::real_set_num_threads(team);
            LAST_SET.store(team, Ordering::Relaxed);
        }
        tracked
    };
    if tracked.is_some() {
        OPEN.with(|o| o.set(tracked));
    }
    if !region.is_null() {
        // SAFETY: the runtime's per-region tool word.
        unsafe { (*region).value = if tracked.is_some() { TRACKED } else { 0 } };
    }
}

unsafe extern "C" fn parallel_end(region: *mut OmptData, _task: *mut OmptData, _flags: c_int, _code: *const c_void) {
    // SAFETY: the word parallel_begin wrote.
    if !region.is_null() && unsafe { (*region).value } == TRACKED {
        adapter::end(OPEN.with(|o| o.take()), false);
    }
}
