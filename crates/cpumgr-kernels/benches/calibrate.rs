//! Calibrates the simulator's cost-of-sharing model (`crates/cpumgr-sim/src/cost.rs`) against live
//! runs of the kernels on this machine, then compares the simulator's predictions with live runs
//! of a small workload. Every figure is measured in this run; nothing is carried over.
//!
//! `cargo bench -p cpumgr-kernels --bench calibrate -- [shared] [self] [resume] [reload]
//! [compare] [--reps N]` (default: all five, 3 repeats, setups alternating within a repeat)
//!
//! It uses the first two CPUs of its affinity mask, calls them A and B. The reference job is
//! the barrier-heavy stencil at the demo's grain (`stencil -n 256`: a barrier every ~20 µs of
//! work per thread), which the model calls `sync = 1`; each fit below is the model's formula
//! solved for its parameter (docs/EXPERIMENTS.md, "The sharing-cost model", gives the algebra).
//!
//! - `shared` (`sync_shared`): two stencils time-sharing A and B with 2 threads each (`f = 2`),
//!   with libgomp defaults and with `OMP_WAIT_POLICY=passive`, against the static partition (1
//!   thread each, pinned to A / B). The model charges a copy `W·(1 + k·(f − 1))` against `W`, so
//!   `k = T_shared / T_static − 1`, per repeat, from the copies' own timed parts.
//! - `self` (`sync_self`): one program time-sharing A and B only with itself, 4 threads against
//!   2: the rigid busy-waiting kernel (`kernels/rigid.c`, spin barriers, the task's MPI-like
//!   case) and the stencil with `OMP_WAIT_POLICY=passive` (blocking waits, as paper 002's MPI
//!   processes that hand the CPU to a sibling). `k = T_4 / T_2 − 1`.
//! - `resume` (`resume_ms`): two stencils (2 threads each, asking 2 CPUs) under a live manager
//!   with the `gang` policy, which stops one and runs the other every quantum, at quanta of 5,
//!   10, 25 and 100 ms, run transparently (no OpenMP adapter: stop/continue only). The resumes
//!   `N` are counted in the manager's trace; the simulator, fed the stencil's times alone and
//!   charging nothing, predicts the makespan `M₀` of the same run; the slope of `M − M₀` against
//!   `N` (least squares, per repeat) is the time lost per resume.
//! - `reload` (`reload_ms`): two one-thread stencils pinned to A and B whose CPUs this harness
//!   swaps (`sched_setaffinity` on every thread) every 20, 1 or 0.2 ms, or never. A move gains a
//!   one-CPU program one CPU it did not hold, which the model charges `reload_ms × 1/1`: the
//!   slope of a copy's CPU time (user + system, so the harness's own CPU time on the copy's CPU
//!   is not counted) against its moves (least squares over the copies of a repeat).
//! - `compare`: one stencil (2 threads) at 0 s and another at 0.5 s, live under the `os` and
//!   `static` baselines and the `gang` policy (100 ms quantum, transparent), as `cpumgr launch`
//!   runs them (the same library), against `cpumgr sim` of the same jobs with the default cost
//!   model (and with this run's fits when they ran).
//!
//! Run it on a quiet machine, or under the autogroup trick (docs/EXPERIMENTS.md): build first
//! with `cargo bench -p cpumgr-kernels --bench calibrate --no-run`.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use cpumgr_core::trace::EventKind;
use cpumgr_core::{CpuSet, Nanos, Topology};
use cpumgr_daemon::affinity;
use cpumgr_kernels::{build, parse_summary};
use cpumgr_launch::{Config, RunOptions};
use cpumgr_sim::{CostModel, JobSpec, SimConfig, SpeedupModel};

