//! `cpumgr launch` end to end: the test kernels built with make, a small workload of real OpenMP
//! programs run under a baseline and under a policy (through a private manager), the JSON shape
//! of the issue, and the HTML report whose numbers match the JSON.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn launch_compares_a_baseline_and_a_policy_on_real_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("kernels");
    let make = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(repo().join("kernels"))
        .arg(format!("OUT={}", bin.display()))
        .status()
        .unwrap();
    assert!(make.success(), "the kernels build with make and gcc -fopenmp");
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        "name = \"small\"\n[[job]]\nname = \"stencil\"\ncommand = [\"{kernels}/stencil\", \"-iters\", \"400\"]\nenv = { OMP_NUM_THREADS = \"{cpus}\" }\nrepeat = 2\n\
         [[job]]\nname = \"mc\"\ncommand = [\"{kernels}/montecarlo\", \"-n\", \"2000000\"]\nenv = { OMP_NUM_THREADS = \"{cpus}\" }\nat = 0.1\n",
    )
    .unwrap();
    let report = dir.path().join("r.html");
    let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os", "--policy", "gang", "--json", "--kernels"])
        .arg(&bin)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["config"].as_str().unwrap()).collect::<Vec<_>>(), vec!["os", "gang"]);
    let html = std::fs::read_to_string(&report).unwrap();
    for r in runs {
        let jobs = r["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 3);
        assert!(
            jobs.iter()
                .all(|j| j["outcome"] == "ok" && j["turnaround"].as_f64().unwrap() > 0.0 && j["slowdown"].is_f64()),
            "{r}"
        );
        assert!(r["makespan"].as_f64().unwrap() > 0.0);
        // The report's table shows the JSON's makespan, to two decimals.
        let cell = format!("<td>{:.2}</td>", r["makespan"].as_f64().unwrap());
        assert!(html.contains(&cell), "report lacks {cell}");
    }
    assert_eq!(html.matches("<svg class=\"gantt\"").count(), 2, "a Gantt chart per configuration");
}

/// A process's state letter from `/proc/PID/stat` (`R`, `S`, `T`, `Z`...), `None` once it is gone.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
}

