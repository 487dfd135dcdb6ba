//! Programs shaped like real ones, two copies started at staggered times, under the simple
//! alternatives and under cpumgr: makespans, seconds (median [min-max] of `--reps` runs, the
//! configurations alternating run by run), and the ratios the real-codes work is judged by.
//!
//! `cargo bench -p cpumgr-kernels --bench realcodes -- [--reps N] [--gaps 0.05,1] [--only CASE]
//! [--limit SECONDS]`
//!
//! Cases (each copy's team is every CPU, and the work grows with the machine):
//! - `barrier`: a stencil whose one parallel region holds its whole time loop, about 45 µs of
//!   work per thread between barriers;
//! - `medium`: the same at about 15 µs;
//! - `fine`: the same at about 5 µs;
//! - `pipeline`: the LU-like pipeline in one region (threads wait on each other's flags in their
//!   own loops);
//! - `halo`: an MPI halo exchange, `mpiexec -n CPUS` with the default MPI (`mpicc`, `mpiexec`)
//!   and `mpirun.openmpi -n CPUS` with Debian's Open MPI (`mpicc.openmpi`), each when present;
//!
//! the OpenMP ones built with gcc (libgomp) and, when clang is present, clang (LLVM libomp).
//! Configurations: `static` (each copy on its half of the CPUs with half the threads, by
//! taskset; not for MPI), `sequential` (one after the other, the whole machine each), `plain`
//! (both at once, the runtimes' defaults, no manager), `cpumgr` (each under `cpumgr run`, the
//! first one starting the manager inside itself). A run still going after `--limit` seconds
//! (default 40) is ended and shown as a lower bound (`>=`).
//!
//! Needs the release `cpumgr` and `libcpumgr_omp.so` (`cargo build --release --workspace`, or
//! `CPUMGR_BIN`). Timings vary with what else runs: compare figures from one run only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use cpumgr_kernels::{build, compiler_present, figure, median};

/// One program shape.
struct Case {
    name: &'static str,
    /// What it models.
    what: &'static str,
    /// The binary (in the kernels' build directory) and its arguments; `{cpus}` and `{cpus*K}`
    /// are the machine's CPU count and K times it.
    args: &'static [&'static str],
    /// An MPI job: run with each MPI build's launcher, `-n THREADS`.
    mpi: bool,
}

const CASES: [Case; 5] = [
    Case {
        name: "barrier",
        what: "one region, ~45 us per thread between barriers",
        args: &["stencil", "-n", "256", "-rows", "{cpus*256}", "-iters", "20000", "-regions", "1"],
        mpi: false,
    },
    Case {
        name: "medium",
        what: "one region, ~15 us per thread between barriers",
        args: &["stencil", "-n", "128", "-rows", "{cpus*96}", "-iters", "100000", "-regions", "1"],
        mpi: false,
    },
    Case {
        name: "fine",
        what: "one region, ~5 us per thread between barriers",
        args: &["stencil", "-n", "64", "-rows", "{cpus*64}", "-iters", "300000", "-regions", "1"],
        mpi: false,
    },
    Case {
        name: "pipeline",
        what: "one region, LU-like point-to-point spin flags",
        args: &["pipeline", "-n", "1024", "-iters", "{cpus*150}", "-regions", "1"],
        mpi: false,
    },
    Case {
        name: "halo",
        what: "MPI halo exchange, LAUNCHER -n CPUS",
        args: &["halo", "-n", "{cpus*32768}", "-steps", "30000"],
        mpi: true,
    },
];

#[derive(Clone, Copy, PartialEq)]
enum Config {
    Static,
    Sequential,
    Plain,
    Cpumgr,
}

const CONFIGS: [(Config, &str); 4] = [
    (Config::Static, "static"),
    (Config::Sequential, "sequential"),
    (Config::Plain, "plain"),
    (Config::Cpumgr, "cpumgr"),
];

