//! The runner with real processes: FCFS and the multiprogramming level, failed and missing
//! commands, processor sets under `static`, and an interrupted run, or one at its time limit, that
//! leaves nothing behind.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_launch::{run, Config, Expand, Outcome, RunOptions, Workload};

fn workload(text: &str) -> Workload {
    Workload::parse(Path::new("t.toml"), text, &Expand { cpus: 2, kernels: "/none".into() }).unwrap()
}

fn opts(dir: &Path) -> RunOptions {
    RunOptions {
        cpus: CpuSet::parse("0-1").unwrap(),
        quantum: Duration::from_millis(50),
        log_dir: dir.to_path_buf(),
        poll: Duration::from_millis(2),
        omp_adapter: None,
        yield_outside: false,
        limit: None,
    }
}

#[test]
fn fcfs_respects_the_multiprogramming_level() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload("mpl = 1\n[[job]]\nname = \"s\"\ncommand = [\"sleep\", \"0.2\"]\nrepeat = 3\n");
    let r = run(&w, &Config::Os, &opts(dir.path()), &AtomicBool::new(false), &mut |_, _| {}).unwrap();
    assert!(r.jobs.iter().all(|j| j.outcome.ok()));
    for pair in r.jobs.windows(2) {
        assert!(pair[1].start >= pair[0].end, "with mpl 1 a job starts after the previous ends: {pair:?}");
    }
    assert!(r.makespan >= 0.6);
}

#[test]
fn failures_are_reported_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(
        "[[job]]\nname = \"bad\"\ncommand = [\"sh\", \"-c\", \"echo boom >&2; exit 3\"]\n\
         [[job]]\nname = \"missing\"\ncommand = [\"/nonexistent/program\"]\n\
         [[job]]\nname = \"crash\"\ncommand = [\"sh\", \"-c\", \"kill -SEGV $$\"]\n",
    );
    let mut seen = Vec::new();
    let r = run(&w, &Config::Os, &opts(dir.path()), &AtomicBool::new(false), &mut |d, t| seen.push((d, t))).unwrap();
    assert_eq!(r.jobs.len(), 3);
    assert_eq!(r.jobs[0].outcome, Outcome::Exited(3));
    assert_eq!(r.jobs[0].stderr_tail, "boom");
    assert!(matches!(&r.jobs[1].outcome, Outcome::NotStarted(why) if why.contains("/nonexistent/program")));
    assert_eq!(r.jobs[2].outcome, Outcome::Signaled(libc::SIGSEGV));
    assert_eq!(seen.last(), Some(&(3, 3)));
}

#[test]
fn static_pins_each_job_to_its_own_processor_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("masks");
    std::fs::create_dir(&out).unwrap();
    let script = format!(
        "grep Cpus_allowed_list /proc/self/status | cut -f2 > {}/$$; echo $OMP_NUM_THREADS >> {}/$$; sleep 0.3",
        out.display(),
        out.display()
    );
    let w =
        workload(&format!("mpl = 2\n[[job]]\nname = \"p\"\ncommand = [\"sh\", \"-c\", \"{script}\"]\nrepeat = 2\n"));
    let r = run(&w, &Config::Static, &opts(dir.path()), &AtomicBool::new(false), &mut |_, _| {}).unwrap();
    assert!(r.jobs.iter().all(|j| j.outcome.ok()), "{:?}", r.jobs);
    let mut masks: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    masks.sort();
    assert_eq!(masks, vec!["0\n1\n", "1\n1\n"], "disjoint one-CPU sets, OMP_NUM_THREADS matched");
}

#[test]
fn an_interrupted_run_ends_every_job() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload("[[job]]\nname = \"long\"\ncommand = [\"sleep\", \"30\"]\nrepeat = 2\n[[job]]\nname = \"late\"\ncommand = [\"true\"]\nat = 60\n");
    let stop = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        run(&w, &Config::Os, &opts(dir.path()), &stop, &mut |_, _| {}).unwrap()
    });
    assert!(r.jobs.iter().all(|j| j.outcome == Outcome::Interrupted), "{:?}", r.jobs);
    assert!(r.makespan < 10.0);
}

#[test]
fn a_run_at_its_time_limit_ends_its_jobs_and_keeps_those_that_finished() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(
        "mpl = 1\n[[job]]\nname = \"quick\"\ncommand = [\"true\"]\n\
         [[job]]\nname = \"long\"\ncommand = [\"sleep\", \"30\"]\nrepeat = 2\n\
         [[job]]\nname = \"late\"\ncommand = [\"true\"]\nat = 60\n",
    );
    let o = RunOptions { limit: Some(Duration::from_secs(3)), ..opts(dir.path()) };
    let r = run(&w, &Config::Os, &o, &AtomicBool::new(false), &mut |_, _| {}).unwrap();
    let outcomes: Vec<&Outcome> = r.jobs.iter().map(|j| &j.outcome).collect();
    // The quick job ended by itself; the long ones were ended (the second waited behind the
    // multiprogramming level); the late one never arrived.
    assert_eq!(
        outcomes,
        [&Outcome::Exited(0), &Outcome::OverLimit, &Outcome::OverLimit, &Outcome::NotArrived],
        "{:?}",
        r.jobs
    );
    assert!(r.makespan < 10.0, "the sleeps were ended: {}", r.makespan);
    // The ended job's exit is in the trace, at the limit or after: the run's timeline ends
    // when the run did, not at the last job that ended by itself.
    let exit = r.trace.iter().find(|e| {
        e.program == Some(cpumgr_core::ProgramId(2))
            && matches!(e.kind, cpumgr_core::trace::EventKind::Exit { status: None })
    });
    assert!(exit.is_some_and(|e| e.t >= 3_000_000_000), "{:?}", r.trace);
    let s = cpumgr_launch::metrics::summarize(&r, &Default::default());
    assert_eq!((s.failed, s.stopped), (0, 3), "jobs the limit stopped are not failures");
    // The late job has no turnaround (it would be negative: it ends before it arrives) and
    // counts in no mean; with no dedicated times, nobody has a slowdown.
    assert_eq!(s.jobs[3].turnaround, None);
    assert!(s.jobs[..3].iter().all(|j| j.turnaround.is_some_and(|t| t >= 0.0)), "{:?}", s.jobs);
    assert!(s.mean_turnaround >= 0.0 && s.mean_slowdown.is_nan(), "{s:?}");
}