/// A run still going after this long is killed and reported as a lower bound.
const CAP: Duration = Duration::from_secs(90);
/// The reference stencil's arguments before `-iters` (the demo's grid).
const STENCIL: [&str; 4] = ["-n", "256", "-regions", "40"];
/// Sweeps of the reference stencil: about 2 s on one quiet CPU here, 1.1 s on two.
const STENCIL_ITERS: u64 = 60_000;
/// The rigid kernel's arguments (its default grid; 0.13 s on 2 quiet CPUs with 2 threads).
const RIGID: [&str; 4] = ["-n", "262144", "-iters", "1000"];
/// Oversubscription factor of the `shared` and `self` experiments: twice the CPUs' threads.
const F: f64 = 2.0;
/// Gang quanta of the `resume` experiment, milliseconds.
const QUANTA_MS: [u64; 4] = [5, 10, 25, 100];
/// Swap periods of the `reload` experiment, microseconds (`None`: never moved).
const PERIODS_US: [Option<u64>; 4] = [None, Some(20_000), Some(1_000), Some(200)];
/// Arrivals of the `compare` workload's two stencils, seconds.
const ARRIVALS: [f64; 2] = [0.0, 0.5];

fn main() {
    let mut reps = 3;
    let mut parts = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => {
                reps = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&v: &usize| v > 0)
                    .unwrap_or_else(|| fail("--reps needs a positive integer"))
            }
            "shared" | "self" | "resume" | "reload" | "compare" => parts.push(a),
            other if other.starts_with("--") => {} // cargo bench's own flags
            other => fail(&format!("unknown argument '{other}' (shared, self, resume, reload, compare, --reps N)")),
        }
    }
    if parts.is_empty() {
        parts = ["shared", "self", "resume", "reload", "compare"].map(String::from).to_vec();
    }
    let dir = build(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kernels-calibrate-gcc"), "gcc")
        .unwrap_or_else(|e| fail(&e.to_string()));
    let h = Harness { dir, cpus: two_cpus(), reps };
    println!(
        "# cost-model calibration: kernels built with gcc (libgomp) in {}; CPUs {} and {}; {reps} repeats",
        h.dir.display(),
        h.cpus[0],
        h.cpus[1]
    );
    let mut fitted = CostModel::default();
    let mut alone = None;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let outside = Outside::start();
    for part in &parts {
        outside.reset();
        match part.as_str() {
            "shared" => fitted.sync_shared = h.shared(),
            "self" => fitted.sync_self = h.self_sharing(),
            "resume" => fitted.resume_ms = h.resume(alone.get_or_insert_with(|| h.alone())),
            "reload" => fitted.reload_ms = h.reload(),
            _ => h.compare(alone.get_or_insert_with(|| h.alone()), &fitted, parts.len() > 1),
        }
        outside.report();
    }
    println!("\n## fitted cost model (parameters not measured in this run keep their defaults)");
    println!(
        "sync_shared = {:.3}, sync_self = {:.3}, reload_ms = {:.3}, resume_ms = {:.3}",
        fitted.sync_shared, fitted.sync_self, fitted.reload_ms, fitted.resume_ms
    );
}

/// Set by SIGINT or SIGTERM: the runs under way end their programs (continued, unpinned) and the
/// bench stops, so an interrupted calibration leaves nothing stopped or running.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn fail(msg: &str) -> ! {
    eprintln!("calibrate bench: {msg}");
    std::process::exit(2);
}

/// The first two CPUs this process may run on.
fn two_cpus() -> [u32; 2] {
    let mine = affinity::get(0).unwrap_or_else(|e| fail(&format!("sched_getaffinity: {e}")));
    match mine.iter().take(2).collect::<Vec<u32>>()[..] {
        [a, b] => [a, b],
        _ => fail("the calibration needs two CPUs in this process's affinity mask"),
    }
}

/// `cpus` as an affinity mask.
fn mask_of(cpus: &[u32]) -> affinity::Mask {
    affinity::mask(&cpus.iter().copied().collect()).unwrap_or_else(|e| fail(&e.to_string()))
}

