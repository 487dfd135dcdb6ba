//! The OpenMP adapter on unmodified OpenMP binaries (the project's kernels, built with gcc +
//! libgomp and with clang + LLVM libomp): every region's team, as the kernel itself logs it from
//! `omp_get_num_threads()`, equals the allocation, and follows a policy change mid-run.
//!
//! Needs `libcpumgr_omp.so` next to the `cpumgr` binary: the README's test command builds the
//! whole workspace first.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// The team of every region logged so far in `log`.
fn teams(log: &Path) -> Vec<u32> {
    whole_lines(&std::fs::read_to_string(log).unwrap_or_default())
        .filter(|l| l.starts_with("region "))
        .filter_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("threads=")).and_then(|t| t.parse().ok()))
        .collect()
}

/// Starts a long stencil (far longer than the test needs; it is ended by the daemon's drop) under
/// `cpumgr run`, its region log in `log`: short regions (10 sweeps of a 64 × 64 grid).
fn long_stencil(d: &mut Daemon, dir: &Path, name: &str, log: &Path, extra: &[&str]) {
    stencil_with(d, dir, name, log, extra, &["-n", "64", "-iters", "10000000", "-regions", "1000000"]);
}

/// [`long_stencil`] with the stencil's own arguments.
fn stencil_with(d: &mut Daemon, dir: &Path, name: &str, log: &Path, extra: &[&str], stencil_args: &[&str]) {
    let stencil = dir.join("stencil");
    let mut args = vec!["run", "--name", name];
    args.extend_from_slice(extra);
    args.extend(["--", stencil.to_str().unwrap()]);
    args.extend_from_slice(stencil_args);
    let child = Command::new(BIN)
        .args(&args)
        .env("CPUMGR_SOCKET", &d.socket)
        .env("CPUMGR_KERNEL_LOG", "1")
        .env("OMP_NUM_THREADS", "2")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    d.runs.push(child);
}

/// Waits until the regions logged after the first `from` all have team `team`, at least three.
fn wait_teams(log: &Path, from: usize, team: u32, what: &str) -> usize {
    let mut seen = 0;
    wait_for(what, || {
        let t = teams(log);
        seen = t.len();
        // Regions already forked when the allocation changed may keep the old team.
        t.len() > from + 3 && t[t.len() - 3..].iter().all(|&x| x == team)
    });
    seen
}

/// A manager under equipartition with one long stencil built with `cc`, alone and so running
/// teams of 2.
struct Alone {
    /// The kernels' directory.
    dir: PathBuf,
    /// The stencil's region log.
    log: PathBuf,
    d: Daemon,
    /// Regions logged when it was seen running teams of 2.
    seen: usize,
    /// Holds the log: bind it (not `..`) for as long as the log is read.
    _tmp: tempfile::TempDir,
}

fn stencil_alone(cc: &str) -> Alone {
    adapter_is_built();
    let dir = kernels(cc);
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("stencil.err");
    let mut d = Daemon::start("equipartition");
    long_stencil(&mut d, &dir, "stencil", &log, &[]);
    let seen = wait_teams(&log, 0, 2, "the stencil alone to run teams of 2");
    Alone { dir, log, d, seen, _tmp: tmp }
}

fn follows_a_policy_change(cc: &str) {
    let Alone { log, d, seen: n, _tmp, .. } = stencil_alone(cc);
    assert!(d.cpumgr(&["policy", "set", "static:parts=2"]).status().unwrap().success());
    let n = wait_teams(&log, n, 1, "teams of 1 in one of two processor sets");
    assert!(d.cpumgr(&["policy", "set", "equipartition"]).status().unwrap().success());
    wait_teams(&log, n, 2, "teams of 2 again");
    assert!(teams(&log).iter().all(|&t| (1..=2).contains(&t)));
}

#[test]
fn gcc_libgomp_regions_follow_a_policy_change() {
    follows_a_policy_change("gcc");
}

#[test]
#[cfg_attr(not(has_clang), ignore = "needs clang with LLVM libomp (apt-get install clang libomp-dev)")]
fn clang_libomp_regions_follow_a_policy_change() {
    follows_a_policy_change("clang");
}