/// Ctrl-C in the middle of a gang run of busy programs that the manager time-shares by stopping
/// them: the launcher ends promptly saying it was interrupted, and no process of the workload is
/// left: not the jobs, not the busy children they started, not one that ignores SIGTERM, and so
/// none stopped or pinned. The jobs write their own pids (and their children's); they run only
/// under the manager, so the dedicated runs before it end at once.
#[test]
fn ctrl_c_ends_every_process_of_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let job = format!(
        "[ -n \\\"$CPUMGR_LAUNCHED\\\" ] || exit 0; sh -c 'trap \\\"\\\" TERM; echo $$ >> {p}; while :; do :; done' & echo $$ >> {p}; while :; do :; done",
        p = pids.display()
    );
    let workload = dir.path().join("busy.toml");
    std::fs::write(
        &workload,
        format!("name = \"busy\"\n[[job]]\nname = \"spin\"\ncommand = [\"sh\", \"-c\", \"{job}\"]\nrepeat = 3\n"),
    )
    .unwrap();
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "", "--policy", "gang", "--quantum", "50ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let read_pids = || -> Vec<i32> {
        std::fs::read_to_string(&pids).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while read_pids().len() < 6 {
        assert!(Instant::now() < deadline, "the 3 jobs and their children started: {:?}", read_pids());
        assert!(launcher.try_wait().unwrap().is_none(), "the launcher runs until interrupted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let all = read_pids();
    // Gang time-shares the three jobs that each want every CPU: some are stopped at any moment.
    while !all.iter().any(|&p| state(p) == Some('T')) {
        assert!(Instant::now() < deadline, "gang stops the jobs out of their time slot");
        std::thread::sleep(Duration::from_millis(5));
    }
    unsafe { libc::kill(launcher.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = launcher.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            launcher.kill().unwrap();
            panic!("the launcher did not end within 15 s of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = launcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted: every job was ended"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("interrupted"), "the jobs are reported as interrupted");
    // Gone, or a zombie waiting for init to reap it (an orphaned child): neither runs, is stopped,
    // or holds an affinity. A process killed just now may still be finishing its exit.
    let alive =
        || -> Vec<(i32, char)> { all.iter().filter_map(|&p| state(p).filter(|s| *s != 'Z').map(|s| (p, s))).collect() };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = alive();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        left = alive();
    }
    for (p, _) in &left {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "processes of the workload left behind (pid, state): {left:?}");
}

/// A small workload of two job classes, run quickly.
const SLEEPS: &str = "name = \"sleeps\"\n[[job]]\nname = \"a\"\ncommand = [\"sleep\", \"0.2\"]\nrepeat = 2\n[[job]]\nname = \"b\"\ncommand = [\"sleep\", \"0.1\"]\nat = 0.05\n";

/// With several repeats, each configuration's JSON is one run (its median repeat by makespan):
/// its makespan, means and jobs agree with each other; `makespans` lists every repeat. The
/// terminal table shows the per-class CV of run times of the classes with several jobs.
#[test]
fn results_are_those_of_the_median_repeat_with_cv_per_class() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("sleeps.toml");
    std::fs::write(&workload, SLEEPS).unwrap();
    let launch = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
            .arg("launch")
            .arg(&workload)
            .args(["--baseline", "os,static", "--policy", "", "--repeat", "3"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&launch(&["--json"])).unwrap();
    for r in v["runs"].as_array().unwrap() {
        let makespans: Vec<f64> = r["makespans"].as_array().unwrap().iter().map(|m| m.as_f64().unwrap()).collect();
        assert_eq!(makespans.len(), 3);
        let repeat = r["repeat"].as_u64().unwrap() as usize;
        let makespan = r["makespan"].as_f64().unwrap();
        assert_eq!(makespan, makespans[repeat - 1], "{r}");
        let mut sorted = makespans.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(makespan, sorted[1], "the median repeat");
        let turnarounds: Vec<f64> =
            r["jobs"].as_array().unwrap().iter().map(|j| j["turnaround"].as_f64().unwrap()).collect();
        assert_eq!(turnarounds.len(), 3);
        let mean = turnarounds.iter().sum::<f64>() / 3.0;
        assert!((r["mean_turnaround"].as_f64().unwrap() - mean).abs() < 1e-9, "mean of the same run's jobs: {r}");
        assert_eq!(r["max_turnaround"].as_f64().unwrap(), turnarounds.iter().copied().fold(0.0, f64::max));
        assert!(
            turnarounds.iter().all(|&t| t <= makespan + 1e-9),
            "the jobs are of the run whose makespan is shown: {r}"
        );
        let cv = r["cv"].as_object().unwrap();
        assert_eq!(cv.keys().collect::<Vec<_>>(), vec!["a"], "class b has one job: no CV");
    }
    let table = launch(&[]);
    let header = table.lines().nth(1).unwrap();
    assert!(header.contains("CV of run times"), "{table}");
    let os = table.lines().find(|l| l.trim_start().starts_with("os ")).unwrap();
    assert!(os.contains("a 0.") && !os.contains("b 0.00"), "per-class CV cell, for classes of several jobs only: {os}");
}

/// A workload that names `{kernels}` runs without `--kernels`: the launcher builds the kernels it
/// carries (into a temporary directory), from a directory that is not the repository.
#[test]
fn kernels_default_to_those_the_binary_carries() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("k.toml");
    std::fs::write(&workload, "name = \"k\"\n[[job]]\nname = \"stencil\"\ncommand = [\"{kernels}/stencil\", \"-iters\", \"50\"]\nenv = { OMP_NUM_THREADS = \"{cpus}\" }\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .current_dir(dir.path())
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os", "--policy", "", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let jobs = v["runs"][0]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["outcome"], "ok", "{v}");
}

/// A job that cannot start is a runtime failure: the table still shows it (as failed), and the
/// launcher exits 1 saying how many job runs failed.
#[test]
fn a_job_that_fails_fails_the_launch() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("f.toml");
    let missing = dir.path().join("no-such-program");
    std::fs::write(&workload, format!("name = \"f\"\n[[job]]\nname = \"gone\"\ncommand = [\"{}\"]\n[[job]]\nname = \"fine\"\ncommand = [\"true\"]\n", missing.display())).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os,static", "--policy", ""])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("2 of 4 job runs failed"), "{stderr}");
    assert!(stdout.contains("job gone failed: not started"), "{stdout}");
}

/// A run the time limit stops is a result, not a failure: the launcher exits 0, the table marks
/// the makespan as a lower bound and the stopped job as such, and the job's process is gone.
#[test]
fn a_run_at_the_time_limit_is_a_lower_bound_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    let marker = dir.path().join("long.pid");
    std::fs::write(
        &workload,
        format!(
            "name = \"limited\"\n[[job]]\nname = \"quick\"\ncommand = [\"true\"]\n\
             [[job]]\nname = \"long\"\ncommand = [\"sh\", \"-c\", \"echo $$ > {}; exec sleep 60\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os", "--policy", "", "--time-limit", "3s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let row = stdout.lines().find(|l| l.trim_start().starts_with("os ")).expect("the os row");
    assert!(row.contains('≥'), "the makespan is a lower bound: {row}");
    assert!(stdout.contains("job long stopped at the time limit"), "{stdout}");
    assert!(!stdout.contains("job quick"), "the quick job ended by itself: {stdout}");
    let pid: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
    assert_eq!(state(pid), None, "the stopped job's process is gone");
    assert!(stdout.contains("no slowdown for long: alone, it outlasted the time limit"), "{stdout}");
    // A policy run the limit stops is an error, a baseline's is not.
    let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "", "--policy", "equipartition", "--time-limit", "3s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("policy runs stopped at the time limit: equipartition"),
        "{stderr}"
    );
}
