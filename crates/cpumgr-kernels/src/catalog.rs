//! The kernels: what each one models and the arguments it runs with at test size (about a
//! second on one CPU) and benchmark size (about ten seconds), all with tens of MB of memory.

use std::path::Path;
use std::process::Command;

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// The kernel's defaults: about a second on one CPU (tests, demos).
    Test,
    /// About ten seconds on one CPU (benchmarks).
    Bench,
}

/// One test kernel: a binary in the build directory named after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// Binary name, also the `kernel=` value of its result line.
    pub name: &'static str,
    /// The program character it stands for.
    pub models: &'static str,
    /// Arguments of a benchmark-size run (a test-size run uses the kernel's defaults).
    pub bench_args: &'static [&'static str],
    /// Whether the team size is fixed by `-threads` (an explicit `num_threads` clause) rather
    /// than chosen by the OpenMP runtime.
    pub rigid: bool,
}

/// Every kernel, in the order of `kernels/Makefile`.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "stencil",
        models: "barrier-heavy Jacobi 2-D stencil, scalable (SP/BT-like)",
        bench_args: &["-n", "1024", "-iters", "10000"],
        rigid: false,
    },
    Kernel {
        name: "montecarlo",
        models: "embarrassingly parallel Monte-Carlo pi (EP-like)",
        bench_args: &["-n", "1500000000"],
        rigid: false,
    },
    Kernel {
        name: "spmv",
        models: "CG-like sparse solver, reductions, many short regions",
        bench_args: &["-m", "512", "-iters", "4000"],
        rigid: false,
    },
    Kernel {
        name: "apsi",
        models: "small parallel fraction, gains nothing past 2 CPUs (apsi-like)",
        bench_args: &["-n", "262144", "-steps", "2500"],
        rigid: false,
    },
    Kernel {
        name: "epd",
        models: "EPD diamond: requests 2, 4, ..., MAX, MAX, ..., 2 (evolving)",
        bench_args: &["-n", "300000000"],
        rigid: false,
    },
    Kernel {
        name: "ltomcatv",
        models: "serial I/O-like phase then parallel phase, repeated (evolving)",
        bench_args: &["-n", "512", "-outer", "80", "-sweeps", "200", "-io", "8000"],
        rigid: false,
    },
    Kernel {
        name: "pipeline",
        models: "LU-like wavefront with point-to-point spin flags",
        bench_args: &["-n", "1024", "-iters", "1250"],
        rigid: false,
    },
    Kernel {
        name: "rigid",
        models: "fixed number of busy-waiting threads with spin barriers (MPI-like)",
        bench_args: &["-n", "1048576", "-iters", "8000"],
        rigid: true,
    },
    Kernel {
        name: "constructs",
        models: "one long region holding every construct (reductions, single, critical, ordered, tasks, sections), then nesting, cancellation and a hand-written spin barrier, checksummed",
        bench_args: &["-steps", "2000"],
        rigid: false,
    },
];

/// The kernel named `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Kernel> {
    KERNELS.iter().find(|k| k.name == name)
}

impl Kernel {
    /// A command running this kernel from `bin_dir` at `size` with `threads` threads: through
    /// `OMP_NUM_THREADS` for a malleable kernel, through `-threads` (and `OMP_NUM_THREADS`) for
    /// the rigid one. Callers add their own environment (`CPUMGR_KERNEL_LOG`, wait policy).
    pub fn command(&self, bin_dir: &Path, size: Size, threads: usize) -> Command {
        let mut cmd = Command::new(bin_dir.join(self.name));
        cmd.env("OMP_NUM_THREADS", threads.to_string());
        if size == Size::Bench {
            cmd.args(self.bench_args);
        }
        if self.rigid {
            cmd.arg("-threads").arg(threads.to_string());
        }
        cmd
    }
}
