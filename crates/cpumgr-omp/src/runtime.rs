//! The real OpenMP runtime and the process's client, as every part of the adapter reaches them:
//! the runtime's own symbols (looked up past this library), its nesting level, team size and thread number, the
//! program's own default team (`OMP_NUM_THREADS`, `omp_set_num_threads`), and the log.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use cpumgr_client::Client;

/// The program's own team when a region names none: `omp_set_num_threads`'s last value, else the
/// first entry of `OMP_NUM_THREADS`, else the CPUs it could use at start (libgomp's and libomp's
/// own default). 0 until first needed.
static DEFAULT_TEAM: AtomicU32 = AtomicU32::new(0);

/// Looks a symbol up in the libraries loaded after this one (the real OpenMP runtime).
pub fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// The real symbol `name`, or an abort that names it: the program called an entry point that its
/// own runtime does not have, which cannot happen unless the libraries are mismatched.
pub fn required(name: &CStr) -> *mut c_void {
    let p = next_symbol(name);
    if p.is_null() {
        cpumgr_client::say(format_args!(
            "cpumgr: libcpumgr_omp.so: the OpenMP runtime has no {}; aborting",
            name.to_string_lossy()
        ));
        std::process::abort();
    }
    p
}

/// The process's client.
pub fn client() -> &'static Client {
    cpumgr_client::global()
}

/// Calls the runtime's query `$name` (an `int (void)` OpenMP function such as
/// `omp_get_level`), looked up once; `None` when the runtime lacks it.
macro_rules! query {
    ($name:literal) => {{
        static F: OnceLock<Option<unsafe extern "C" fn() -> c_int>> = OnceLock::new();
        let f = F.get_or_init(|| {
            let p = next_symbol($name);
            // SAFETY: the OpenMP queries named here have this signature in every runtime.
            (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(p) })
        });
        // SAFETY: the real function, no arguments.
        f.map(|f| unsafe { f() })
    }};
}

/// The real `omp_get_level`, to leave nested regions alone.
pub fn level() -> c_int {
    query!(c"omp_get_level").unwrap_or(0)
}

/// The calling thread's number in its team (the real `omp_get_thread_num`).
pub fn thread_num() -> u32 {
    query!(c"omp_get_thread_num").unwrap_or(0).max(0) as u32
}

/// The program's default team: `omp_set_num_threads`'s last value, else the first entry of
/// `OMP_NUM_THREADS`, else the CPUs it could use at start.
pub fn default_team() -> u32 {
    let t = DEFAULT_TEAM.load(Ordering::Relaxed);
    if t > 0 {
        return t;
    }
    let t = std::env::var("OMP_NUM_THREADS")
        .ok()
        .and_then(|v| v.split(',').next().and_then(|f| f.trim().parse::<u32>().ok()))
        .filter(|&n| n > 0)
        .unwrap_or_else(cpumgr_client::client::allowed_cpus);
    DEFAULT_TEAM.store(t, Ordering::Relaxed);
    t
}

/// Records the program's own `omp_set_num_threads`.
pub fn set_default_team(n: c_int) {
    if n > 0 {
        DEFAULT_TEAM.store(n as u32, Ordering::Relaxed);
    }
}

/// With `CPUMGR_OMP_LOG` set, prints a line on stderr (each tracked region's team, each team's
/// verdict: for tests and for users who want to see the adapter work).
pub fn log(line: std::fmt::Arguments) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("CPUMGR_OMP_LOG").is_some()) {
        cpumgr_client::say(line);
    }
}

/// The number of threads in the calling thread's team (the real `omp_get_num_threads`).
pub fn team_size() -> u32 {
    query!(c"omp_get_num_threads").unwrap_or(1).max(1) as u32
}

/// Interposed `omp_set_num_threads`: remembered as the program's default team, then passed on.
///
/// # Safety
/// Called by the program as the OpenMP API says.
#[no_mangle]
pub unsafe extern "C" fn omp_set_num_threads(n: c_int) {
    set_default_team(n);
    let real = real!(omp_set_num_threads, unsafe extern "C" fn(c_int));
    // SAFETY: the real omp_set_num_threads, with the program's argument.
    unsafe { real(n) }
}

/// The real `omp_set_num_threads` (bypassing the interposed one), for the OMPT hook.
pub fn real_set_num_threads(n: u32) {
    let real = real!(omp_set_num_threads, unsafe extern "C" fn(c_int));
    // SAFETY: the real omp_set_num_threads.
    unsafe { real(n as c_int) }
}
