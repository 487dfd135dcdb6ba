//! The shared-server workload (`workloads/server.toml`): it parses on a small machine and a large
//! one and each of its four jobs resolves to what it claims (a make build that gets a jobserver,
//! an unmodified Python script, the oneTBB program, an OpenMP kernel); a build in a policy run
//! follows its allocation through the launcher's jobserver; and the whole workload runs to its
//! end under a policy with every runtime following its allocation.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_launch::{adapter, run, Config, Expand, RunOptions, Workload};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn server_toml() -> (PathBuf, String) {
    let file = repo().join("workloads/server.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    (file, text)
}

/// The workload's text with its `needs` lines taken out, so every job is kept whatever this
/// machine has.
fn without_needs(text: &str) -> String {
    text.lines().filter(|l| !l.starts_with("needs")).map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_server_workload_parses_and_its_four_jobs_resolve() {
    let (file, text) = server_toml();
    assert!(text.contains("cpumgr launch workloads/server.toml"), "the header names the command");
    for cpus in [2, 64] {
        let expand = Expand { cpus, kernels: PathBuf::from("/k") };
        let w = Workload::parse(&file, &without_needs(&text), &expand).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["build", "numpy", "tbb", "openmp"], "in arrival order");
        assert!(w.jobs.iter().all(|j| j.request == cpus && j.procs.is_none() && j.kind == "malleable"));
        let build = &w.jobs[0];
        let plan = cpumgr_jobserver::plan(&build.command, None).expect("the build gets a jobserver");
        assert_eq!(plan.cap, Some(cpus), "make -j{{cpus}}: its -j is the cap");
        assert!(build.command.contains(&format!("FILES={}", cpus * 100)), "a few hundred files: {:?}", build.command);
        assert!(repo().join("workloads/server/Makefile").is_file());
        let numpy = &w.jobs[1];
        assert!(adapter::runs_python(Path::new(&numpy.command[0])), "{:?}", numpy.command);
        assert!(repo().join(&numpy.command[1]).is_file(), "{:?}", numpy.command);
        assert_eq!(w.jobs[2].command[0], "target/server/tbbwork", "what workloads/server/build.sh builds");
        let build_sh = std::fs::read_to_string(repo().join("workloads/server/build.sh")).unwrap();
        assert!(build_sh.contains("-o \"$out/tbbwork\"") && build_sh.contains("out=target/server"));
        let kernel = w.jobs[3].command[0].strip_prefix("/k/").expect("the OpenMP job runs a kernel");
        assert!(repo().join("kernels").join(format!("{kernel}.c")).is_file(), "no kernel {kernel}");
        assert_eq!(w.jobs[3].env["OMP_NUM_THREADS"], cpus.to_string());
    }
    // With its `needs`, what this machine lacks is left out with a note, never an error.
    let w = Workload::parse(&file, &text, &Expand { cpus: 2, kernels: PathBuf::from("/k") }).unwrap();
    assert_eq!(w.jobs.len() + w.left_out.len(), 4, "{:?}", w.left_out);
}

fn opts(logs: &Path) -> RunOptions {
    RunOptions {
        cpus: CpuSet::parse("0-1").unwrap(),
        quantum: Duration::from_millis(50),
        log_dir: logs.to_path_buf(),
        poll: Duration::from_millis(2),
        omp_adapter: adapter::adapter_library(),
        yield_outside: false,
        limit: Some(Duration::from_secs(300)),
    }
}

/// Most recipes that ran at once, from the `s`/`e` lines (start, end, nanoseconds) they logged.
fn most_at_once(log: &Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap();
    let mut marks: Vec<(u128, i32)> = text
        .lines()
        .filter_map(|l| {
            let (kind, t) = l.split_once(' ')?;
            Some((t.trim().parse().ok()?, if kind == "s" { 1 } else { -1 }))
        })
        .collect();
    marks.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in marks {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// `make -j2` beside a program holding one of the two CPUs: in a policy run the build's jobs
/// follow its allocation of one CPU (its implicit job only, one recipe at a time); under `os`
/// its own `-j2` runs two at once.
#[test]
#[cfg_attr(not(has_make), ignore = "needs make and cc")]
fn a_build_in_a_policy_run_follows_its_allocation_through_a_jobserver() {
    let dir = tempfile::tempdir().unwrap();
    let makefile = dir.path().join("Makefile");
    std::fs::write(
        &makefile,
        "T := a b c d e f\nall: $(T)\n$(T):\n\t@echo s $$(date +%s%N) >> $(LOG); sleep 0.2; echo e $$(date +%s%N) >> $(LOG)\n",
    )
    .unwrap();
    for (config, expected) in [(Config::Policy("equipartition".into()), 1), (Config::Os, 2)] {
        let log = dir.path().join(format!("{}.log", config.name()));
        let text = format!(
            "[[job]]\nname = \"busy\"\ncommand = [\"sh\", \"-c\", \"while :; do :; done & sleep 4; kill $!\"]\nrequest = \"1\"\n\
             [[job]]\nname = \"build\"\ncommand = [\"make\", \"-j2\", \"-f\", \"{}\", \"LOG={}\"]\nat = 0.3\n",
            makefile.display(),
            log.display()
        );
        let w = Workload::parse(Path::new("t.toml"), &text, &Expand { cpus: 2, kernels: "/none".into() }).unwrap();
        let r =
            run(&w, &config, &opts(&dir.path().join(config.name())), &AtomicBool::new(false), &mut |_, _| {}).unwrap();
        assert!(r.jobs.iter().all(|j| j.outcome.ok()), "{:?}", r.jobs);
        assert_eq!(most_at_once(&log), expected, "{}: recipes at once", config.name());
    }
}

/// The workload's oneTBB program, built by workloads/server/build.sh once for all the tests here;
/// `None` without g++ or oneTBB (the script says so and builds nothing).
fn tbbwork() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let built = Command::new("sh").arg("workloads/server/build.sh").current_dir(repo()).status();
            let exe = repo().join("target/server/tbbwork");
            (built.is_ok_and(|s| s.success()) && exe.is_file()).then_some(exe)
        })
        .clone()
}