/// Confines `cmd`'s process to `cpus` from its start.
fn pin(cmd: &mut Command, cpus: &[u32]) {
    let mask = mask_of(cpus);
    // SAFETY: set_mask is a plain system call; the closure only reads its copied mask.
    unsafe {
        cmd.pre_exec(move || affinity::set_mask(0, &mask));
    }
}

/// Confines every thread of process `pid` to `cpu`; false when the process is gone.
fn move_process(pid: u32, cpu: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    let mask = mask_of(&[cpu]);
    for tid in tasks.flatten().filter_map(|t| t.file_name().to_str().and_then(|s| s.parse::<i32>().ok())) {
        // A thread that just ended gives ESRCH.
        let _ = affinity::set_mask(tid, &mask);
    }
    true
}

/// Watches for other timing runs: every 100 ms, whether a process of another session is
/// runnable in an autogroup of negative nice (the autogroup trick, docs/EXPERIMENTS.md). Such a
/// process competes with this run's spinning teams on equal terms, and a spinning team that
/// loses a partner to it can lose 10-40x: each part says how often one was seen.
struct Outside {
    samples: AtomicU64,
    seen: AtomicU64,
    names: Mutex<BTreeMap<String, u64>>,
}

impl Outside {
    fn start() -> Arc<Outside> {
        let o = Arc::new(Outside {
            samples: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            names: Mutex::new(BTreeMap::new()),
        });
        let w = Arc::clone(&o);
        // SAFETY: getsid(0) only reads this process's session id.
        let ours = unsafe { libc::getsid(0) };
        std::thread::spawn(move || loop {
            let names = high_priority_runnable(ours);
            w.samples.fetch_add(1, Ordering::Relaxed);
            if !names.is_empty() {
                w.seen.fetch_add(1, Ordering::Relaxed);
                let mut all = w.names.lock().expect("not poisoned");
                for n in names {
                    *all.entry(n).or_default() += 1;
                }
            }
            sleep(Duration::from_millis(100));
        });
        o
    }

    fn reset(&self) {
        self.samples.store(0, Ordering::Relaxed);
        self.seen.store(0, Ordering::Relaxed);
        self.names.lock().expect("not poisoned").clear();
    }

    fn report(&self) {
        let (n, seen) = (self.samples.load(Ordering::Relaxed).max(1), self.seen.load(Ordering::Relaxed));
        let names: Vec<String> = self.names.lock().expect("not poisoned").keys().cloned().collect();
        println!(
            "outside load: a runnable process of another session at negative autogroup nice in {:.0}% of samples{}",
            100.0 * seen as f64 / n as f64,
            if names.is_empty() { String::new() } else { format!(" ({})", names.join(", ")) }
        );
    }
}

/// Names of the runnable processes outside session `ours` whose autogroup has a negative nice.
fn high_priority_runnable(ours: libc::pid_t) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut names = Vec::new();
    for pid in dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok())) {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // After "pid (comm) ": state, ppid, pgrp, session.
        let Some((comm, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") ")) else { continue };
        let fields: Vec<&str> = rest.split(' ').take(4).collect();
        if fields.first() != Some(&"R") || fields.get(3).and_then(|s| s.parse::<libc::pid_t>().ok()) == Some(ours) {
            continue;
        }
        let nice = std::fs::read_to_string(format!("/proc/{pid}/autogroup"))
            .ok()
            .and_then(|a| a.split_whitespace().last().and_then(|n| n.parse::<i32>().ok()));
        if nice.is_some_and(|n| n < 0) {
            names.push(comm.to_string());
        }
    }
    names
}

/// Median and range of some figures.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Spread {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        Spread { median: s[s.len() / 2], min: s[0], max: s[s.len() - 1] }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = f.precision().unwrap_or(3);
        write!(f, "{:.p$} [{:.p$}-{:.p$}]", self.median, self.min, self.max)
    }
}

