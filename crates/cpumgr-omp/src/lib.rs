//! `libcpumgr_omp.so`: the OpenMP adapter. Loaded into an unmodified OpenMP program with
//! `LD_PRELOAD` (what `cpumgr run --omp` does), it makes every outermost parallel region run with
//! the team the manager allocates, and tells the manager where the program is:
//!
//! - before a region without a `num_threads` clause: the team is `min(allocation, cap)`, where
//!   the cap is the program's own default (`OMP_NUM_THREADS`, `omp_set_num_threads`, or the CPUs
//!   it could use at start); a clause is kept as the program wrote it; the slot says "parallel, team T", so the manager treats the
//!   program as rigid with T threads until the region ends;
//! - after it: "serial, team 1", which the manager counts as a request of one CPU once it has
//!   lasted a quantum (paper 000's ltomcatv pattern).
//!
//! Two runtimes, two mechanisms, one [`adapter`] (regions) over one [`runtime`] (the real
//! runtime's symbols, the client, the log):
//! - GNU libgomp ([`gomp`]): every fork entry point the compiler calls (`GOMP_parallel`, the
//!   `GOMP_parallel_loop_*` family, sections, reductions, the old `_start`/`_end` pair) is
//!   interposed; the wrapper passes the allocation as `num_threads` and calls the real one.
//! - LLVM libomp ([`ompt`]): the adapter is an OMPT tool (`ompt_start_tool`); at each region's
//!   begin callback, before libomp sizes the team, it sets the team with `omp_set_num_threads`.
//!
//! Without a manager the client keeps the program's own team, so preloading the adapter changes
//! nothing but one line on stderr.

/// The real entry point `$name` of the OpenMP runtime (the next library after this one), as a
/// function of type `$ty`, looked up once; an abort that names it when the runtime lacks it.
macro_rules! real {
    ($name:ident, $ty:ty) => {{
        static REAL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let name = concat!(stringify!($name), "\0");
        let f = *REAL.get_or_init(|| {
            $crate::runtime::required(std::ffi::CStr::from_bytes_with_nul(name.as_bytes()).unwrap()) as usize
        });
        // SAFETY: the runtime's entry point of that name has this type in its ABI.
        unsafe { std::mem::transmute::<usize, $ty>(f) }
    }};
}

pub mod adapter;
pub mod fold;
pub mod gomp;
pub mod ompt;
pub mod runtime;
pub mod spread;
