//! Times the kernels (built with gcc and libgomp) and prints medians with min–max.
//!
//! `cargo bench -p cpumgr-kernels --bench kernels -- [sizes] [contention] [overhead] [llpc] [--reps N]
//! [--size test|bench]`
//!
//! - `sizes`: every kernel at 1 and 2 threads, at test and at benchmark size; the figure is the
//!   kernel's own timed part (`seconds=`), the two thread counts alternating run by run.
//! - `contention`: for stencil and pipeline at test size (`--size bench`: benchmark size), the
//!   makespan of two copies started together, (a) 2 threads each with libgomp defaults, (b) 1 thread each pinned by taskset to
//!   CPUs 0 and 1, (c) 2 threads each with OMP_WAIT_POLICY=passive, (d) 2 threads each under
//!   `cpumgr run --omp` (one embedded manager, equipartition, the OpenMP adapter preloaded), (e)
//!   the same with `--no-omp` (no cooperation: the manager can only hold the teams by affinity
//!   and gang time slices), (f) (d) joining a `cpumgr daemon` started 1.5 s before (no manager
//!   start-up in the makespan), (g) the same with `--yield-outside` (the policy offered only the
//!   CPUs that outside load leaves); the seven alternate, and a run still going after 60 s is
//!   ended and reported as a lower bound (">="). (d) and (e) need a release build of the manager and the
//!   adapter (`cargo build --release -p cpumgr -p cpumgr-omp`, or `CPUMGR_BIN=path/to/cpumgr`);
//!   without it, they are skipped with a note. The ratios against (d) are printed under each
//!   kernel.
//!
//! - `overhead`: the OpenMP adapter's cost per region, EPCC-style (`kernels/epcc.c`: PARALLEL,
//!   PARALLEL FOR, BARRIER, µs per construct over a reference delay), with 2 threads: plain
//!   libgomp, the adapter preloaded with no manager (it only checks it is unmanaged), and the
//!   adapter under `cpumgr run --omp` (managed: the path of every region). The three alternate;
//!   the deltas against plain libgomp are printed under them.
//! - `llpc`: paper 001's Table 3 live: a stencil (2 threads, short regions) on a dedicated
//!   machine and beside `kernels/cycle` (one thread, busy 180 ms / sleep 50 ms: the paper's 18 s /
//!   5 s scaled down), under time-sharing (libgomp defaults, and OMP_WAIT_POLICY=passive) and with
//!   the adapter in LLPC mode (`CPUMGR_MODE=llpc`, no manager); slowdown = median time / the
//!   fastest dedicated libgomp run, and the mean team per region (the paper's threads/loop).
//!
//! `overhead` and `llpc` use the release adapter (and `overhead` the release `cpumgr`) as
//! `contention` does.
//!
//! Timings vary with what else runs on the machine: compare figures from one run only.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use cpumgr_kernels::{build, figure, find, median, parse_summary, Kernel, Size, KERNELS};