/// Least-squares line through `(x, y)` points: (intercept, slope).
fn fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - slope * mx, slope)
}

/// One kernel run of a set started together: the timed part it printed, or the time it had run
/// when the cap ended it (a lower bound).
#[derive(Clone, Copy)]
struct Timed {
    seconds: f64,
    /// User + system CPU seconds of the process and its threads.
    cpu: f64,
    capped: bool,
}

/// Reaps child `pid` if it ended (waiting for it when `block`): whether it exited with 0, and
/// its user + system CPU seconds.
fn reap(pid: u32, block: bool) -> Option<(bool, f64)> {
    let mut status = 0;
    // SAFETY: wait4 on our own child with valid out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, if block { 0 } else { libc::WNOHANG }, &mut usage) };
    if r != pid as libc::pid_t {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, tv(usage.ru_utime) + tv(usage.ru_stime)))
}

/// The reference stencil's times alone, for the simulator's job model.
struct Alone {
    /// One thread on one CPU: the job's work in CPU-seconds.
    one: f64,
    /// Two threads on two CPUs.
    two: f64,
}

impl Alone {
    /// The stencil as the simulator sees it: `work` CPU-seconds, speedup `one/two` on 2 CPUs.
    fn job(&self, name: &str, arrival: f64) -> JobSpec {
        let speedup = SpeedupModel::Table { values: vec![1.0, self.one / self.two] };
        JobSpec::malleable(name, (arrival * 1e9) as Nanos, 2, self.one, speedup).with_sync(1.0)
    }
}

struct Harness {
    dir: PathBuf,
    cpus: [u32; 2],
    reps: usize,
}

impl Harness {
    /// The reference stencil with `threads` threads.
    fn stencil(&self, threads: usize) -> Command {
        let mut c = Command::new(self.dir.join("stencil"));
        c.args(STENCIL).args(["-iters", &STENCIL_ITERS.to_string()]).env("OMP_NUM_THREADS", threads.to_string());
        c
    }

    /// Starts `cmds` together, waits for them all (killing what passes the cap), and returns each
    /// one's timed part and CPU time; `each` is called between polls with the pids of the children
    /// that still run, for harnesses that act on them, and returns how long to sleep.
    fn together(&self, cmds: Vec<Command>, each: &mut dyn FnMut(&[Option<u32>]) -> Duration) -> Vec<Timed> {
        let start = Instant::now();
        let mut children: Vec<Child> = cmds
            .into_iter()
            .map(|mut c| {
                c.stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .unwrap_or_else(|e| fail(&format!("{:?}: {e}", c.get_program())))
            })
            .collect();
        let mut out: Vec<Option<Timed>> = vec![None; children.len()];
        while out.iter().any(Option::is_none) {
            let capped = start.elapsed() >= CAP || STOP.load(Ordering::Relaxed);
            for (slot, child) in out.iter_mut().zip(children.iter_mut()).filter(|(o, _)| o.is_none()) {
                if capped {
                    // SAFETY: kill(2) on our own child, not reaped yet.
                    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
                }
                let Some((ok, cpu)) = reap(child.id(), capped) else { continue };
                *slot = Some(if capped {
                    Timed { seconds: CAP.as_secs_f64(), cpu, capped }
                } else {
                    if !ok {
                        fail(&format!("{:?} failed", child));
                    }
                    let mut text = String::new();
                    std::io::Read::read_to_string(child.stdout.as_mut().expect("piped"), &mut text)
                        .expect("kernel output");
                    Timed {
                        seconds: parse_summary(&text).unwrap_or_else(|e| fail(&e.to_string())).seconds,
                        cpu,
                        capped,
                    }
                });
            }
            let running: Vec<Option<u32>> =
                children.iter().zip(&out).map(|(c, o)| o.is_none().then(|| c.id())).collect();
            if running.iter().any(Option::is_some) {
                sleep(each(&running));
            }
        }
        if STOP.load(Ordering::Relaxed) {
            fail("interrupted: the kernels under way were killed");
        }
        out.into_iter().map(|t| t.expect("every child ended")).collect()
    }