#[test]
fn two_programs_each_run_teams_of_their_one_cpu() {
    adapter_is_built();
    let dir = kernels("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let (la, lb) = (tmp.path().join("a.err"), tmp.path().join("b.err"));
    let mut d = Daemon::start("equipartition");
    long_stencil(&mut d, &dir, "a", &la, &[]);
    wait_teams(&la, 0, 2, "a alone to run teams of 2");
    long_stencil(&mut d, &dir, "b", &lb, &[]);
    let n = wait_teams(&la, 0, 1, "a to shrink to 1 when b arrives");
    wait_teams(&lb, 0, 1, "b to run teams of 1");
    // The manager sees the team each one reports (cooperative), so nobody is squeezed: once a's
    // 2-thread region that was running when b came has ended, each holds one CPU. (A status read
    // at once can still see the step that ran that region as a gang of 2.)
    wait_for("each to hold one CPU", || {
        let s = d.status();
        s.programs.len() == 2 && s.programs.iter().all(|p| p.count == 1)
    });
    assert!(teams(&la)[n..].iter().all(|&t| t == 1));
}

#[test]
fn without_a_manager_the_adapter_keeps_the_programs_own_team() {
    adapter_is_built();
    let dir = kernels("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(dir.join("stencil"))
        .args(["-n", "32", "-iters", "40", "-regions", "4"])
        .env("LD_PRELOAD", Path::new(BIN).with_file_name("libcpumgr_omp.so"))
        .env("CPUMGR_SOCKET", tmp.path().join("nobody.sock"))
        .env("CPUMGR_KERNEL_LOG", "1")
        .env("OMP_NUM_THREADS", "3")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("cpumgr: no manager").count(), 1, "said once: {err}");
    let t: Vec<&str> = err.lines().filter(|l| l.starts_with("region ")).collect();
    assert_eq!(t.len(), 4);
    assert!(t.iter().all(|l| l.contains("threads=3")), "{err}");
}

/// A program whose runtime registered itself (no `cpumgr run` watches it) comes back to a
/// restarted manager: the client library registers it again with the slot it kept, and the new
/// manager's allocation reaches its regions through the same page.
#[test]
fn a_program_that_registered_itself_is_readopted_by_a_restarted_manager() {
    adapter_is_built();
    let dir = kernels("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("stencil.err");
    let mut d = Daemon::start("equipartition");
    let child = Command::new(dir.join("stencil"))
        .args(["-n", "64", "-iters", "10000000", "-regions", "1000000"])
        .env("LD_PRELOAD", Path::new(BIN).with_file_name("libcpumgr_omp.so"))
        .env("CPUMGR_SOCKET", &d.socket)
        .env("CPUMGR_KERNEL_LOG", "1")
        .env("OMP_NUM_THREADS", "2")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    d.runs.push(child);
    let listed = |d: &Daemon| d.status().programs.iter().any(|p| p.pid == pid);
    wait_for("the program to register itself", || listed(&d));
    let n = wait_teams(&log, 0, 2, "teams of 2 under the first manager");
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    d.child =
        d.cpumgr(&["daemon", "--policy", "static:parts=2", "--quantum", "50ms", "--cpus", "0-1"]).spawn().unwrap();
    wait_for("the restarted manager to list the program", || {
        cpumgr_proto::Conn::connect(&d.socket).is_ok() && listed(&d)
    });
    wait_teams(&log, n, 1, "teams of 1 from the restarted manager's processor set");
    // The client says so once the manager has answered, and the manager's first allocation can
    // reach the regions before the client's thread gets to write it: wait for it too.
    let said = || std::fs::read_to_string(&log).unwrap().matches("cpumgr: registered again").count();
    // The client's lines, without the kernel's region lines around them.
    let notes = || {
        let text = std::fs::read_to_string(&log).unwrap();
        text.lines().filter(|l| l.contains("cpumgr")).collect::<Vec<_>>().join("\n")
    };
    wait_for_or("the program to say it registered again", || said() > 0, notes);
    assert_eq!(said(), 1, "{}", notes());
}

#[test]
fn an_explicit_team_request_caps_the_allocation() {
    adapter_is_built();
    let dir = kernels("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("epd.err");
    let _d = {
        let d = Daemon::start("equipartition");
        // epd asks omp_set_num_threads(2, 4, 4, 2) phase by phase; the allocation is 2 CPUs.
        let st = Command::new(BIN)
            .args(["run", "--", dir.join("epd").to_str().unwrap(), "-n", "20000", "-max", "4", "-cycles", "2"])
            .env("CPUMGR_SOCKET", &d.socket)
            .env("CPUMGR_KERNEL_LOG", "1")
            .env("CPUMGR_OMP_LOG", "1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .status()
            .unwrap();
        assert!(st.success());
        d
    };
    let text = std::fs::read_to_string(&log).unwrap();
    // The adapter logs each region at its fork, the kernel from inside it: a line of each per
    // region, in that order.
    let probes: Vec<bool> = text
        .lines()
        .filter(|l| l.starts_with("cpumgr-omp: region team "))
        .map(|l| l.ends_with("(baseline probe)"))
        .collect();
    let regions: Vec<(u32, u32)> = text
        .lines()
        .filter(|l| l.starts_with("region "))
        .map(|l| {
            let get = |k: &str| l.split_whitespace().find_map(|f| f.strip_prefix(k)).unwrap().parse::<u32>().unwrap();
            (get("threads="), get("request="))
        })
        .collect();
    assert_eq!((regions.len(), probes.len()), (8, 8), "{text}");
    assert!(probes.iter().filter(|&&p| p).count() <= 1, "one region key, probed at most once: {text}");
    for ((threads, request), probe) in regions.into_iter().zip(probes) {
        // A region the SelfAnalyzer spends on its baseline runs on one thread.
        assert_eq!(threads, if probe { 1 } else { request.min(2) }, "{text}");
    }
}

/// `rigid` opens its region with `num_threads(2)` and fails unless it gets exactly that team;
/// squeezed beside a malleable stencil, the adapter keeps the clause and the manager runs the
/// rigid program as a gang instead.
fn an_explicit_num_threads_clause_is_kept(cc: &str) {
    let Alone { dir, d, _tmp, .. } = stencil_alone(cc);
    let out = d
        .cpumgr(&[
            "run",
            "--name",
            "rigid",
            "--",
            dir.join("rigid").to_str().unwrap(),
            "-threads",
            "2",
            "-n",
            "4096",
            "-iters",
            "200",
        ])
        .env("CPUMGR_KERNEL_LOG", "1")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rigid got another team than its clause: {err}");
    let teams: Vec<&str> = err.lines().filter(|l| l.starts_with("region ")).collect();
    assert!(!teams.is_empty() && teams.iter().all(|l| l.contains("threads=2")), "{err}");
}

#[test]
fn gcc_libgomp_keeps_an_explicit_num_threads_clause() {
    an_explicit_num_threads_clause_is_kept("gcc");
}

#[test]
#[cfg_attr(not(has_clang), ignore = "needs clang with LLVM libomp (apt-get install clang libomp-dev)")]
fn clang_libomp_keeps_an_explicit_num_threads_clause() {
    an_explicit_num_threads_clause_is_kept("clang");
}

/// The speedup `cpumgr status --json` shows for the program `name`, if any.
fn status_speedup(d: &Daemon, name: &str) -> Option<f64> {
    let out = d.cpumgr(&["status", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["programs"].as_array()?.iter().find(|p| p["name"] == name)?["speedup"].as_f64()
}

/// An unmodified program never varies its team, and alone under `pdpa` its allocation never
/// varies either: the adapter runs one instance of a timed region on one thread (the
/// SelfAnalyzer's baseline), and the region's timings on the two team sizes become the speedup
/// report `pdpa` reads, shown by `cpumgr status --json`.
fn under_pdpa_regions_timed_by_the_adapter_give_a_speedup(cc: &str) {
    adapter_is_built();
    let dir = kernels(cc);
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("stencil.err");
    let mut d = Daemon::start("pdpa");
    // Regions of 100 sweeps of a 256 × 256 grid: milliseconds each, long enough to time.
    stencil_with(&mut d, &dir, "stencil", &log, &[], &["-n", "256", "-iters", "100000000", "-regions", "1000000"]);
    let mut speedup = None;
    wait_for("a speedup in cpumgr status --json", || {
        speedup = status_speedup(&d, "stencil");
        speedup.is_some()
    });
    let s = speedup.unwrap();
    assert!(s.is_finite() && s > 0.0 && s <= 2.0, "a speedup on at most the 2 managed CPUs: {s}");
    // The baseline probe is one region on one thread: the log has a team of 1 among teams of 2.
    let t = teams(&log);
    assert!(t.contains(&1) && t[0] == 2, "the moldable start at 2, then the probe at 1: {t:?}");
}

#[test]
fn gcc_libgomp_regions_timed_by_the_adapter_reach_pdpa_as_a_speedup() {
    under_pdpa_regions_timed_by_the_adapter_give_a_speedup("gcc");
}

#[test]
#[cfg_attr(not(has_clang), ignore = "needs clang with LLVM libomp (apt-get install clang libomp-dev)")]
fn clang_libomp_regions_timed_by_the_adapter_reach_pdpa_as_a_speedup() {
    under_pdpa_regions_timed_by_the_adapter_give_a_speedup("clang");
}

/// A manager (`cpumgr daemon`) on a private socket managing CPU 1 only, stopped with SIGTERM
/// when dropped, with the programs started under it.
struct OneCpu {
    daemon: std::process::Child,
    socket: PathBuf,
    runs: Vec<std::process::Child>,
    _dir: tempfile::TempDir,
}

impl OneCpu {
    fn start() -> OneCpu {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cpumgr.sock");
        let daemon = Command::new(BIN)
            .args(["daemon", "--policy", "equipartition", "--quantum", "50ms", "--cpus", "1"])
            .env("CPUMGR_SOCKET", &socket)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the manager to answer", || cpumgr_proto::Conn::connect(&socket).is_ok());
        OneCpu { daemon, socket, runs: Vec::new(), _dir: dir }
    }
}

impl Drop for OneCpu {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, SIGTERM};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(self.daemon.id() as i32), SIGTERM);
        let _ = self.daemon.wait();
        for r in &mut self.runs {
            let _ = kill(Pid::from_raw(r.id() as i32), SIGTERM);
            let _ = r.wait();
        }
    }
}

/// `rigid` keeps 3 spinning threads whatever it is allocated (its `num_threads(3)` clause), on
/// a manager that has one CPU to give: with `--no-omp` it never reads its slot, with `--omp` it
/// reads it and keeps its clause. Either way every one of its threads, the OpenMP workers it
/// creates after it registered included, is held to the manager's CPU.
fn a_program_with_more_threads_than_cpus_is_held_to_its_cpu_set(flag: &str) {
    let dir = kernels("gcc");
    let mut m = OneCpu::start();
    let rigid = dir.join("rigid");
    let child = Command::new(BIN)
        .args([
            "run",
            "--name",
            "rigid",
            flag,
            "--",
            rigid.to_str().unwrap(),
            "-threads",
            "3",
            "-n",
            "4096",
            "-iters",
            "100000000",
        ])
        .env("CPUMGR_SOCKET", &m.socket)
        .env("OMP_NUM_THREADS", "3")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    m.runs.push(child);
    let status =
        || match cpumgr_proto::Conn::connect(&m.socket).unwrap().call(&cpumgr_proto::Request::Status).unwrap().0 {
            cpumgr_proto::Reply::Status(s) => s,
            r => panic!("{r:?}"),
        };
    let mut pid = 0;
    wait_for("rigid to register", || {
        pid = status().programs.iter().find(|p| p.name == "rigid").map_or(0, |p| p.pid);
        pid != 0
    });
    let cpu1 = cpumgr_core::CpuSet::parse("1").unwrap();
    wait_for("every thread of rigid (its 3 OpenMP threads at least) on CPU 1", || {
        let t = thread_cpus(pid);
        t.len() >= 3 && t.iter().all(|s| *s == cpu1)
    });
    let p = status().programs.into_iter().find(|p| p.name == "rigid").unwrap();
    assert!(p.count <= 1, "one CPU to give: {p:?}");
}

#[test]
fn a_program_that_never_reads_its_slot_is_held_to_its_cpu_set() {
    a_program_with_more_threads_than_cpus_is_held_to_its_cpu_set("--no-omp");
}

#[test]
fn a_program_that_keeps_more_threads_than_allocated_is_held_to_its_cpu_set() {
    adapter_is_built();
    a_program_with_more_threads_than_cpus_is_held_to_its_cpu_set("--omp");
}

/// A child process killed and reaped when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// LLPC mode (paper 001), no manager: an unmodified stencil with the adapter preloaded sizes each
/// region from the machine's load. A busy background process per CPU (two on this machine) leaves it
/// no CPU to spare, and its teams shrink to the master alone. (Growing back needs a quiet machine,
/// which a shared one cannot promise: `cargo bench -p cpumgr-kernels --bench kernels -- llpc`
/// shows both directions as threads per region, and the LLPC step is unit-tested in
/// cpumgr-client.)
#[test]
fn llpc_mode_shrinks_the_teams_under_a_background_load() {
    adapter_is_built();
    let dir = kernels("gcc");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("stencil.err");
    let _stencil = Killed(
        Command::new(dir.join("stencil"))
            .args(["-n", "64", "-iters", "10000000", "-regions", "1000000"])
            .env("LD_PRELOAD", Path::new(BIN).with_file_name("libcpumgr_omp.so"))
            .env("CPUMGR_MODE", "llpc")
            .env("CPUMGR_KERNEL_LOG", "1")
            .env("OMP_NUM_THREADS", "2")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the stencil's first regions", || !teams(&log).is_empty());
    // A busy process for every CPU the stencil may use: none is left spare, whatever the machine.
    let hogs = inherited().len();
    let _hogs: Vec<Killed> =
        (0..hogs).map(|_| Killed(Command::new("sh").args(["-c", BUSY]).spawn().unwrap())).collect();
    let n = teams(&log).len();
    wait_teams(&log, n, 1, "teams of 1 beside a busy process per CPU");
    assert!(teams(&log).iter().all(|&t| (1..=2).contains(&t)));
}