fn main() {
    let mut reps = 3;
    let mut gaps = vec![0.05, 1.0];
    let mut only: Option<String> = None;
    let mut limit = 40.0;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().cloned().unwrap_or_else(|| fail(&format!("{a} needs {what}")));
        match a.as_str() {
            "--reps" => {
                reps = value("a count").parse().ok().filter(|&n| n > 0).unwrap_or_else(|| fail("--reps: a count >= 1"))
            }
            "--gaps" => {
                gaps = value("seconds")
                    .split(',')
                    .map(|g| g.parse().ok().filter(|g: &f64| *g >= 0.0))
                    .collect::<Option<_>>()
                    .unwrap_or_else(|| fail("--gaps: seconds >= 0, comma-separated"))
            }
            "--only" => only = Some(value("a case")),
            "--limit" => {
                limit = value("seconds")
                    .parse()
                    .ok()
                    .filter(|&l: &f64| l > 0.0)
                    .unwrap_or_else(|| fail("--limit: seconds > 0"))
            }
            other if other.starts_with("--") => {} // cargo bench's own flags
            other => fail(&format!("unknown argument '{other}'")),
        }
    }
    let cpumgr =
        cpumgr_bin().unwrap_or_else(|| fail("no release cpumgr + libcpumgr_omp.so: cargo build --release --workspace"));
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    if cpus < 2 {
        fail("needs two CPUs or more");
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let openmp = |cc, dir| Build { cc, dir, launcher: None };
    let gcc = build(&target.join("realcodes-gcc"), "gcc").unwrap_or_else(|e| fail(&e.to_string()));
    let mut builds = vec![openmp("gcc", gcc)];
    if compiler_present("clang") {
        match build(&target.join("realcodes-clang"), "clang") {
            Ok(dir) => builds.push(openmp("clang", dir)),
            Err(e) => println!("# clang present but the kernels do not build with it: {e}"),
        }
    }
    let mpi: Vec<Build> = MPIS
        .iter()
        .filter_map(|&(cc, launcher, dir)| {
            Some(Build { cc, dir: build_halo(&target.join(dir), cc, launcher)?, launcher: Some(launcher) })
        })
        .collect();
    println!("# {cpus} CPUs; {reps} runs per figure, configurations alternating; cap {limit} s");
    if mpi.is_empty() {
        println!("# no mpicc/mpiexec: the MPI case is skipped (apt-get install mpich libmpich-dev)");
    }
    let limit = Duration::from_secs_f64(limit);
    for case in CASES.iter().filter(|c| only.as_ref().is_none_or(|o| o == c.name)) {
        for b in if case.mpi { &mpi } else { &builds } {
            for &gap in &gaps {
                let configs: Vec<(Config, &str)> =
                    CONFIGS.iter().copied().filter(|(c, _)| !(case.mpi && *c == Config::Static)).collect();
                let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
                let mut capped = vec![false; configs.len()];
                for _ in 0..reps {
                    for (i, (config, _)) in configs.iter().enumerate() {
                        let (t, cut) = pair(case, b, cpus, *config, gap, &cpumgr, limit);
                        times[i].push(t);
                        capped[i] |= cut;
                    }
                }
                println!("\n## {} ({}), {cc}, second copy {gap} s after the first", case.name, case.what, cc = b.cc);
                for (i, (_, name)) in configs.iter().enumerate() {
                    println!("{name:<11} {:>28}", figure(&times[i], capped[i]));
                }
                let m = |c: Config| configs.iter().position(|(x, _)| *x == c).map(|i| median(&times[i]));
                let managed = m(Config::Cpumgr).unwrap();
                let mut ratios = Vec::new();
                if let Some(s) = m(Config::Static) {
                    ratios.push(format!("cpumgr/static {:.2}", managed / s));
                }
                ratios.push(format!("cpumgr/sequential {:.2}", managed / m(Config::Sequential).unwrap()));
                ratios.push(format!("plain/cpumgr {:.2}", m(Config::Plain).unwrap() / managed));
                println!("ratios: {}", ratios.join(", "));
            }
        }
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("realcodes bench: {msg}");
    std::process::exit(2);
}

/// The manager binary: `$CPUMGR_BIN`, else the workspace's release build, with the adapter beside.
fn cpumgr_bin() -> Option<PathBuf> {
    let p: PathBuf = std::env::var_os("CPUMGR_BIN")
        .map(Into::into)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/cpumgr"));
    (p.is_file() && p.with_file_name("libcpumgr_omp.so").is_file()).then_some(p)
}

/// One build of the kernels: its compiler (the heading's name), its directory, and for an MPI
/// build the launcher that runs its jobs.
struct Build {
    cc: &'static str,
    dir: PathBuf,
    launcher: Option<&'static str>,
}

/// The MPI implementations the `halo` case runs with: the compiler wrapper, the launcher, and
/// the build directory under `target/`.
const MPIS: [(&str, &str, &str); 2] =
    [("mpicc", "mpiexec", "realcodes-mpi"), ("mpicc.openmpi", "mpirun.openmpi", "realcodes-openmpi")];

/// `halo` built with `mpicc` into `dir`, when that MPI is here (`launcher` runs).
fn build_halo(dir: &Path, mpicc: &str, launcher: &str) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let src = cpumgr_kernels::source_dir().join("halo.c");
    let ok = Command::new(mpicc).args(["-O2", "-o"]).arg(dir.join("halo")).arg(src).status().is_ok_and(|s| s.success());
    (ok && Command::new(launcher).arg("--version").output().is_ok()).then(|| dir.to_path_buf())
}