    /// Runs `cmds` together with no harness action: their timed parts.
    fn run(&self, cmds: Vec<Command>) -> Vec<Timed> {
        self.together(cmds, &mut |_| Duration::from_millis(2))
    }

    /// Measures the stencil alone on one and on two CPUs (alternating, the least disturbed run).
    fn alone(&self) -> Alone {
        let (mut one, mut two) = (Vec::new(), Vec::new());
        for _ in 0..self.reps {
            let mut c = self.stencil(1);
            pin(&mut c, &self.cpus[..1]);
            one.push(self.run(vec![c])[0].seconds);
            let mut c = self.stencil(2);
            pin(&mut c, &self.cpus);
            two.push(self.run(vec![c])[0].seconds);
        }
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        println!("\n## the stencil alone (-n 256 -iters {STENCIL_ITERS}): timed part, seconds, median [min-max]");
        println!("1 thread on 1 CPU   {}", Spread::of(&one));
        println!("2 threads on 2 CPUs {}", Spread::of(&two));
        println!(
            "the simulator's job: work {:.3} CPU-s, speedup {:.3} on 2 CPUs (fastest runs)",
            min(&one),
            min(&one) / min(&two)
        );
        Alone { one: min(&one), two: min(&two) }
    }

    /// `sync_shared`: returns the fit for libgomp defaults (what the `os` baseline runs).
    fn shared(&self) -> f64 {
        println!("\n## sync_shared: two stencils on CPUs A and B; mean timed part of the two copies, seconds");
        let setups: [(&str, usize, Option<&str>); 3] = [
            ("static: 1 thread each, pinned A / B", 1, None),
            ("os: 2 threads each, libgomp defaults", 2, None),
            ("os: 2 threads each, OMP_WAIT_POLICY=passive", 2, Some("passive")),
        ];
        let mut times = vec![Vec::new(); setups.len()];
        let mut capped = vec![false; setups.len()];
        for _ in 0..self.reps {
            for (i, (_, threads, wait)) in setups.iter().enumerate() {
                let cmds = (0..2)
                    .map(|copy| {
                        let mut c = self.stencil(*threads);
                        pin(&mut c, if *threads == 1 { &self.cpus[copy..copy + 1] } else { &self.cpus });
                        if let Some(w) = wait {
                            c.env("OMP_WAIT_POLICY", w);
                        }
                        c
                    })
                    .collect();
                let t = self.run(cmds);
                capped[i] |= t.iter().any(|t| t.capped);
                times[i].push(t.iter().map(|t| t.seconds).sum::<f64>() / t.len() as f64);
            }
        }
        let mut fits = Vec::new();
        for (i, (name, _, _)) in setups.iter().enumerate() {
            print!("{name:<46} {}{}", if capped[i] { ">=" } else { "" }, Spread::of(&times[i]));
            if i > 0 {
                let k: Vec<f64> = times[i].iter().zip(&times[0]).map(|(t, s)| (t / s - 1.0) / (F - 1.0)).collect();
                print!("   k = T/T_static - 1 = {}", Spread::of(&k));
                fits.push(Spread::of(&k).median);
            }
            println!();
        }
        fits[0]
    }

