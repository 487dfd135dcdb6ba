//! Real builds under `cpumgr run` with a jobserver: a generated tree of small C files
//! (`cpumgr_jobserver::tree`) built by GNU make `-j64` (pipe style) and by ninja ≥ 1.13 (fifo
//! style; `pip install ninja`) while a second program takes CPUs. Every compile goes through a
//! wrapper that logs its start and end, so the test counts the build's jobs at each moment
//! against the build's allocation as the manager reports it.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use cpumgr_jobserver::tree::{most_at_once, running_at, Tree};
use cpumgr_proto::{Reply, Request};

/// How long a build may take before the test calls it a deadlock.
const BUILD_DEADLINE: Duration = Duration::from_secs(300);

/// Slack for the allocation's reach: the manager's status is polled every few milliseconds and
/// the jobserver reads the slot every 5 ms; a job started just before a shrink still counts
/// against the allocation it started under.
const SLACK: Duration = Duration::from_millis(250);

/// How far after a job's start a rise of the allocation may be seen: the recorder asks every 5 ms
/// and a loaded manager answers late, so a rise the jobserver acted on can reach the samples
/// after the job it let start.
const SEEN_LATE: Duration = Duration::from_millis(100);

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// The build's allocation over time, as the manager reports it, polled every 5 ms.
struct Recorder {
    samples: Arc<Mutex<Vec<(u64, u32)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    fn start(d: &Daemon, name: &str) -> Recorder {
        let (samples, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (s, st, socket, name) = (samples.clone(), stop.clone(), d.socket.clone(), name.to_string());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                // Stamped when asked: the count answered held at some moment of the call, and a
                // slow answer stamped later would date a lower count after a rise.
                let asked = now_ns();
                let status = cpumgr_proto::Conn::connect(&socket).ok().and_then(|c| c.call(&Request::Status).ok());
                if let Some((Reply::Status(r), _)) = status {
                    if let Some(p) = r.programs.iter().find(|p| p.name == name) {
                        s.lock().unwrap().push((asked, p.count));
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Recorder { samples, stop, thread: Some(thread) }
    }

    fn samples(&self) -> Vec<(u64, u32)> {
        self.samples.lock().unwrap().clone()
    }

    /// The most CPUs the build had from `from` to `to`, counting the allocation in force at
    /// `from` (the last sample before it).
    fn most(samples: &[(u64, u32)], from: u64, to: u64) -> Option<u32> {
        let before = samples.iter().rev().find(|(t, _)| *t <= from).map(|s| s.1);
        samples.iter().filter(|(t, _)| (from..=to).contains(t)).map(|s| s.1).chain(before).max()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Checks every job start against the allocation: the jobs running just after it are at most
/// the most CPUs the build had over the longest job's length plus [`SLACK`] before it (and
/// [`SEEN_LATE`] after), and at least make's own one. Returns the most jobs seen running at once.
fn check_jobs(tree: &Tree, samples: &[(u64, u32)]) -> usize {
    let jobs = tree.jobs();
    assert!(jobs.iter().all(|j| j.end.is_some()), "a job never logged its end");
    let longest = jobs.iter().map(|j| j.end.unwrap() - j.start).max().unwrap_or(0);
    let reach = longest + SLACK.as_nanos() as u64;
    let violations: Vec<String> = jobs
        .iter()
        .filter_map(|j| {
            let running = running_at(&jobs, j.start);
            // make's own job runs whenever the build does (before the manager's first decision
            // too): the jobserver hands out the rest.
            let (from, to) = (j.start.saturating_sub(reach), j.start + SEEN_LATE.as_nanos() as u64);
            let allowed = Recorder::most(samples, from, to)?.max(1);
            (running > allowed as usize).then(|| format!("{running} jobs at {} with at most {allowed} CPUs", j.start))
        })
        .collect();
    assert!(
        violations.is_empty(),
        "{} of {} job starts over the allocation (longest job {} ms): {:?}",
        violations.len(),
        jobs.len(),
        longest / 1_000_000,
        &violations[..violations.len().min(10)]
    );
    most_at_once(&jobs)
}

/// Waits for a build to end, failing it as a deadlock after [`BUILD_DEADLINE`].
fn finish(build: &mut Child) -> std::process::ExitStatus {
    let end = Instant::now() + BUILD_DEADLINE;
    loop {
        if let Some(st) = build.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = build.kill();
            panic!("the build did not finish in {BUILD_DEADLINE:?}: deadlocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A build of `tree` with `cmd`, beside a busy program that arrives once 20 jobs are done and
/// leaves after the build has run 1.5 s on one CPU: the build's jobs follow its allocation
/// down to one CPU and back, and it completes.
fn build_beside_a_busy_program(cmd: &[&str], tree: &Tree) {
    let d = Daemon::start("equipartition");
    let rec = Recorder::start(&d, "build");
    let mut build = d
        .cpumgr(&[&["run", "--name", "build", "--"][..], cmd].concat())
        .current_dir(tree.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_or("20 jobs done", || tree.finished() >= 20, || format!("{} jobs", tree.finished()));
    let mut busy = d.cpumgr(&["run", "--name", "busy", "--", "sh", "-c", BUSY]).spawn().unwrap();
    wait_for("the build down to 1 CPU", || rec.samples().last().is_some_and(|s| s.1 == 1));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(build.try_wait().unwrap().is_none(), "the build ended before the busy program left: make the tree bigger");
    let at_one = now_ns();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(busy.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    busy.wait().unwrap();
    let st = finish(&mut build);
    assert!(st.success(), "the build failed: {st}");
    assert_eq!(tree.objects(), tree.n, "every object built");
    let samples = rec.samples();
    assert!(samples.iter().any(|s| s.1 == 1), "the build never had one CPU");
    assert!(samples.iter().any(|s| s.0 > at_one && s.1 == 2), "the build never had both CPUs back");
    let most = check_jobs(tree, &samples);
    let jobs = tree.jobs();
    // Once back on 2 CPUs (after the reach of the 1-CPU jobs), the build runs 2 jobs at once.
    let back = at_one + 2 * SLACK.as_nanos() as u64;
    let two_after = jobs.iter().any(|j| j.start > back && running_at(&jobs, j.start) == 2);
    assert!(two_after, "the build never ran 2 jobs after the allocation came back");
    eprintln!("{}: {} jobs, at most {most} at once, {} allocation samples", cmd.join(" "), jobs.len(), samples.len());
}

#[test]
fn make_j64_runs_no_more_jobs_than_its_allocation_down_to_one_cpu_and_back() {
    let tree = Tree::new(300).unwrap();
    build_beside_a_busy_program(&["make", "-j64"], &tree);
}

#[test]
#[cfg_attr(not(has_ninja_jobserver), ignore = "needs ninja 1.13 or later on PATH (pip install ninja)")]
fn ninja_runs_no_more_jobs_than_its_allocation_down_to_one_cpu_and_back() {
    let tree = Tree::new(300).unwrap();
    build_beside_a_busy_program(&["ninja", "-j64"], &tree);
}

/// `make -j64` with `--no-jobserver` runs far more jobs than CPUs: what the jobserver prevents
/// (and proof that the job count above can fail).
#[test]
fn without_the_jobserver_make_j64_runs_more_jobs_than_cpus() {
    let tree = Tree::new(120).unwrap();
    let d = Daemon::start("equipartition");
    let st = d.cpumgr(&["run", "--no-jobserver", "--", "make", "-j64"]).current_dir(tree.path()).status().unwrap();
    assert!(st.success());
    let most = most_at_once(&tree.jobs());
    assert!(most > 4, "make -j64 without a jobserver ran at most {most} jobs at once");
}

/// A build killed while its jobs hold tokens: the manager goes on serving, and the next build
/// gets its full count of tokens (each run has its own jobserver, dropped with it).
#[test]
fn a_build_that_dies_holding_tokens_leaves_the_manager_unharmed_and_the_tokens_recovered() {
    let d = Daemon::start("equipartition");
    let hold = tempfile::tempdir().unwrap();
    let sleeps: String = (0..8).map(|i| format!("s{i}:\n\t@sleep 60\n")).collect();
    std::fs::write(
        hold.path().join("Makefile"),
        format!("all: {}\n{sleeps}", (0..8).map(|i| format!("s{i}")).collect::<Vec<_>>().join(" ")),
    )
    .unwrap();
    let mut greedy =
        d.cpumgr(&["run", "--name", "greedy", "--", "make", "-j8"]).current_dir(hold.path()).spawn().unwrap();
    let mut pid = 0;
    wait_for("the greedy build to register", || {
        pid = d.status().programs.iter().find(|p| p.name == "greedy").map_or(0, |p| p.pid);
        pid != 0
    });
    let sleeping = || {
        let out = Command::new("pgrep").args(["-g", &pid.to_string(), "-x", "sleep"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    wait_for("the greedy build to hold its token", || sleeping() == 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sleeping(), 2, "2 CPUs: a token and the implicit job");
    // Its whole group dies by SIGKILL, the token still held.
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
    let st = greedy.wait().unwrap();
    assert_eq!(st.code(), Some(137), "cpumgr run reports the build's SIGKILL");
    wait_for("the greedy build gone from the manager", || d.status().programs.iter().all(|p| p.name != "greedy"));

    let tree = Tree::new(60).unwrap();
    let rec = Recorder::start(&d, "build");
    let st = d
        .cpumgr(&["run", "--name", "build", "--", "make", "-j64"])
        .current_dir(tree.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "the next build failed: {st}");
    assert_eq!(tree.objects(), tree.n);
    let most = check_jobs(&tree, &rec.samples());
    assert_eq!(most, 2, "the next build runs on both CPUs at once: its tokens are whole");
}

/// Where the build tools' -j goes: the stripped line is what runs.
#[test]
fn the_users_j_is_a_cap() {
    let tree = Tree::new(40).unwrap();
    let d = Daemon::start("equipartition");
    let rec = Recorder::start(&d, "build");
    let st = d.cpumgr(&["run", "--name", "build", "--", "make", "-j1"]).current_dir(tree.path()).status().unwrap();
    assert!(st.success());
    assert_eq!(check_jobs(&tree, &rec.samples()), 1, "make -j1 runs one job at a time on 2 CPUs");
}

/// A recursive build: the top make's sub-make (`$(MAKE) -C tree`) joins the same jobserver, so
/// its compiles run 2 at once on 2 CPUs (a sub-make without the jobserver would fall back to one
/// job at a time) and never more.
#[test]
fn a_sub_make_shares_the_builds_jobserver() {
    let tree = Tree::new(60).unwrap();
    let top = tempfile::tempdir().unwrap();
    std::fs::write(top.path().join("Makefile"), format!("all:\n\t@$(MAKE) -C {}\n", tree.path().display())).unwrap();
    let d = Daemon::start("equipartition");
    let rec = Recorder::start(&d, "build");
    let st = d
        .cpumgr(&["run", "--name", "build", "--", "make", "-j64"])
        .current_dir(top.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "the recursive build failed: {st}");
    assert_eq!(tree.objects(), tree.n);
    assert_eq!(check_jobs(&tree, &rec.samples()), 2, "the sub-make runs 2 jobs on 2 CPUs, no more");
}
