//! Folding, on unmodified OpenMP binaries with one long parallel region: every construct keeps its
//! result when the team is folded onto fewer CPUs than threads; a barrier team folds when a
//! second program arrives and spreads out again when it leaves, without a new region and without
//! being stopped; two teams that fold at a cost take turns whole; a team that waits in its own
//! spin loops is judged rigid and run whole.
//!
//! Needs `libcpumgr_omp.so` next to the `cpumgr` binary (the README's test command builds the
//! whole workspace first) and two CPUs for the manager (`--cpus 0-1`).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// Held by each test that measures a team: a team's verdict comes from its barrier timings, and
/// two such tests at once (each with a manager of its own on CPUs 0-1) load each other's CPUs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `constructs` from `dir` with two threads and returns its result line without the timing
/// and the team (libomp sizes its teams to the allocation): plainly, or under `cpumgr run` with
/// manager `d`; `bound` binds its threads to CPUs itself (`OMP_PROC_BIND=true`: the runtime sets
/// each thread's affinity at start, under the manager's).
fn constructs(dir: &Path, d: Option<&Daemon>, bound: bool) -> String {
    let kernel = dir.join("constructs");
    let mut cmd = match d {
        Some(d) => {
            let mut c = d.cpumgr(&["run", "--"]);
            c.arg(&kernel);
            c
        }
        None => Command::new(&kernel),
    };
    let out = cmd
        .args(["-steps", "100"])
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_CANCELLATION", "true")
        .env("OMP_PROC_BIND", if bound { "true" } else { "false" })
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "constructs: {}", out.status);
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    line.split_whitespace()
        .filter(|f| !f.starts_with("seconds=") && !f.starts_with("threads="))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every construct's value, under a manager of one CPU (the team of two always folded) and of
/// two, with threads the runtime binds itself (its teams then sized at each fork, not folded) or
/// not, equals the plain run's.
fn folded_teams_keep_every_constructs_result(cc: &str) {
    let _serial = one_at_a_time();
    adapter_is_built();
    let dir = kernels(cc);
    let plain = constructs(&dir, None, false);
    assert!(plain.contains("spun=all"), "{plain}");
    for cpus in ["0", "0-1"] {
        let d = Daemon::start_with("equipartition", &["--cpus", cpus]);
        for bound in [false, true] {
            assert_eq!(constructs(&dir, Some(&d), bound), plain, "managed on CPUs {cpus}, OMP_PROC_BIND={bound}");
        }
    }
}

#[test]
fn gcc_libgomp_folded_teams_keep_every_constructs_result() {
    folded_teams_keep_every_constructs_result("gcc");
}

#[test]
#[cfg_attr(not(has_clang), ignore = "needs clang with LLVM libomp (apt-get install clang libomp-dev)")]
fn clang_libomp_teams_keep_every_constructs_result() {
    folded_teams_keep_every_constructs_result("clang");
}

/// Starts `kernel ARGS` from the gcc build under `cpumgr run` with two threads, the adapter's
/// log in `log`; returns its pid.
fn start(d: &mut Daemon, kernel: &str, args: &[&str], log: &Path) -> i32 {
    start_as(d, kernel, kernel, args, log)
}