    /// `sync_self`: returns the fit for the rigid spinning kernel.
    fn self_sharing(&self) -> f64 {
        println!("\n## sync_self: one program alone on CPUs A and B, 4 threads against 2; timed part, seconds");
        let rigid = |threads: usize| {
            let mut c = Command::new(self.dir.join("rigid"));
            c.args(RIGID).args(["-threads", &threads.to_string()]).env("OMP_NUM_THREADS", threads.to_string());
            c
        };
        let passive = |threads: usize| {
            let mut c = self.stencil(threads);
            c.env("OMP_WAIT_POLICY", "passive").env("OMP_DYNAMIC", "false");
            c
        };
        let kinds: [(&str, &dyn Fn(usize) -> Command); 2] = [
            ("rigid (spin barriers, -n 262144 -iters 1000)", &rigid),
            ("stencil, OMP_WAIT_POLICY=passive (blocking)", &passive),
        ];
        let mut fits = Vec::new();
        for (name, make) in kinds {
            let (mut two, mut four, mut k) = (Vec::new(), Vec::new(), Vec::new());
            let mut capped = false;
            for _ in 0..self.reps {
                let [t2, t4] = [2, 4].map(|threads| {
                    let mut c = make(threads);
                    pin(&mut c, &self.cpus);
                    self.run(vec![c])[0]
                });
                capped |= t4.capped;
                two.push(t2.seconds);
                four.push(t4.seconds);
                k.push((t4.seconds / t2.seconds - 1.0) / (F - 1.0));
            }
            let lb = if capped { ">=" } else { "" };
            println!(
                "{name:<46} 2 threads {}   4 threads {lb}{}   k = T_4/T_2 - 1 = {lb}{}",
                Spread::of(&two),
                Spread::of(&four),
                Spread::of(&k)
            );
            fits.push(Spread::of(&k).median);
        }
        fits[0]
    }

    /// A live run of the two-stencil workload (`arrivals`) under `config` with `quantum`.
    fn launch(&self, config: &Config, quantum: Duration, arrivals: &[f64]) -> cpumgr_launch::RunResult {
        let jobs: String = arrivals
            .iter()
            .enumerate()
            .map(|(i, at)| {
                format!("[[job]]\nname = \"stencil-{i}\"\ncommand = [\"{{kernels}}/stencil\", \"{}\", \"{}\", \"{}\", \"{}\", \"-iters\", \"{STENCIL_ITERS}\"]\nenv = {{ OMP_NUM_THREADS = \"2\" }}\nat = {at}\nrequest = \"2\"\n", STENCIL[0], STENCIL[1], STENCIL[2], STENCIL[3])
            })
            .collect();
        let text = format!("name = \"calibrate\"\nmpl = 2\n{jobs}");
        let expand = cpumgr_launch::Expand { cpus: 2, kernels: self.dir.clone() };
        let workload = cpumgr_launch::Workload::parse(Path::new("calibrate.toml"), &text, &expand)
            .unwrap_or_else(|e| fail(&e.to_string()));
        let log_dir = std::env::temp_dir().join(format!("cpumgr-calibrate-{}", std::process::id()));
        let opts = RunOptions {
            cpus: self.cpus.iter().copied().collect::<CpuSet>(),
            quantum,
            log_dir: log_dir.clone(),
            poll: Duration::from_millis(5),
            omp_adapter: None,
            yield_outside: false,
            limit: None,
        };
        let r = cpumgr_launch::run(&workload, config, &opts, &STOP, &mut |_, _| {})
            .unwrap_or_else(|e| fail(&format!("launch: {e}")));
        let _ = std::fs::remove_dir_all(&log_dir);
        if STOP.load(Ordering::Relaxed) {
            fail("interrupted: the launcher ended every job");
        }
        if let Some(j) = r.jobs.iter().find(|j| !j.outcome.ok()) {
            fail(&format!("{} under {}: {}\n{}", j.name, r.config, j.outcome.describe(), j.stderr_tail));
        }
        r
    }

