//! What both runtimes' hooks share: the process's client, the program's own team cap, the
//! symbols of the real OpenMP runtime, and the region bookkeeping.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use cpumgr_client::{Client, Mode};

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
        eprintln!("cpumgr: libcpumgr_omp.so: the OpenMP runtime has no {}; aborting", name.to_string_lossy());
        std::process::abort();
    }
    p
}

/// The process's client.
pub fn client() -> &'static Client {
    cpumgr_client::global()
}

/// The real `omp_get_level`, to leave nested regions alone.
fn level() -> c_int {
    static F: OnceLock<Option<unsafe extern "C" fn() -> c_int>> = OnceLock::new();
    let f = F.get_or_init(|| {
        let p = next_symbol(c"omp_get_level");
        // SAFETY: omp_get_level has this signature in every OpenMP runtime.
        (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(p) })
    });
    // SAFETY: the real function, no arguments.
    f.map(|f| unsafe { f() }).unwrap_or(0)
}

/// The program's default team (see [`DEFAULT_TEAM`]).
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

/// Whether regions are the adapter's to size and report: managed (or LLPC), and outermost.
#[inline]
fn tracks() -> bool {
    client().mode() != Mode::Unmanaged && level() == 0
}

/// A region starts with `requested` threads asked by the program's `num_threads` clause (0: no
/// clause). Returns the team to pass to the runtime and whether the region is tracked (so its
/// end must be told).
///
/// Only a region without a clause follows the allocation (capped by the program's default
/// team); a clause is the program naming its team, which code may depend on (a hand-written
/// barrier for exactly that many threads), so it is kept and reported as it is, as libomp does
/// by itself (see [`crate::ompt`]). Nested regions and unmanaged clients are left alone.
#[inline]
pub fn begin(requested: u32) -> (u32, bool) {
    if requested > 0 {
        return (requested, begin_fixed(requested));
    }
    if !tracks() {
        return (requested, false);
    }
    let team = client().team(default_team());
    report(team);
    (team, true)
}

/// A region starts with a team the adapter cannot change (libomp with a `num_threads` clause):
/// reports it; returns whether the region is tracked.
#[inline]
pub fn begin_fixed(team: u32) -> bool {
    if !tracks() {
        return false;
    }
    report(team);
    true
}

fn report(team: u32) {
    client().begin_region(team);
    log_team(team);
}

/// The tracked region that [`begin`] started has ended.
#[inline]
pub fn end(tracked: bool) {
    if tracked {
        client().end_region();
    }
}

/// With `CPUMGR_OMP_LOG` set, prints each tracked region's team on stderr (for tests and for
/// users who want to see the adapter work).
fn log_team(team: u32) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("CPUMGR_OMP_LOG").is_some()) {
        eprintln!("cpumgr-omp: region team {team}");
    }
}

/// Interposed `omp_set_num_threads`: remembered as the program's default team, then passed on.
///
/// # Safety
/// Called by the program as the OpenMP API says.
#[no_mangle]
pub unsafe extern "C" fn omp_set_num_threads(n: c_int) {
    static REAL: OnceLock<usize> = OnceLock::new();
    set_default_team(n);
    let f = *REAL.get_or_init(|| required(c"omp_set_num_threads") as usize);
    // SAFETY: the real omp_set_num_threads.
    unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(c_int)>(f)(n) }
}

/// The real `omp_set_num_threads` (bypassing the interposed one), for the OMPT hook.
pub fn real_set_num_threads(n: u32) {
    static REAL: OnceLock<usize> = OnceLock::new();
    let f = *REAL.get_or_init(|| required(c"omp_set_num_threads") as usize);
    // SAFETY: the real omp_set_num_threads.
    unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(c_int)>(f)(n as c_int) }
}