/// [`start`] with the program named `name`.
fn start_as(d: &mut Daemon, name: &str, kernel: &str, args: &[&str], log: &Path) -> i32 {
    let path = kernels("gcc").join(kernel);
    let child = d
        .cpumgr(&["run", "--name", name, "--"])
        .arg(path)
        .args(args)
        .env("OMP_NUM_THREADS", "2")
        .env("CPUMGR_OMP_LOG", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    d.runs.push(child);
    let mut pid = 0;
    wait_for(&format!("{name} to register"), || {
        pid = d.status().programs.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
        pid != 0
    });
    pid
}

/// Waits until `log` has a line containing `what`.
fn wait_log(log: &Path, what: &str) {
    let read = || std::fs::read_to_string(log).unwrap_or_default();
    wait_for_or(&format!("'{what}' in the adapter's log"), || whole_lines(&read()).any(|l| l.contains(what)), read);
}

/// How `name`'s team runs and on how many CPUs, as `status` says.
fn team_of(d: &Daemon, name: &str) -> Option<(String, u32)> {
    d.status().programs.into_iter().find(|p| p.name == name).map(|p| (p.team, p.count))
}

/// Whether every thread of `pid` may run on exactly `n` CPUs.
fn on_cpus(pid: i32, n: usize) -> bool {
    thread_cpus(pid).iter().all(|c| c.len() == n)
}

/// Starts a stencil under `d` with one region of sweeps far longer than a test, ~400 us of work
/// per thread between barriers, so that a hand-over (a few us, tens in a debug build of the
/// adapter) never makes it worth running whole; the adapter's log in `log`. Returns its pid.
fn long_stencil(d: &mut Daemon, log: &Path) -> i32 {
    start(d, "stencil", &["-n", "1024", "-rows", "512", "-iters", "100000000", "-regions", "1"], log)
}

/// What a test of one program's team needs: the lock, a manager under equipartition, and the
/// adapter's log of the program in a temporary directory. Bind the lock and the directory first
/// (`let Setup { _serial, _tmp, mut d, log }`): locals drop in reverse, so the manager and its
/// programs are gone before the next test may start.
struct Setup {
    _serial: std::sync::MutexGuard<'static, ()>,
    d: Daemon,
    log: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

fn setup(program: &str) -> Setup {
    let serial = one_at_a_time();
    adapter_is_built();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join(format!("{program}.err"));
    Setup { _serial: serial, d: Daemon::start("equipartition"), log, _tmp: tmp }
}

#[test]
fn a_long_region_folds_when_a_program_arrives_and_spreads_when_it_leaves() {
    let Setup { _serial, _tmp, mut d, log } = setup("stencil");
    let pid = long_stencil(&mut d, &log);
    wait_log(&log, "region team 2 folding");
    wait_for("the stencil's team of 2 folding on both CPUs", || {
        team_of(&d, "stencil") == Some(("folding".into(), 2)) && on_cpus(pid, 2)
    });
    let busy = d.run("busy", BUSY);
    wait_for("the team folded onto one CPU beside the busy program, never stopped", || {
        assert!(
            !stopped(pid),
            "a folding team is never stopped:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        team_of(&d, "stencil") == Some(("folding".into(), 1)) && on_cpus(pid, 1)
    });
    // Folded, it still makes progress in its one region: its CPU time grows.
    let cpu = |d: &Daemon| d.status().programs.iter().find(|p| p.name == "stencil").map_or(0, |p| p.cpu_ms);
    let before = cpu(&d);
    wait_for("the folded stencil to use CPU time", || cpu(&d) > before + 200);
    assert!(!stopped(pid), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(busy), nix::sys::signal::SIGKILL).unwrap();
    wait_for_or(
        "the same region's team spread over both CPUs again",
        || team_of(&d, "stencil") == Some(("folding".into(), 2)) && on_cpus(pid, 2),
        || {
            format!(
                "{:?} {:?}\n{}",
                team_of(&d, "stencil"),
                thread_cpus(pid),
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        },
    );
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(whole_lines(&lines).filter(|l| l.contains("region team")).count(), 1, "one region all along:\n{lines}");
}

/// Programs the manager does not know take most of the folded team's CPU: its barriers come
/// several times as far apart, but its threads spend no more CPU time per barrier, so it stays folded.
#[test]
fn a_folded_team_stays_folding_beside_unmanaged_programs_on_its_cpus() {
    let Setup { _serial, _tmp, mut d, log } = setup("stencil");
    let pid = long_stencil(&mut d, &log);
    d.run("busy", BUSY);
    wait_for("the team folded onto one CPU", || {
        team_of(&d, "stencil") == Some(("folding".into(), 1)) && on_cpus(pid, 1)
    });
    let outsiders: Vec<_> = (0..4).map(|_| Outsider::start()).collect();
    // Hundreds of the team's judgements (one per 16 barriers, ~400 us of work each).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(!lines.contains("is rigid"), "judged rigid for what others ran:\n{lines}");
    assert_eq!(team_of(&d, "stencil").map(|t| t.0), Some("folding".into()), "{lines}");
    drop(outsiders);
}

/// A busy shell the manager does not know, on the manager's CPUs 0-1, killed on drop.
struct Outsider(std::process::Child);

impl Outsider {
    fn start() -> Outsider {
        Outsider(Command::new("taskset").args(["-c", "0-1", "sh", "-c", BUSY]).spawn().unwrap())
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two very fine-grained teams (about a microsecond of work per thread between barriers) side by
/// side: folded, each takes several times the CPU time per barrier it takes whole, and says so;
/// the manager then runs them whole in turn (both CPUs to one, none to the other), still as
/// folding teams, rather than each folded onto a CPU.
#[test]
fn two_teams_that_fold_at_a_cost_take_turns_whole() {
    let Setup { _serial, _tmp, mut d, log } = setup("fine-a");
    let args = ["-n", "32", "-rows", "64", "-iters", "1000000000", "-regions", "1"];
    start_as(&mut d, "fine-a", "stencil", &args, &log);
    wait_log(&log, "region team 2 folding");
    // Alone for a while first, as a program mostly is when the next one comes: its cost is
    // measured against its unfolded spans, and spans that B's start-up took CPU time from
    // (spinning at barriers meanwhile) would make it look cheap to fold.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let log_b = log.with_file_name("fine-b.err");
    start_as(&mut d, "fine-b", "stencil", &args, &log_b);
    // Both folding, one on both CPUs and the other on none: one of them is ganged for its cost.
    // Seen both ways round, since a probe's last turn (B run whole, reported rigid) can look so
    // once as B's verdict lands; the costs are those status showed then.
    let mut seen = [false, false];
    let mut costs = Vec::new();
    wait_for_or(
        "each folding team to run whole while the other waits",
        || {
            let status = d.status();
            let of = |name: &str| status.programs.iter().find(|p| p.name == name && p.team == "folding");
            if let (Some(a), Some(b)) = (of("fine-a"), of("fine-b")) {
                for (i, (whole, none)) in [(a, b), (b, a)].into_iter().enumerate() {
                    if whole.count == 2 && none.count == 0 {
                        seen[i] = true;
                        costs.extend(a.fold_cost.into_iter().chain(b.fold_cost));
                    }
                }
            }
            seen == [true, true]
        },
        || {
            let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
            format!("{:?} {:?}\n{}\n{}", team_of(&d, "fine-a"), team_of(&d, "fine-b"), read(&log), read(&log_b))
        },
    );
    assert!(costs.iter().any(|&c| c > 1.0 + cpumgr_daemon::team::GANG_MARGIN), "status: fold costs {costs:?}");
}

#[test]
fn a_team_that_spins_in_its_own_loops_is_judged_rigid_when_folded() {
    let Setup { _serial, _tmp, mut d, log } = setup("pipeline");
    // The LU-like pipeline waits on its neighbour's flags in its own loops, in one region.
    start(&mut d, "pipeline", &["-n", "512", "-iters", "100000000", "-regions", "1"], &log);
    wait_log(&log, "region team 2 folding");
    d.run("busy", BUSY);
    wait_log(&log, "team of 2 is rigid");
    wait_for("status to call the pipeline's team rigid", || team_of(&d, "pipeline").is_some_and(|(t, _)| t == "rigid"));
}

/// A verdict rings the manager: a folded team found to spin is ganged at the step the ring starts,
/// not at the next quantum boundary. The manager's first boundary comes 10 s after it starts,
/// the verdict within a few seconds: the gang must follow the verdict by less than half that.
#[test]
fn a_team_judged_rigid_is_ganged_before_the_next_boundary() {
    let serial = one_at_a_time();
    adapter_is_built();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("pipeline.err");
    let mut d = Daemon::start_with("equipartition", &["--quantum", "10s"]);
    start(&mut d, "pipeline", &["-n", "512", "-iters", "100000000", "-regions", "1"], &log);
    wait_log(&log, "region team 2 folding");
    d.run("busy", BUSY);
    wait_for("the pipeline folded onto one CPU", || team_of(&d, "pipeline") == Some(("folding".into(), 1)));
    wait_log(&log, "team of 2 is rigid");
    let verdict = std::time::Instant::now();
    while !team_of(&d, "pipeline").is_some_and(|(t, n)| t == "rigid" && n != 1) {
        assert!(
            verdict.elapsed() < std::time::Duration::from_secs(5),
            "the rigid pipeline left on one CPU until a boundary: {:?}",
            team_of(&d, "pipeline")
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop((d, serial));
}

#[test]
fn a_killed_manager_leaves_a_folded_team_running_on_every_cpu() {
    let Setup { _serial, _tmp, mut d, log } = setup("stencil");
    let pid = long_stencil(&mut d, &log);
    d.run("busy", BUSY);
    wait_for("the team folded onto one CPU", || {
        team_of(&d, "stencil") == Some(("folding".into(), 1)) && on_cpus(pid, 1)
    });
    let _ = d.child.kill();
    let _ = d.child.wait();
    // `cpumgr run` widens it back; the lease runs out, so its members stop sleeping for a fold.
    let wide = inherited();
    wait_for("every thread of the team back on every CPU, running", || {
        !stopped(pid) && thread_cpus(pid).iter().all(|c| *c == wide)
    });
    // Time on CPU, ns: the first field of schedstat.
    let ran = |pid: i32| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
        text.split_whitespace().next().and_then(|f| f.parse::<u64>().ok()).unwrap_or(0)
    };
    let before = ran(pid);
    wait_for("the region to keep going", || ran(pid) > before + 200_000_000);
}