const TIMEOUT: Duration = Duration::from_secs(60);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut reps = 3;
    let mut size = Size::Test;
    let mut parts = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--size" => {
                size = match it.next().map(String::as_str) {
                    Some("test") => Size::Test,
                    Some("bench") => Size::Bench,
                    _ => fail("--size needs test or bench"),
                }
            }
            "--reps" => {
                reps = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&v: &usize| v > 0)
                    .unwrap_or_else(|| fail("--reps needs a positive integer"));
            }
            "sizes" | "contention" | "overhead" | "llpc" => parts.push(a.clone()),
            other if other.starts_with("--") => {} // cargo bench's own flags
            other => fail(&format!(
                "unknown argument '{other}' (sizes, contention, overhead, llpc, --reps N, --size test|bench)"
            )),
        }
    }
    if parts.is_empty() {
        parts = vec!["sizes".into(), "contention".into(), "overhead".into(), "llpc".into()];
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kernels-bench-gcc");
    let bin = build(&out, "gcc").unwrap_or_else(|e| fail(&e.to_string()));
    println!("# kernels built with gcc (libgomp) in {}; {reps} runs per figure", bin.display());
    if parts.iter().any(|p| p == "sizes") {
        sizes(&bin, reps);
    }
    if parts.iter().any(|p| p == "contention") {
        contention(&bin, size, reps);
    }
    if parts.iter().any(|p| p == "overhead") {
        overhead(&bin, reps);
    }
    if parts.iter().any(|p| p == "llpc") {
        llpc(&bin, reps);
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("kernels bench: {msg}");
    std::process::exit(2);
}

/// Runs one kernel alone and returns its own timed part.
fn timed_part(kernel: &Kernel, bin: &Path, size: Size, threads: usize) -> f64 {
    let out = kernel
        .command(bin, size, threads)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| fail(&format!("{}: {e}", kernel.name)));
    if !out.status.success() {
        fail(&format!("{} exited with {}", kernel.name, out.status));
    }
    parse_summary(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_else(|e| fail(&format!("{}: {e}", kernel.name)))
        .seconds
}

fn sizes(bin: &Path, reps: usize) {
    println!("\n## one kernel alone: its timed part, seconds (median [min-max])");
    println!("{:<11} {:<6} {:>26} {:>26} {:>8}", "kernel", "size", "1 thread", "2 threads", "speedup");
    for size in [Size::Test, Size::Bench] {
        for kernel in KERNELS {
            let mut one = Vec::new();
            let mut two = Vec::new();
            for _ in 0..reps {
                one.push(timed_part(kernel, bin, size, 1));
                two.push(timed_part(kernel, bin, size, 2));
            }
            let (m1, m2) = (median(&one), median(&two));
            println!(
                "{:<11} {:<6} {:>26} {:>26} {:>8.2}",
                kernel.name,
                if size == Size::Test { "test" } else { "bench" },
                figure(&one, false),
                figure(&two, false),
                m1 / m2
            );
        }
    }
}

/// One way of running two copies at once.
struct Setup {
    name: &'static str,
    threads: usize,
    pin: bool,
    passive: bool,
    /// Under `cpumgr run` with this flag (`--omp`: cooperative, `--no-omp`: transparent).
    managed: Option<&'static str>,
    /// Under a `cpumgr daemon` with these extra arguments, started 1.5 s before the pair (so it
    /// has measured the outside load), rather than the manager `cpumgr run` embeds.
    daemon: Option<&'static [&'static str]>,
}

const SETUPS: [Setup; 7] = [
    Setup {
        name: "2 copies x 2 threads, libgomp defaults",
        threads: 2,
        pin: false,
        passive: false,
        managed: None,
        daemon: None,
    },
    Setup {
        name: "2 copies x 1 thread, taskset CPU 0 / 1",
        threads: 1,
        pin: true,
        passive: false,
        managed: None,
        daemon: None,
    },
    Setup {
        name: "2 copies x 2 threads, OMP_WAIT_POLICY=passive",
        threads: 2,
        pin: false,
        passive: true,
        managed: None,
        daemon: None,
    },
    Setup {
        name: "2 copies x 2 threads, cpumgr run --omp",
        threads: 2,
        pin: false,
        passive: false,
        managed: Some("--omp"),
        daemon: None,
    },
    Setup {
        name: "2 copies x 2 threads, cpumgr run --no-omp",
        threads: 2,
        pin: false,
        passive: false,
        managed: Some("--no-omp"),
        daemon: None,
    },
    Setup {
        name: "2 copies x 2 threads, --omp, daemon started before",
        threads: 2,
        pin: false,
        passive: false,
        managed: Some("--omp"),
        daemon: Some(&[]),
    },
    Setup {
        name: "2 copies x 2 threads, --omp, daemon --yield-outside",
        threads: 2,
        pin: false,
        passive: false,
        managed: Some("--omp"),
        daemon: Some(&["--yield-outside"]),
    },
];