/// `arg` with `{cpus}` and `{cpus*K}` expanded.
fn expand(arg: &str, cpus: usize) -> String {
    match arg.strip_prefix("{cpus").and_then(|r| r.strip_suffix('}')) {
        Some("") => cpus.to_string(),
        Some(r) => r
            .strip_prefix('*')
            .and_then(|k| k.parse::<usize>().ok())
            .map_or(arg.to_string(), |k| (k * cpus).to_string()),
        None => arg.to_string(),
    }
}

/// Copy `copy` (0 or 1) of `case`, from build `b`, as `config` runs it.
fn command(case: &Case, b: &Build, cpus: usize, config: Config, copy: usize, cpumgr: &Path, socket: &Path) -> Command {
    let threads = if config == Config::Static { cpus / 2 } else { cpus };
    let mut words: Vec<String> = Vec::new();
    match config {
        Config::Static => {
            let half = if copy == 0 { format!("0-{}", cpus / 2 - 1) } else { format!("{}-{}", cpus / 2, cpus - 1) };
            words.extend(["taskset".into(), "-c".into(), half]);
        }
        Config::Cpumgr => words.extend([cpumgr.to_string_lossy().into_owned(), "run".into(), "--".into()]),
        Config::Sequential | Config::Plain => {}
    }
    if let Some(launcher) = b.launcher {
        words.extend([launcher.into(), "-n".into(), threads.to_string()]);
    }
    words.push(b.dir.join(case.args[0]).to_string_lossy().into_owned());
    words.extend(case.args[1..].iter().map(|a| expand(a, cpus)));
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("CPUMGR_SOCKET", socket)
        // Open MPI refuses to run as root without both (the bench runs as root where Slurm or
        // cpusets are tried); other programs ignore them.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd
}

/// Runs two copies, the second `gap` seconds after the first (sequential: after the first
/// ended, and no earlier than `gap`); returns the makespan and whether `limit` cut it.
fn pair(case: &Case, b: &Build, cpus: usize, config: Config, gap: f64, cpumgr: &Path, limit: Duration) -> (f64, bool) {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let socket = std::env::temp_dir().join(format!("cpumgr-realcodes-{}-{n}.sock", std::process::id()));
    let start = Instant::now();
    let spawn = |copy| {
        command(case, b, cpus, config, copy, cpumgr, &socket)
            .spawn()
            .unwrap_or_else(|e| fail(&format!("{}: {e}", case.name)))
    };
    let mut children: Vec<Option<Child>> = vec![Some(spawn(0)), None];
    let mut second_started = false;
    let second_at = Duration::from_secs_f64(gap);
    loop {
        for c in children.iter_mut() {
            if let Some(status) = c.as_mut().and_then(|child| child.try_wait().expect("wait on a copy")) {
                if !status.success() {
                    fail(&format!("{} exited with {status}", case.name));
                }
                *c = None;
            }
        }
        let first_done = children[0].is_none();
        if !second_started && start.elapsed() >= second_at && (config != Config::Sequential || first_done) {
            children[1] = Some(spawn(1));
            second_started = true;
        }
        if second_started && children.iter().all(Option::is_none) {
            return (start.elapsed().as_secs_f64(), false);
        }
        if start.elapsed() >= limit {
            for child in children.iter_mut().flatten() {
                end(child);
            }
            return (start.elapsed().as_secs_f64(), true);
        }
        sleep(Duration::from_millis(2));
    }
}

/// Ends a copy cut by the limit: SIGTERM to its process group (`cpumgr run` forwards it,
/// `mpiexec` ends its ranks), SIGKILL to the group if it is still there after a few seconds.
fn end(child: &mut Child) {
    let group = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child's process group; the child is not reaped yet.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
}