    /// `resume_ms`: returns the median per-repeat slope, in milliseconds. A run more than twice
    /// as long as the simulator's free-cost makespan is reported and left out of the fit: such
    /// runs (spinning teams that lost 10-20x, as under `os`) are not the cost of a resume.
    fn resume(&self, alone: &Alone) -> f64 {
        println!("\n## resume_ms: two stencils (2 threads, asking 2) under a live gang manager, transparent; M = makespan, N = resumes in the trace, M0 = simulated makespan charging nothing");
        let gang = Config::Policy("gang".into());
        let mut rows: BTreeMap<u64, Vec<[f64; 4]>> = BTreeMap::new();
        let (mut slopes, mut cpu_slopes, mut pooled, mut disturbed) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..self.reps {
            let (mut points, mut cpu_points) = (Vec::new(), Vec::new());
            for q in QUANTA_MS {
                let quantum = Duration::from_millis(q);
                let r = self.launch(&gang, quantum, &[0.0, 0.0]);
                let n = resumes(&r.trace) as f64;
                let m0 = simulate("gang", alone, &[0.0, 0.0], CostModel::FREE, quantum);
                let cpu: f64 = r.jobs.iter().map(|j| j.cpu_seconds).sum();
                if r.makespan > 2.0 * m0 {
                    disturbed.push(format!("{q} ms: M {:.2} s, N {n}", r.makespan));
                    continue;
                }
                rows.entry(q).or_default().push([r.makespan, n, m0, cpu]);
                points.push((n, r.makespan - m0));
                cpu_points.push((n, cpu));
            }
            if points.len() >= 2 {
                slopes.push(fit_line(&points).1 * 1e3);
                cpu_slopes.push(fit_line(&cpu_points).1 * 1e3);
            }
            pooled.extend(points);
        }
        println!("{:>8} {:>26} {:>24} {:>8} {:>26}", "quantum", "M s", "N", "M0 s", "CPU s, both jobs");
        for (q, v) in &rows {
            let col = |k: usize| Spread::of(&v.iter().map(|r| r[k]).collect::<Vec<_>>());
            println!("{:>6}ms {:>26} {:>24.0} {:>8.3} {:>26}", q, col(0), col(1), col(2).median, col(3));
        }
        println!(
            "left out (M > 2 M0): {}",
            if disturbed.is_empty() { "none".to_string() } else { disturbed.join("; ") }
        );
        if slopes.is_empty() {
            println!("no repeat kept two runs: resume_ms not fitted");
            return CostModel::default().resume_ms;
        }
        let (a, b) = fit_line(&pooled);
        println!(
            "slope of M - M0 against N, per repeat: {} ms per resume (all kept points: {:.3} ms, intercept {a:.3} s)",
            Spread::of(&slopes),
            b * 1e3
        );
        println!("slope of the jobs' CPU time against N, per repeat: {} ms per resume (cache refill, without the stopped time)", Spread::of(&cpu_slopes));
        Spread::of(&slopes).median.max(0.0)
    }

    /// `reload_ms`: returns the median per-repeat slope, in milliseconds.
    fn reload(&self) -> f64 {
        println!("\n## reload_ms: two 1-thread stencils pinned to A / B, swapped every P µs");
        // Per period: each copy's timed part, CPU time and moves.
        let mut rows: BTreeMap<u64, [Vec<f64>; 3]> = BTreeMap::new();
        let mut slopes = Vec::new();
        for _ in 0..self.reps {
            let mut points = Vec::new();
            for period in PERIODS_US {
                let cmds = (0..2)
                    .map(|copy| {
                        let mut c = self.stencil(1);
                        pin(&mut c, &self.cpus[copy..copy + 1]);
                        c
                    })
                    .collect();
                let mut moves = [0u32; 2];
                let mut swapped = false;
                let times = self.together(cmds, &mut |running| {
                    let Some(p) = period else { return Duration::from_millis(2) };
                    swapped = !swapped;
                    for (copy, pid) in running.iter().enumerate() {
                        if let Some(pid) = pid {
                            if move_process(*pid, self.cpus[(copy + swapped as usize) % 2]) {
                                moves[copy] += 1;
                            }
                        }
                    }
                    Duration::from_micros(p)
                });
                let row = rows.entry(period.unwrap_or(0)).or_default();
                for (copy, t) in times.iter().enumerate() {
                    row[0].push(t.seconds);
                    row[1].push(t.cpu);
                    row[2].push(moves[copy] as f64);
                    points.push((moves[copy] as f64, t.cpu));
                }
            }
            slopes.push(fit_line(&points).1 * 1e3);
        }
        println!("{:>8} {:>26} {:>26} {:>20}", "period", "timed part per copy, s", "CPU s per copy", "moves per copy");
        for (p, [t, c, m]) in &rows {
            let name = if *p == 0 { "never".to_string() } else { format!("{p}us") };
            println!("{:>8} {:>26} {:>26} {:>20.0}", name, Spread::of(t), Spread::of(c), Spread::of(m));
        }
        println!("slope of a copy's CPU time against its moves, per repeat: {:.4} ms per move", Spread::of(&slopes));
        Spread::of(&slopes).median.max(0.0)
    }