/// The oneTBB program alone on both CPUs, then beside a program that takes one of them for 4 s,
/// in a policy run: the launcher preloads cpumgr's libtcm (oneTBB names the TCM it loaded) and
/// the program's threads follow the allocation down to one (a 250 ms window in which one thread
/// ran chunks). Needs the workspace's libtcm.so built (`cargo build -p cpumgr-tcm`, or the
/// workspace): not found, the test fails, saying so.
#[test]
#[cfg_attr(
    not(has_onetbb),
    ignore = "needs g++ and oneTBB in target/tbbenv or $CPUMGR_TBB_PREFIX (see workloads/server/build.sh)"
)]
fn a_onetbb_program_in_a_policy_run_follows_its_allocation_through_libtcm() {
    let exe = tbbwork().expect("the build found g++ and oneTBB, but workloads/server/build.sh built no tbbwork");
    assert!(cpumgr_launch::tcm::tcm_library().is_some(), "no libtcm.so: cargo build -p cpumgr-tcm (or the workspace)");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[job]]\nname = \"tbb\"\ncommand = [\"{}\", \"640\", \"5000000\"]\nenv = {{ TBB_VERSION = \"1\", LD_LIBRARY_PATH = \"\" }}\n\
         [[job]]\nname = \"busy\"\ncommand = [\"sh\", \"-c\", \"while :; do :; done & sleep 4; kill $!\"]\nrequest = \"1\"\nat = 0.5\n",
        exe.display()
    );
    let w = Workload::parse(Path::new("t.toml"), &text, &Expand { cpus: 2, kernels: "/none".into() }).unwrap();
    let logs = dir.path().join("logs");
    let r = run(&w, &Config::Policy("equipartition".into()), &opts(&logs), &AtomicBool::new(false), &mut |_, _| {})
        .unwrap();
    assert!(r.jobs.iter().all(|j| j.outcome.ok()), "{:?}", r.jobs);
    let out = std::fs::read_to_string(logs.join("equipartition-tbb.out")).unwrap();
    let windows: Vec<u32> = out
        .lines()
        .find_map(|l| l.strip_prefix("threads"))
        .map(|l| l.split_whitespace().filter_map(|t| t.parse().ok()).collect())
        .unwrap_or_default();
    eprintln!("oneTBB's threads per 250 ms window: {windows:?}");
    assert!(windows.iter().skip(1).any(|&w| w == 1), "its threads followed an allocation of 1 CPU: {out}");
    // oneTBB says which TCM it loaded (TBB_VERSION=1); the job's LD_LIBRARY_PATH is emptied, so
    // cargo's (which holds target/debug and its libtcm.so.1) cannot be what found it.
    let err = std::fs::read_to_string(logs.join("equipartition-tbb.err")).unwrap();
    assert!(err.contains("(cpumgr)"), "cpumgr's libtcm was loaded: {err}");
}

/// The test kernels, built with make and gcc into `dir`.
fn kernels(dir: &Path) -> PathBuf {
    let out = dir.join("kernels");
    let status = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(repo().join("kernels"))
        .arg(format!("OUT={}", out.display()))
        .status();
    assert!(status.is_ok_and(|s| s.success()), "the kernels build with make and gcc -fopenmp");
    out
}

/// The whole workload under equipartition, from the repository's root: every job present ends
/// well, the numpy job's BLAS pool was resized to a share of the CPUs at some point (the Python
/// hook), and the programs printed their results. The TBB job is in where the build found
/// oneTBB; the numpy job needs the Python environment `target/py` (scripts/test-all makes it),
/// which no build probe covers: without it the workload leaves the job out with a note, as it
/// does for any piece not built, and the test says so on stderr and runs the rest.
#[test]
#[cfg_attr(not(has_make), ignore = "needs make and cc")]
fn the_server_workload_runs_to_its_end_under_a_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (file, text) = server_toml();
    tbbwork();
    // Relative paths in the workload are the repository's: the jobs run from its root, as the
    // header says, so the test runs them there too.
    std::env::set_current_dir(repo()).unwrap();
    let w = Workload::parse(&file, &text, &Expand { cpus: 2, kernels: kernels(dir.path()) }).unwrap();
    for (job, missing) in &w.left_out {
        assert!(job != "tbb" || !cfg!(has_onetbb), "the build found oneTBB, yet the TBB job is left out: {missing}");
        eprintln!("the_server_workload_runs_to_its_end_under_a_policy: job {job} left out: needs {missing}");
    }
    let logs = dir.path().join("logs");
    let r = run(&w, &Config::Policy("equipartition".into()), &opts(&logs), &AtomicBool::new(false), &mut |_, _| {})
        .unwrap();
    for j in &r.jobs {
        assert!(j.outcome.ok(), "{}: {} {}", j.name, j.outcome.describe(), j.stderr_tail);
    }
    let out = |job: &str| std::fs::read_to_string(logs.join(format!("equipartition-{job}.out"))).unwrap_or_default();
    if w.jobs.iter().any(|j| j.name == "numpy") {
        let line = out("numpy");
        assert!(line.contains("pool sizes") && line.contains("1: "), "the BLAS pool went to 1 thread: {line}");
    }
    if w.jobs.iter().any(|j| j.name == "tbb") {
        assert!(out("tbb").contains("result "), "{}", out("tbb"));
    }
    assert!(out("openmp").contains("kernel=stencil"), "{}", out("openmp"));
}