/// A `cpumgr daemon ARGS` on `socket`, answering, with 1.5 s of load measured.
fn daemon(cpumgr: &Path, args: &[&str], socket: &Path) -> Child {
    let d = Command::new(cpumgr)
        .arg("daemon")
        .args(args)
        .env("CPUMGR_SOCKET", socket)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("cpumgr daemon: {e}")));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !Command::new(cpumgr).arg("status").env("CPUMGR_SOCKET", socket).output().is_ok_and(|o| o.status.success()) {
        if Instant::now() > deadline {
            fail("cpumgr daemon did not answer in 20 s");
        }
        sleep(Duration::from_millis(50));
    }
    sleep(Duration::from_millis(1500));
    d
}

/// The manager binary for the managed setup: `$CPUMGR_BIN`, else the workspace's release build.
fn cpumgr_bin() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("CPUMGR_BIN")
        .map(Into::into)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/cpumgr"));
    (p.is_file() && p.with_file_name("libcpumgr_omp.so").is_file()).then_some(p)
}

/// `cmd` run by `cpumgr run FLAG` with a manager shared through `socket`.
fn managed(cmd: &Command, cpumgr: &Path, flag: &str, socket: &Path) -> Command {
    let mut c = wrapped(cmd, cpumgr.as_os_str(), &["run", flag, "--"]);
    c.env("CPUMGR_SOCKET", socket);
    c
}

