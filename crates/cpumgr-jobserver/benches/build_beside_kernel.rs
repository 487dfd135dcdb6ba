//! `make -j64` of a generated tree beside an OpenMP kernel (montecarlo, bench size), on this
//! machine's CPUs: plain Linux, under cpumgr with the jobserver, and under cpumgr without it
//! (`--no-jobserver`: the build confined by affinity only). Prints the kernel's makespan against
//! its run alone on its own share (one CPU of two), the build's makespan and the most compile
//! jobs it ran at once. Needs the release `cpumgr` and adapter built first:
//!
//! ```text
//! cargo build --release -p cpumgr -p cpumgr-omp
//! cargo bench -p cpumgr-jobserver --bench build_beside_kernel
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cpumgr_jobserver::tree::{most_at_once, Tree};

/// C files in the tree: enough that the build outlasts the kernel on one CPU.
const FILES: usize = 500;

/// The `cpumgr` binary beside this benchmark's profile directory.
fn cpumgr() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(Path::parent).unwrap().join("cpumgr");
    assert!(bin.is_file(), "{} is missing: cargo build --release -p cpumgr -p cpumgr-omp", bin.display());
    bin
}

/// Waits for `child`; returns its wall time since `t0`, failing on a bad exit.
fn finish(mut child: Child, t0: Instant, what: &str) -> Duration {
    let st = child.wait().unwrap();
    assert!(st.success(), "{what}: {st}");
    t0.elapsed()
}

/// Waits for the kernel and the build; returns each one's wall time since `t0`.
fn finish_both(mut kernel: Child, mut build: Child, t0: Instant) -> (Duration, Duration) {
    let (mut kt, mut bt) = (None, None);
    while kt.is_none() || bt.is_none() {
        for (child, t, what) in [(&mut kernel, &mut kt, "kernel"), (&mut build, &mut bt, "build")] {
            if t.is_none() {
                if let Some(st) = child.try_wait().unwrap() {
                    assert!(st.success(), "{what}: {st}");
                    *t = Some(t0.elapsed());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (kt.unwrap(), bt.unwrap())
}

struct Outcome {
    kernel: Duration,
    build: Duration,
    most_jobs: usize,
}

/// Starts the build and the kernel together, each wrapped by `wrap` (empty: plain).
fn together(kernels: &Path, build_cmd: &[&str], kernel_wrap: &[&str]) -> Outcome {
    let tree = Tree::new(FILES).unwrap();
    let k = cpumgr_kernels::find("montecarlo").unwrap();
    let t0 = Instant::now();
    let build = Command::new(build_cmd[0])
        .args(&build_cmd[1..])
        .current_dir(tree.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let base = k.command(kernels, cpumgr_kernels::Size::Bench, 2);
    let mut kernel = match kernel_wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(base.get_program()).args(base.get_args());
            c.envs(base.get_envs().filter_map(|(k, v)| Some((k, v?))));
            c
        }
        None => base,
    };
    let kernel = kernel.stdout(Stdio::null()).spawn().unwrap();
    let (kt, bt) = finish_both(kernel, build, t0);
    eprintln!("{}: kernel {:.2} s, build {:.2} s", build_cmd.join(" "), kt.as_secs_f64(), bt.as_secs_f64());
    Outcome { kernel: kt, build: bt, most_jobs: most_at_once(&tree.jobs()) }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let bin = cpumgr();
    let kdir = tempfile::tempdir().unwrap();
    let kernels = cpumgr_kernels::build(kdir.path(), "gcc").expect("building the kernels");
    let k = cpumgr_kernels::find("montecarlo").unwrap();

    let t0 = Instant::now();
    let alone = Command::new("taskset")
        .args(["-c", "0"])
        .arg(k.command(&kernels, cpumgr_kernels::Size::Bench, 1).get_program())
        .args(k.bench_args)
        .env("OMP_NUM_THREADS", "1")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let share = finish(alone, t0, "kernel alone");
    println!("montecarlo alone on its share (1 CPU of 2): {:.2} s", share.as_secs_f64());

    let sock_dir = tempfile::tempdir().unwrap();
    let socket = sock_dir.path().join("cpumgr.sock");
    std::env::set_var("CPUMGR_SOCKET", &socket);
    let b = bin.to_str().unwrap();
    let plain = together(&kernels, &["make", "-j64"], &[]);
    let mut daemon = Command::new(&bin)
        .args(["daemon", "--policy", "equipartition", "--quantum", "100ms"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while cpumgr_proto::Conn::connect(&socket).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = [b, "run", "--"];
    let with = together(&kernels, &[b, "run", "--", "make", "-j64"], &run);
    let without = together(&kernels, &[b, "run", "--no-jobserver", "--", "make", "-j64"], &run);
    // SIGTERM: the manager releases what it holds and removes its socket.
    // SAFETY: a plain kill(2) of the manager this benchmark started and has not reaped.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let _ = daemon.wait();

    println!(
        "{:<34} {:>10} {:>9} {:>10} {:>9}",
        "make -j64 of 500 files beside it", "kernel s", "/ share", "build s", "most jobs"
    );
    for (name, o) in [("plain Linux", plain), ("cpumgr, jobserver", with), ("cpumgr, --no-jobserver", without)] {
        println!(
            "{name:<34} {:>10.2} {:>9.2} {:>10.2} {:>9}",
            o.kernel.as_secs_f64(),
            o.kernel.as_secs_f64() / share.as_secs_f64(),
            o.build.as_secs_f64(),
            o.most_jobs
        );
    }
}
