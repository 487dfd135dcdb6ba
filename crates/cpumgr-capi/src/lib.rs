//! `libcpumgr.so`: the C ABI of [`cpumgr_client`], declared in `include/cpumgr.h`, found with
//! `pkg-config cpumgr` (`cpumgr.pc`). It gives C, C++ and Fortran programs what a Rust program
//! gets from the client crate: one [`Client`] per process, the allocation read from the slot
//! with atomic loads, the program's reports, and [`Pool`]'s malleable `parallel_for`.
//!
//! The process's runtime (client, pool, region estimator) lives behind one lock that is only
//! written by `cpumgr_init` and `cpumgr_finalize`; every other call takes a reference to it (a
//! read lock and a reference count: no system call unless init or finalize runs at that moment).
//!
//! In a child forked after init, the runtime is the parent's copy: its client acts unmanaged and
//! its pool serially, and `cpumgr_finalize` drops the copy without touching the parent's
//! registration, so a following `cpumgr_init` registers the child as a program of its own.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use cpumgr_client::estimator::Estimator;
use cpumgr_client::{Client, Mode, Options, Pool};

/// The process's cpumgr state.
struct Runtime {
    client: Arc<Client>,
    /// Created by the first `cpumgr_parallel_for` (a program that only reads its allocation
    /// starts no threads).
    pool: OnceLock<Pool>,
    /// Timings reported with `cpumgr_report_region`.
    estimator: Mutex<Estimator>,
}

static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

/// The runtime, created with `opts` unless one exists.
fn start(opts: Options) -> Arc<Runtime> {
    let mut slot = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
    slot.get_or_insert_with(|| {
        Arc::new(Runtime {
            client: Arc::new(Client::init(opts)),
            pool: OnceLock::new(),
            estimator: Mutex::new(Estimator::new()),
        })
    })
    .clone()
}

/// The runtime, created with default options on first use.
fn runtime() -> Arc<Runtime> {
    if let Some(rt) = RUNTIME.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return rt.clone();
    }
    start(Options::default())
}

fn mode_code(mode: Mode) -> c_int {
    match mode {
        Mode::Managed => 0,
        Mode::Unmanaged => 1,
        Mode::Llpc => 2,
    }
}

/// Connects the program to cpumgr (see `cpumgr.h`); returns the mode.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cpumgr_init(name: *const c_char, min: c_uint, max: c_uint) -> c_int {
    // SAFETY: the caller passes NULL or a C string.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned());
    let opts = Options { name, min: (min > 0).then_some(min), max: (max > 0).then_some(max), ..Default::default() };
    mode_code(start(opts).client.mode())
}

/// Unregisters and stops the pool (see `cpumgr.h`); in a forked child, drops the child's copy of
/// the runtime and leaves the parent registered.
#[no_mangle]
pub extern "C" fn cpumgr_finalize() {
    let rt = RUNTIME.write().unwrap_or_else(|e| e.into_inner()).take();
    drop(rt);
}

/// The mode in use.
#[no_mangle]
pub extern "C" fn cpumgr_mode() -> c_int {
    mode_code(runtime().client.mode())
}

/// Sets the request: CPUs wanted at present, fewest, most.
#[no_mangle]
pub extern "C" fn cpumgr_set_request(wanted: c_uint, min: c_uint, max: c_uint) {
    runtime().client.set_request(wanted, min, max);
}

/// The allocation: count, CPU bitmask, epoch (see `cpumgr.h`); 1 when a manager's was read (and
/// its lease still runs).
///
/// # Safety
/// Each pointer is NULL or valid for writing (`cpus` for `words` words).
#[no_mangle]
pub unsafe extern "C" fn cpumgr_allocation(count: *mut c_uint, cpus: *mut u64, words: usize, epoch: *mut u64) -> c_int {
    let rt = runtime();
    let alloc = rt.client.allocation();
    let (n, e, mask) = match &alloc {
        Some(a) => (a.count, a.epoch, a.cpus.as_words()),
        None => (rt.client.team(0), 0, &[][..]),
    };
    // SAFETY: the caller passes NULL or writable pointers, `cpus` with room for `words` words.
    unsafe {
        if !count.is_null() {
            *count = n;
        }
        if !epoch.is_null() {
            *epoch = e;
        }
        if !cpus.is_null() {
            let out = std::slice::from_raw_parts_mut(cpus, words);
            for (i, w) in out.iter_mut().enumerate() {
                *w = mask.get(i).copied().unwrap_or(0);
            }
        }
    }
    alloc.is_some() as c_int
}

/// The team for the next parallel region, at most `cap` (0: the program's maximum).
#[no_mangle]
pub extern "C" fn cpumgr_team(cap: c_uint) -> c_uint {
    runtime().client.team(cap)
}

/// A region with `team` threads starts.
#[no_mangle]
pub extern "C" fn cpumgr_begin_region(team: c_uint) {
    runtime().client.begin_region(team);
}

/// The region ended; the program is serial.
#[no_mangle]
pub extern "C" fn cpumgr_end_region() {
    runtime().client.end_region();
}

/// Gives every CPU back while the program has nothing to run.
#[no_mangle]
pub extern "C" fn cpumgr_idle() {
    runtime().client.idle();
}

/// 0, or the thread count the manager asks a program running `team` threads to shrink to.
#[no_mangle]
pub extern "C" fn cpumgr_should_yield(team: c_uint) -> c_uint {
    runtime().client.should_yield(team).unwrap_or(0)
}

/// Region `key` took `seconds` on `threads` threads; returns the speedup estimate (0: none yet),
/// which also goes to the manager.
#[no_mangle]
pub extern "C" fn cpumgr_report_region(key: usize, threads: c_uint, seconds: f64) -> f64 {
    let Ok(took) = Duration::try_from_secs_f64(seconds) else { return 0.0 };
    let rt = runtime();
    let estimate = rt.estimator.lock().unwrap_or_else(|e| e.into_inner()).record(key as u64, threads, took);
    match estimate {
        Some(s) => {
            rt.client.report_speedup(threads, s);
            s
        }
        None => 0.0,
    }
}

/// Reports a speedup the program measured itself on `cpus` CPUs.
#[no_mangle]
pub extern "C" fn cpumgr_report_speedup(cpus: c_uint, speedup: f64) {
    runtime().client.report_speedup(cpus, speedup);
}

/// The caller's context pointer, handed to every member of a region: the C side's contract
/// (`cpumgr.h`) is that `body` may run on several threads at once.
#[derive(Clone, Copy)]
struct Context(*mut c_void);
// SAFETY: the pointer is only passed back to the caller's body, which cpumgr.h says runs
// concurrently.
unsafe impl Sync for Context {}

/// Runs `body` over `[0, n)` on the malleable pool; returns the team size.
///
/// # Safety
/// `body` is NULL or a function safe to call concurrently from several threads with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn cpumgr_parallel_for(
    n: usize,
    chunk: usize,
    body: Option<unsafe extern "C" fn(usize, usize, *mut c_void)>,
    ctx: *mut c_void,
) -> c_uint {
    let Some(body) = body else { return 0 };
    let rt = runtime();
    let pool = rt.pool.get_or_init(|| Pool::new(rt.client.clone()));
    let ctx = Context(ctx);
    let f = move |b: usize, e: usize| {
        let ctx = ctx;
        // SAFETY: the caller's body, with the caller's context, as cpumgr.h promises it.
        unsafe { body(b, e, ctx.0) }
    };
    pool.run(n, chunk, &f, body as usize as u64) as c_uint
}