#[test]
fn a_policy_run_goes_through_a_manager_and_keeps_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload("[[job]]\nname = \"spin\"\ncommand = [\"sh\", \"-c\", \"i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done\"]\nrepeat = 2\nrequest = \"1\"\n");
    let r =
        run(&w, &Config::Policy("equipartition".into()), &opts(dir.path()), &AtomicBool::new(false), &mut |_, _| {})
            .unwrap();
    assert!(r.jobs.iter().all(|j| j.outcome.ok()), "{:?}", r.jobs);
    use cpumgr_core::trace::EventKind;
    assert!(matches!(r.trace[0].kind, EventKind::Start { ref policy, .. } if policy == "equipartition"));
    let allocations: Vec<_> = r
        .trace
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Allocate { count, cpus, .. } => Some((*count, cpus.len())),
            _ => None,
        })
        .collect();
    assert!(!allocations.is_empty(), "the manager traced its allocations");
    assert!(allocations.iter().all(|&(c, n)| c == 1 && n == 1), "each job asked for 1 CPU: {allocations:?}");
}

/// A policy run at its time limit: the trace is the manager's, and it holds the exit of every
/// job that started, the ended one's included, so its timeline ends when the run did.
#[test]
fn a_policy_run_at_its_time_limit_has_every_exit_in_the_managers_trace() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload("mpl = 1\n[[job]]\nname = \"quick\"\ncommand = [\"true\"]\n[[job]]\nname = \"long\"\ncommand = [\"sleep\", \"30\"]\n");
    let o = RunOptions { limit: Some(Duration::from_secs(3)), ..opts(dir.path()) };
    let r = run(&w, &Config::Policy("equipartition".into()), &o, &AtomicBool::new(false), &mut |_, _| {}).unwrap();
    assert_eq!(
        r.jobs.iter().map(|j| &j.outcome).collect::<Vec<_>>(),
        [&Outcome::Exited(0), &Outcome::OverLimit],
        "{:?}",
        r.jobs
    );
    use cpumgr_core::trace::EventKind;
    let exits: Vec<u64> = r.trace.iter().filter(|e| matches!(e.kind, EventKind::Exit { .. })).map(|e| e.t).collect();
    assert_eq!(exits.len(), 2, "{:?}", r.trace);
    assert!(exits.iter().any(|&t| t >= 3_000_000_000), "the ended job's exit is at the limit or after: {exits:?}");
}

/// The test kernels, built with make and gcc into `dir`.
fn kernels(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("kernels");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
    let make = std::process::Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(src)
        .arg(format!("OUT={}", out.display()))
        .status()
        .unwrap();
    assert!(make.success(), "the kernels build with make and gcc -fopenmp");
    out
}

/// Teams of every region that the kernel logged in a job's stderr.
fn region_teams(log: &Path) -> Vec<u32> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("region "))
        .filter_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("threads=")).and_then(|t| t.parse().ok()))
        .collect()
}

/// Two stencils that each ask for both CPUs (`OMP_NUM_THREADS=2`) arrive together under
/// equipartition: with the OpenMP adapter preloaded, their regions run teams of their one CPU;
/// without it (`omp_adapter: None`), they keep their own team of 2 (held by affinity instead).
#[test]
fn policy_runs_preload_the_openmp_adapter_so_teams_follow_the_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let bin = kernels(dir.path());
    let lib = cpumgr_launch::adapter::adapter_library()
        .expect("libcpumgr_omp.so next to the test binary: run `cargo build --workspace` first");
    let text = "[[job]]\nname = \"st\"\ncommand = [\"{kernels}/stencil\", \"-n\", \"256\", \"-iters\", \"6000\", \"-regions\", \"300\"]\n\
                env = { OMP_NUM_THREADS = \"2\", CPUMGR_KERNEL_LOG = \"1\" }\nrepeat = 2\n";
    let w = Workload::parse(Path::new("t.toml"), text, &Expand { cpus: 2, kernels: bin.clone() }).unwrap();
    for adapter in [Some(lib), None] {
        let logs = dir.path().join(if adapter.is_some() { "with" } else { "without" });
        let o = RunOptions { omp_adapter: adapter.clone(), ..opts(&logs) };
        let r = run(&w, &Config::Policy("equipartition".into()), &o, &AtomicBool::new(false), &mut |_, _| {}).unwrap();
        assert!(r.jobs.iter().all(|j| j.outcome.ok()), "{:?}", r.jobs);
        let teams: Vec<u32> =
            ["st_1", "st_2"].iter().flat_map(|j| region_teams(&logs.join(format!("equipartition-{j}.err")))).collect();
        assert_eq!(teams.len(), 600, "every region logged");
        if adapter.is_some() {
            assert!(teams.contains(&1), "teams follow the allocation of 1 CPU each: {teams:?}");
        } else {
            assert!(teams.iter().all(|&t| t == 2), "unadapted programs keep their team: {teams:?}");
        }
    }
}