    /// Live `cpumgr launch` runs against the simulator, with the default cost model and (when
    /// `with_fit`) this run's fitted one.
    fn compare(&self, alone: &Alone, fitted: &CostModel, with_fit: bool) {
        println!("\n## live vs simulated: stencils (2 threads) arriving at {ARRIVALS:?} s on CPUs A and B; makespan, seconds");
        let quantum = Duration::from_millis(100);
        let configs = [(Config::Os, "os"), (Config::Static, "static"), (Config::Policy("gang".into()), "gang")];
        let mut live = vec![Vec::new(); configs.len()];
        for _ in 0..self.reps {
            for (i, (config, _)) in configs.iter().enumerate() {
                live[i].push(self.launch(config, quantum, &ARRIVALS).makespan);
            }
        }
        println!(
            "{:<8} {:>26} {:>16} {:>8}{}",
            "config",
            "live",
            "sim (defaults)",
            "sim/live",
            if with_fit { "   sim (this run's fit)  sim/live" } else { "" }
        );
        for (i, (_, policy)) in configs.iter().enumerate() {
            let l = Spread::of(&live[i]);
            let d = simulate(policy, alone, &ARRIVALS, CostModel::default(), quantum);
            print!("{policy:<8} {l:>26} {d:>16.3} {:>8.2}", d / l.median);
            if with_fit {
                let f = simulate(policy, alone, &ARRIVALS, *fitted, quantum);
                print!("   {f:>21.3} {:>9.2}", f / l.median);
            }
            println!();
        }
    }
}

/// Times a program ran again after being stopped, over all programs of a live trace (a first
/// run after waiting is no resume, as in the simulator's engine).
fn resumes(trace: &[cpumgr_core::trace::Event]) -> u64 {
    // Per program: (has run, runs now).
    let mut state: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
    let mut n = 0;
    for e in trace {
        if let (EventKind::Allocate { running, .. }, Some(p)) = (&e.kind, e.program) {
            let (has_run, runs) = state.entry(p.0).or_default();
            if *running && !*runs && *has_run {
                n += 1;
            }
            *has_run |= *running;
            *runs = *running;
        }
    }
    n
}

/// The simulator's makespan for the stencils arriving at `arrivals` on two CPUs.
fn simulate(policy: &str, alone: &Alone, arrivals: &[f64], cost: CostModel, quantum: Duration) -> f64 {
    let jobs: Vec<JobSpec> =
        arrivals.iter().enumerate().map(|(i, &at)| alone.job(&format!("stencil-{i}"), at)).collect();
    let cfg = SimConfig { quantum: Some(quantum.as_nanos() as Nanos), cost, mpl: 2, ..SimConfig::default() };
    let p = cpumgr_core::policies::build_simulated(policy).unwrap_or_else(|e| fail(&format!("{policy}: {e}")));
    cpumgr_sim::run(&Topology::flat(2), policy, p, jobs, &cfg, &mut ())
        .unwrap_or_else(|e| fail(&format!("sim {policy}: {e}")))
        .makespan
}