/// `cmd` run by `launcher ARGS...`, with `cmd`'s environment.
fn wrapped(cmd: &Command, launcher: &std::ffi::OsStr, args: &[&str]) -> Command {
    let mut c = Command::new(launcher);
    c.args(args).arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

/// Starts two copies as `setup` says and returns the makespan, and whether it hit the timeout.
fn pair(kernel: &Kernel, bin: &Path, size: Size, setup: &Setup, cpumgr: Option<&Path>) -> (f64, bool) {
    let socket = std::env::temp_dir().join(format!(
        "cpumgr-bench-{}{}.sock",
        std::process::id(),
        if setup.daemon.is_some() { "-daemon" } else { "" }
    ));
    let mut daemon = match (setup.daemon, cpumgr) {
        (Some(args), Some(c)) => Some(self::daemon(c, args, &socket)),
        _ => None,
    };
    let start = Instant::now();
    let mut children: Vec<Child> = (0..2)
        .map(|copy| {
            let mut cmd = kernel.command(bin, size, setup.threads);
            if setup.pin {
                cmd = wrapped(&cmd, "taskset".as_ref(), &["-c", &copy.to_string()]);
            }
            if setup.passive {
                cmd.env("OMP_WAIT_POLICY", "passive");
            }
            if let (Some(flag), Some(cpumgr)) = (setup.managed, cpumgr) {
                cmd = managed(&cmd, cpumgr, flag, &socket);
            }
            cmd.stdout(Stdio::null()).spawn().unwrap_or_else(|e| fail(&format!("{}: {e}", kernel.name)))
        })
        .collect();
    let mut timed_out = false;
    let mut done = [false, false];
    while done.iter().any(|d| !d) {
        for (i, child) in children.iter_mut().enumerate() {
            if !done[i] {
                if let Some(status) = child.try_wait().expect("wait on a kernel") {
                    if !status.success() {
                        fail(&format!("{} exited with {status}", kernel.name));
                    }
                    done[i] = true;
                }
            }
        }
        if start.elapsed() >= TIMEOUT && done.iter().any(|d| !d) {
            for (i, child) in children.iter_mut().enumerate() {
                if !done[i] {
                    end(child);
                }
            }
            timed_out = true;
            break;
        }
        sleep(Duration::from_millis(5));
    }
    let makespan = start.elapsed().as_secs_f64();
    if let Some(d) = daemon.as_mut() {
        end(d);
    }
    (makespan, timed_out)
}

/// Ends a copy that ran past the cap: SIGTERM first, which `cpumgr run` forwards to the kernel
/// (a SIGKILL would end `cpumgr run` alone and leave its kernel running, and loading the
/// figures that follow), then SIGKILL if it is still there after a few seconds.
fn end(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid, which is not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn contention(bin: &Path, size: Size, reps: usize) {
    let size_name = if size == Size::Test { "test" } else { "bench" };
    println!(
        "\n## two copies at once, {size_name} size: makespan, seconds (median [min-max]; >= hit the {}s cap)",
        TIMEOUT.as_secs()
    );
    let cpumgr = cpumgr_bin();
    if cpumgr.is_none() {
        println!("(no release cpumgr + libcpumgr_omp.so: `cpumgr run` setups skipped; cargo build --release -p cpumgr -p cpumgr-omp)");
    }
    let setups: Vec<&Setup> = SETUPS.iter().filter(|s| s.managed.is_none() || cpumgr.is_some()).collect();
    for name in ["stencil", "pipeline"] {
        let kernel = find(name).expect("in the catalog");
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
        let mut capped = vec![false; setups.len()];
        for _ in 0..reps {
            for (i, setup) in setups.iter().enumerate() {
                let (t, hit) = pair(kernel, bin, size, setup, cpumgr.as_deref());
                times[i].push(t);
                capped[i] |= hit;
            }
        }
        for (i, setup) in setups.iter().enumerate() {
            println!("{:<9} {:<48} {:>28}", name, setup.name, figure(&times[i], capped[i]));
        }
        if let Some(m) = setups.iter().position(|s| s.managed == Some("--omp") && s.daemon.is_none()) {
            let ours = median(&times[m]);
            for (i, setup) in setups.iter().enumerate().filter(|(i, _)| *i != m) {
                println!("{:<9}   {:<46} {:>9.2}x cpumgr's", "", setup.name, median(&times[i]) / ours);
            }
            // The targets, as ratios of medians.
            let of = |pred: fn(&Setup) -> bool| setups.iter().position(|s| pred(s)).map(|i| median(&times[i]));
            for (i, setup) in setups.iter().enumerate().filter(|(_, s)| s.daemon.is_some()) {
                if let Some(p) = of(|s| s.pin) {
                    println!("{:<9}   {} / static partition = {:.2}", "", setup.name, median(&times[i]) / p);
                }
            }
            let (default, pinned) = (of(|s| !s.pin && !s.passive && s.managed.is_none()), of(|s| s.pin));
            let (passive, no_omp) = (of(|s| s.passive), of(|s| s.managed == Some("--no-omp")));
            if let Some(p) = pinned {
                println!("{:<9}   target: cpumgr run --omp / static partition = {:.2} (<= 1.1)", "", ours / p);
            }
            if let Some(d) = default {
                println!("{:<9}   target: libgomp defaults / cpumgr run --omp = {:.2} (>= 3)", "", d / ours);
            }
            if let Some(p) = passive {
                println!(
                    "{:<9}   target: OMP_WAIT_POLICY=passive / cpumgr run --omp = {:.2} (>= 3 for the pipeline)",
                    "",
                    p / ours
                );
            }
            if let (Some(n), Some(p)) = (no_omp, pinned) {
                println!("{:<9}   target: cpumgr run --no-omp / static partition = {:.2} (<= 1.3)", "", n / p);
            }
        }
    }
}

/// Runs `cmd` to its end and returns its result line; fails the bench on an error.
fn summary(mut cmd: Command, what: &str) -> cpumgr_kernels::Summary {
    let out = cmd.stderr(Stdio::inherit()).output().unwrap_or_else(|e| fail(&format!("{what}: {e}")));
    if !out.status.success() {
        fail(&format!("{what} exited with {}", out.status));
    }
    parse_summary(&String::from_utf8_lossy(&out.stdout)).unwrap_or_else(|e| fail(&format!("{what}: {e}")))
}

/// A number from a result line's kernel-specific fields.
fn extra(s: &cpumgr_kernels::Summary, key: &str) -> f64 {
    s.extra
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fail(&format!("{}: no {key}= in its result line", s.kernel)))
}

/// EPCC's constructs, as `kernels/epcc` names their figures.
const CONSTRUCTS: [(&str, &str); 3] =
    [("PARALLEL", "parallel_us"), ("PARALLEL FOR", "parallel_for_us"), ("BARRIER", "barrier_us")];

fn overhead(bin: &Path, reps: usize) {
    println!("\n## OpenMP adapter overhead, EPCC-style, 2 threads: microseconds per construct (median [min-max] of {reps} runs, each the median of 50 x 2000)");
    let Some(cpumgr) = cpumgr_bin() else {
        println!("(no release cpumgr + libcpumgr_omp.so: skipped; cargo build --release -p cpumgr -p cpumgr-omp)");
        return;
    };
    let adapter = cpumgr.with_file_name("libcpumgr_omp.so");
    let socket = std::env::temp_dir().join(format!("cpumgr-bench-overhead-{}.sock", std::process::id()));
    let epcc = || {
        let mut c = Command::new(bin.join("epcc"));
        c.args(["-outer", "50", "-inner", "2000"]).env("OMP_NUM_THREADS", "2").stdout(Stdio::piped());
        c
    };
    let configs = ["plain libgomp", "adapter, no manager", "adapter, cpumgr run --omp"];
    let mut figures = vec![vec![Vec::new(); CONSTRUCTS.len()]; configs.len()];
    for _ in 0..reps {
        for (i, _) in configs.iter().enumerate() {
            let cmd = match i {
                0 => epcc(),
                1 => {
                    let mut c = epcc();
                    c.env("LD_PRELOAD", &adapter)
                        .env("CPUMGR_SOCKET", std::env::temp_dir().join("cpumgr-bench-nobody.sock"));
                    c.env("CPUMGR_QUIET", "1");
                    c
                }
                _ => {
                    let mut c = managed(&epcc(), &cpumgr, "--omp", &socket);
                    c.stdout(Stdio::piped());
                    c
                }
            };
            let s = summary(cmd, "epcc");
            for (k, (_, key)) in CONSTRUCTS.iter().enumerate() {
                figures[i][k].push(extra(&s, key));
            }
        }
    }
    println!("{:<28} {:>26} {:>26} {:>26}", "", CONSTRUCTS[0].0, CONSTRUCTS[1].0, CONSTRUCTS[2].0);
    for (i, name) in configs.iter().enumerate() {
        let cells: Vec<String> = figures[i].iter().map(|v| figure(v, false)).collect();
        println!("{:<28} {:>26} {:>26} {:>26}", name, cells[0], cells[1], cells[2]);
    }
    // A busy machine slows whole runs down (a run's own median moves with it), so the minima,
    // the runs least disturbed, compare the fork paths best; the medians are printed too.
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    for (i, name) in configs.iter().enumerate().skip(1) {
        let deltas: Vec<String> = (0..CONSTRUCTS.len())
            .map(|k| {
                let (a, b) = (&figures[i][k], &figures[0][k]);
                format!("{:+.3} (median {:+.3})", min(a) - min(b), median(a) - median(b))
            })
            .collect();
        println!("{:<28} {:>26} {:>26} {:>26}", format!("  {name} - plain, min"), deltas[0], deltas[1], deltas[2]);
    }
}

/// One way of running the stencil in the LLPC experiment.
struct LlpcSetup {
    name: &'static str,
    background: bool,
    passive: bool,
    llpc: bool,
}

const LLPC_SETUPS: [LlpcSetup; 5] = [
    LlpcSetup { name: "dedicated, libgomp defaults", background: false, passive: false, llpc: false },
    LlpcSetup { name: "dedicated, LLPC", background: false, passive: false, llpc: true },
    LlpcSetup { name: "+ background, time-sharing (libgomp defaults)", background: true, passive: false, llpc: false },
    LlpcSetup {
        name: "+ background, time-sharing (OMP_WAIT_POLICY=passive)",
        background: true,
        passive: true,
        llpc: false,
    },
    LlpcSetup { name: "+ background, LLPC", background: true, passive: false, llpc: true },
];

/// The stencil of the LLPC experiment: 2 threads, 800 regions of 25 sweeps of a 256 x 256 grid
/// (about 1 s on one quiet CPU here: several cycles of the background), its region log on.
const LLPC_STENCIL: [&str; 6] = ["-n", "256", "-iters", "20000", "-regions", "800"];

fn llpc(bin: &Path, reps: usize) {
    println!(
        "\n## paper 001 Table 3 live: a stencil (2 threads) beside a sequential program (busy 180 ms / sleep 50 ms)"
    );
    let Some(adapter) = cpumgr_bin().map(|c| c.with_file_name("libcpumgr_omp.so")) else {
        println!("(no release libcpumgr_omp.so: skipped; cargo build --release -p cpumgr -p cpumgr-omp)");
        return;
    };
    let mut times = vec![Vec::new(); LLPC_SETUPS.len()];
    let mut teams = vec![Vec::new(); LLPC_SETUPS.len()];
    for _ in 0..reps {
        for (i, setup) in LLPC_SETUPS.iter().enumerate() {
            let mut background = setup.background.then(|| {
                Command::new(bin.join("cycle"))
                    .args(["-busy", "180", "-sleep", "50"])
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| fail(&format!("cycle: {e}")))
            });
            let mut cmd = Command::new(bin.join("stencil"));
            cmd.args(LLPC_STENCIL).env("OMP_NUM_THREADS", "2").env("CPUMGR_KERNEL_LOG", "1");
            if setup.passive {
                cmd.env("OMP_WAIT_POLICY", "passive");
            }
            if setup.llpc {
                cmd.env("LD_PRELOAD", &adapter).env("CPUMGR_MODE", "llpc");
            }
            let out = cmd.output().unwrap_or_else(|e| fail(&format!("stencil: {e}")));
            if let Some(b) = background.as_mut() {
                let _ = b.kill();
                let _ = b.wait();
            }
            if !out.status.success() {
                fail(&format!("stencil exited with {}", out.status));
            }
            let s =
                parse_summary(&String::from_utf8_lossy(&out.stdout)).unwrap_or_else(|e| fail(&format!("stencil: {e}")));
            let regions = cpumgr_kernels::parse_region_log(&String::from_utf8_lossy(&out.stderr))
                .unwrap_or_else(|e| fail(&format!("stencil's region log: {e}")));
            times[i].push(s.seconds);
            teams[i].push(regions.iter().map(|r| r.threads as f64).sum::<f64>() / regions.len().max(1) as f64);
        }
    }
    // The dedicated time is the least disturbed dedicated run: on a shared machine the others'
    // load slows some of them down, which is not the dedicated time the paper divides by.
    let dedicated = times[0].iter().copied().fold(f64::INFINITY, f64::min);
    println!("slowdown = median / the fastest dedicated libgomp run ({dedicated:.3} s)");
    println!("{:<54} {:>28} {:>9} {:>13}", "setup", "stencil seconds", "slowdown", "threads/loop");
    for (i, setup) in LLPC_SETUPS.iter().enumerate() {
        println!(
            "{:<54} {:>28} {:>9.2} {:>13.2}",
            setup.name,
            figure(&times[i], false),
            median(&times[i]) / dedicated,
            median(&teams[i])
        );
    }
}
