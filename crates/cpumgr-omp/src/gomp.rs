//! GNU libgomp: the fork entry points GCC emits for `#pragma omp parallel` and its combined forms,
//! interposed. Each wrapper sizes the team ([`adapter::begin`], the outlined body's address as the
//! region's key), calls the real entry point found with `dlsym(RTLD_NEXT)`, and reports the
//! region's end with its timing. The `_start` forms end in
//! `GOMP_parallel_end`, which reports it there.
//!
//! Signatures are libgomp's ABI (`libgomp_g.h`, GCC 4.9 and later).

use std::ffi::{c_long, c_uint, c_void};
use std::cell::Cell;
use std::sync::OnceLock;

use crate::adapter::{self, required, Region};

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

/// Defines an interposed libgomp entry point: `$name(fn, data, num_threads, $rest...)`. The
/// real function is looked up once; `$kind` says whether the region ends in the call (`whole`)
/// or at `GOMP_parallel_end` (`start`).
macro_rules! fork_entry {
    ($kind:ident, $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)?) => {
        #[doc = concat!("Interposed `", stringify!($name), "`: the region's team follows the allocation.")]
        ///
        /// # Safety
        /// Called by GCC-compiled code with libgomp's ABI.
        #[no_mangle]
        pub unsafe extern "C" fn $name(body: Body, data: *mut c_void, num_threads: c_uint $(, $arg: $ty)*) $(-> $ret)? {
            static REAL: OnceLock<usize> = OnceLock::new();
            let f = *REAL.get_or_init(|| required(unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) }) as usize);
            // SAFETY: the real entry point has exactly this signature.
            let real = unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(Body, *mut c_void, c_uint $(, $ty)*) $(-> $ret)?>(f) };
            let (team, region) = adapter::begin(num_threads, body.map_or(0, |b| b as usize as u64));
            fork_entry!(@call $kind, region, unsafe { real(body, data, team $(, $arg)*) })
        }
    };
    (@call whole, $region:ident, $call:expr) => {{
        let r = $call;
        adapter::end($region);
        r
    }};
    (@call start, $region:ident, $call:expr) => {{
        OPEN_STARTS.with(|o| o.set(o.get() << 1 | $region.is_some() as u64));
        if $region.is_some() {
            TRACKED_START.with(|t| t.set($region));
        }
        $call
    }};
}

fork_entry!(whole, GOMP_parallel(flags: c_uint));
fork_entry!(whole, GOMP_parallel_reductions(flags: c_uint) -> c_uint);
fork_entry!(whole, GOMP_parallel_sections(count: c_uint, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_static(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_dynamic(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_guided(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_runtime(start: c_long, end: c_long, incr: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_nonmonotonic_dynamic(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_nonmonotonic_guided(start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_nonmonotonic_runtime(start: c_long, end: c_long, incr: c_long, flags: c_uint));
fork_entry!(whole, GOMP_parallel_loop_maybe_nonmonotonic_runtime(start: c_long, end: c_long, incr: c_long, flags: c_uint));
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
    static REAL: OnceLock<usize> = OnceLock::new();
    let f = *REAL.get_or_init(|| required(c"GOMP_parallel_end") as usize);
    // SAFETY: the real GOMP_parallel_end.
    unsafe { std::mem::transmute::<usize, unsafe extern "C" fn()>(f)() };
    let tracked = OPEN_STARTS.with(|o| {
        let open = o.get();
        o.set(open >> 1);
        open & 1 == 1
    });
    if tracked {
        adapter::end(TRACKED_START.with(|t| t.take()));
    }
}
