//! The cpuset backend on real processes: each program's processes in a cgroup of the manager's
//! whose `cpuset.cpus` is its allocation, children born inside, and nothing left in a cgroup the
//! manager created after a program leaves, after the manager stops, or after it dies outright. A
//! program in a cpuset cgroup someone else made (as Slurm makes a step's) stays there, confined
//! by affinity.
//! Ignored where the build found no writable cpuset hierarchy; a run that then cannot write it
//! fails, saying why (the probe and the run disagree: a machine to look at, not a test to pass).

mod support;

use std::path::PathBuf;
use std::process::Command;

use cpumgr_core::{CpuSet, ProgramId};
use cpumgr_daemon::cpuset::Cpusets;
use cpumgr_daemon::enforce::{self, Choice};
use cpumgr_daemon::procfs::{self, Target};
use cpumgr_daemon::Settings;
use support::{Live, Sleepers};

/// Checks that the tree can be written, as the build's probe found (`has_cpusets`).
fn writable() {
    if let Err(e) = Cpusets::open() {
        panic!("the build found a writable cpuset tree, this run cannot write it: {e}");
    }
}

/// The cpuset cgroup path of `pid` (v1 line naming `cpuset`, else the v2 line).
fn cgroup_of(pid: i32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let field = |want: &dyn Fn(&str) -> bool| {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, p) = (f.next()?, f.next()?, f.next()?);
            want(c).then(|| p.to_string())
        })
    };
    field(&|c| c.split(',').any(|c| c == "cpuset")).or_else(|| field(&|c| c.is_empty())).unwrap()
}

/// A manager of CPUs 0-1 under equipartition, on the cpuset backend.
fn two_cpus_on_cpusets() -> Settings {
    Settings {
        policy: "equipartition".into(),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        backend: Choice::Cpuset,
        ..Default::default()
    }
}

fn affinity(pid: i32) -> CpuSet {
    enforce::affinity(pid).unwrap()
}

#[test]
#[cfg_attr(not(has_cpusets), ignore = "needs a writable cpuset cgroup (root, or a delegated v2 subtree)")]
fn programs_live_in_cgroups_of_their_cpus_and_leave_nothing_behind() {
    writable();
    // A: a shell that forks a child once confined; B: a sleeper.
    let kids = Sleepers::spawn(1);
    let mut a_cmd = Command::new("sh");
    std::os::unix::process::CommandExt::process_group(&mut a_cmd, 0);
    let mut a_proc =
        a_cmd.args(["-c", "read x; sleep 600 & wait"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
    let (a_pid, b_pid) = (a_proc.id() as i32, kids.pids()[0]);
    let home = cgroup_of(b_pid);
    let wide = affinity(b_pid);
    let live = Live::start(&two_cpus_on_cpusets());
    let (a, _sa) = live.register(a_pid, 1);
    let (b, _sb) = live.register(b_pid, 1);
    let s = live.wait_status("one CPU each", |s| s.programs.iter().all(|p| p.count == 1));
    assert!(s.backend.starts_with("cpuset-v"), "{}", s.backend);
    let dir_of = |pid: i32| cgroup_of(pid);
    for (id, pid) in [(a, a_pid), (b, b_pid)] {
        // A program is confined once its allocation is enforced (a new one keeps the CPUs it
        // started with for a grace period): the kernel then holds it to its cgroup's cpuset.
        let cpus = s.programs.iter().find(|p| p.id == id).unwrap().cpus.clone();
        live.wait_status("confinement", |_| dir_of(pid).ends_with(&format!("/prog-{id}")) && affinity(pid) == cpus);
        let cg = dir_of(pid);
        assert!(cg.contains(&format!("/cpumgr-{}-", std::process::id())), "{cg}");
        let written = std::fs::read_to_string(mounted(&cg).join("cpuset.cpus")).unwrap();
        assert_eq!(CpuSet::parse(written.trim()).unwrap(), cpus, "its cgroup holds its CPUs");
    }
    // A child A forks now is born in A's cgroup, before any quantum sees it.
    use std::io::Write;
    a_proc.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let child = loop {
        let s = procfs::scan(&[Target::Group(a_pid)]).remove(&Target::Group(a_pid)).unwrap_or_default();
        if let Some(&c) = s.pids.iter().find(|&&p| p != a_pid) {
            break c;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    assert_eq!(dir_of(child), dir_of(a_pid), "the child is born inside its program's cgroup");

    // Unregistered: back home, widened, the program's cgroup gone.
    let b_cg = dir_of(b_pid);
    live.conn.call(&cpumgr_proto::Request::Unregister { id: b }).unwrap();
    live.wait_status("b forgotten", |s| s.programs.len() == 1);
    assert_eq!(dir_of(b_pid), home);
    assert_eq!(affinity(b_pid), wide);
    let b_dir = mounted(&b_cg);
    assert!(!b_dir.exists(), "{} removed", b_dir.display());

    // The manager stops: A and its child go home too, and the manager's directory goes.
    let a_cg = dir_of(a_pid);
    drop(live);
    for pid in [a_pid, child] {
        assert_eq!(dir_of(pid), home, "process {pid} back where it came from");
        assert_eq!(affinity(pid), wide);
    }
    let manager_dir = mounted(&a_cg);
    assert!(!manager_dir.parent().unwrap().exists(), "{} removed", manager_dir.parent().unwrap().display());
    let _ = a_proc.kill();
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(a_pid), nix::sys::signal::SIGKILL);
    let _ = a_proc.wait();
}

#[test]
#[cfg_attr(not(has_cpusets), ignore = "needs a writable cpuset cgroup (root, or a delegated v2 subtree)")]
fn a_dead_managers_cgroups_are_escaped_by_supervisors_and_removed_by_the_next_manager() {
    writable();
    let kids = Sleepers::spawn(1);
    let pid = kids.pids()[0];
    let home = cgroup_of(pid);
    let wide = affinity(pid);
    // A manager that dies outright: its tree stays as it was (no drop runs).
    let mut dead = Cpusets::open().unwrap();
    dead.apply(ProgramId(1), pid, &[pid], &CpuSet::parse("1").unwrap()).unwrap();
    let dead_dir: PathBuf = dead.dir().to_path_buf();
    std::mem::forget(dead);
    assert_eq!(affinity(pid), CpuSet::parse("1").unwrap());
    // Its supervisor releases the program: out of the dead manager's cgroup, widened back.
    enforce::release(Target::Group(pid), &wide, &[]);
    assert_eq!(cgroup_of(pid), home);
    assert_eq!(affinity(pid), wide);
    assert!(dead_dir.exists(), "a live process's manager directory is not stale");
    // A directory of a manager whose process is gone is removed by the next manager.
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let stale = dead_dir.with_file_name(format!("cpumgr-{gone_pid}-0"));
    std::fs::rename(&dead_dir, &stale).unwrap();
    let next = Cpusets::open().unwrap();
    assert!(!stale.exists(), "{} removed", stale.display());
    drop(next);
}

/// Where the cgroup path `cg` of a test process lies in the mounted tree.
fn mounted(cg: &str) -> PathBuf {
    let probe = Cpusets::open().unwrap();
    // The probe's own directory is `<own>/cpumgr-...`; the test's cgroups are below the same root.
    let own = probe.dir().parent().unwrap().to_path_buf();
    let own_cg = cgroup_of(0_i32.max(std::process::id() as i32));
    let rel = cg.strip_prefix(own_cg.trim_end_matches('/')).unwrap_or(cg);
    own.join(rel.trim_start_matches('/'))
}

/// Environment variables naming the socket [`manager_process`] serves and the cgroup it runs in.
const MANAGER_SOCKET: &str = "CPUMGR_TEST_MANAGER_SOCKET";
const MANAGER_CGROUP: &str = "CPUMGR_TEST_MANAGER_CGROUP";

/// Not a test: the manager process of [`ManagerProcess`], run as this test binary in a child process
/// (so that it can be SIGKILLed), moved into the cgroup named in [`MANAGER_CGROUP`] and serving
/// the socket named in [`MANAGER_SOCKET`] until killed.
#[test]
#[ignore = "not a test: the manager process the tests of a killed manager start"]
fn manager_process() {
    let (Some(socket), Some(cgroup)) = (std::env::var_os(MANAGER_SOCKET), std::env::var_os(MANAGER_CGROUP)) else {
        return;
    };
    std::fs::write(PathBuf::from(cgroup).join("cgroup.procs"), std::process::id().to_string()).unwrap();
    let settings =
        Settings { cpus: Some(CpuSet::parse("0-1").unwrap()), backend: Choice::Cpuset, ..Default::default() };
    let _manager = cpumgr_daemon::Manager::start(std::path::Path::new(&socket), &settings).unwrap();
    loop {
        std::thread::park();
    }
}

#[test]
#[cfg_attr(not(has_cpusets), ignore = "needs a writable cpuset cgroup (root, or a delegated v2 subtree)")]
fn a_killed_managers_watchdog_takes_programs_out_of_its_cgroups() {
    writable();
    let kids = Sleepers::spawn(2);
    let pids = kids.pids();
    let wide = affinity(pids[0]);
    // The manager runs in a cgroup of this test's (named as a live manager's, so no other
    // manager starting meanwhile takes it for a dead one's and cleans up in the watchdog's place).
    let probe = Cpusets::open().unwrap();
    let own = probe.dir().parent().unwrap().to_path_buf();
    drop(probe);
    let private = own.join(format!("cpumgr-{}-watchdog-test", std::process::id()));
    std::fs::create_dir(&private).unwrap();
    for f in ["cpuset.mems", "cpuset.cpus"] {
        std::fs::write(private.join(f), std::fs::read_to_string(own.join(f)).unwrap().trim()).unwrap();
    }
    let mut manager = ManagerProcess::start(&private);
    // Registered raw: no supervisor watches these programs, only the manager's watchdog.
    for &pid in &pids {
        manager.register(pid);
    }
    let tree = format!("/cpumgr-{}-", manager.child.id());
    support::wait_for("both confined to one CPU each", || {
        pids.iter().all(|&p| cgroup_of(p).contains(&tree) && affinity(p).len() == 1)
    });
    let dead_dir = std::fs::read_dir(&private)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&tree[1..]))
        .unwrap()
        .path();
    manager.kill();
    // The watchdog moves them up to the manager's own cgroup, and widens them.
    let own_cg = cgroup_of(std::process::id() as i32);
    let private_cg = format!("{}/{}", own_cg.trim_end_matches('/'), private.file_name().unwrap().to_string_lossy());
    support::wait_for("both out of the dead manager's cgroups and widened", || {
        pids.iter().all(|&p| cgroup_of(p) == private_cg && affinity(p) == wide)
    });
    assert!(dead_dir.exists(), "the watchdog did it: nobody removed the dead manager's tree yet");
    // The next manager in that cgroup would remove the tree; here the test does, and its cgroup.
    for &p in &pids {
        std::fs::write(own.join("cgroup.procs"), p.to_string()).unwrap();
    }
    for d in std::fs::read_dir(&dead_dir).unwrap().flatten().filter(|e| e.path().is_dir()) {
        std::fs::remove_dir(d.path()).unwrap();
    }
    std::fs::remove_dir(&dead_dir).unwrap();
    // The watchdog releases the programs, then exits: it may still be in the cgroup a moment.
    let empty = || std::fs::read_to_string(private.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty());
    support::wait_for("the watchdog gone", empty);
    std::fs::remove_dir(&private).unwrap();
}

/// A manager in a child process ([`manager_process`]), to be killed outright, and a connection.
struct ManagerProcess {
    child: std::process::Child,
    conn: cpumgr_proto::Conn,
    _dir: tempfile::TempDir,
}

impl ManagerProcess {
    /// Starts one in the cgroup at `cgroup` (a directory of the mounted hierarchy).
    fn start(cgroup: &std::path::Path) -> ManagerProcess {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cpumgr.sock");
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["manager_process", "--exact", "--ignored", "--nocapture"])
            .env(MANAGER_SOCKET, &socket)
            .env(MANAGER_CGROUP, cgroup)
            .spawn()
            .unwrap();
        let conn = loop {
            if let Ok(c) = cpumgr_proto::Conn::connect(&socket) {
                break c;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        ManagerProcess { child, conn, _dir: dir }
    }

    /// Registers process `pid` wanting one CPU, raw: no supervisor watches it, only the
    /// manager's watchdog.
    fn register(&self, pid: i32) {
        let reg = cpumgr_proto::Registration { pid: Some(pid), wanted: Some(1), max: Some(1), ..Default::default() };
        let (r, _) = self.conn.call(&cpumgr_proto::Request::Register(reg)).unwrap();
        assert!(matches!(r, cpumgr_proto::Reply::Registered { .. }), "{r:?}");
    }

    /// `kill -9`, and reaped.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A cpuset cgroup directory this test made, removed on drop (also when the test panics): its
/// processes, and those of the directories below it, moved up to `up` first.
struct CgroupGuard {
    dir: PathBuf,
    up: PathBuf,
}

impl CgroupGuard {
    /// Makes `<up>/<name>` with CPUs `cpus` and `up`'s memory nodes, as Slurm makes a step's.
    fn make(up: &std::path::Path, name: &str, cpus: &str) -> CgroupGuard {
        let g = CgroupGuard { dir: up.join(name), up: up.to_path_buf() };
        std::fs::create_dir(&g.dir).unwrap();
        let mems = ["cpuset.effective_mems", "cpuset.mems.effective", "cpuset.mems"]
            .iter()
            .find_map(|f| std::fs::read_to_string(up.join(f)).ok().filter(|m| !m.trim().is_empty()))
            .expect("the memory nodes of this test's cgroup");
        std::fs::write(g.dir.join("cpuset.mems"), mems.trim()).unwrap();
        std::fs::write(g.dir.join("cpuset.cpus"), cpus).unwrap();
        g
    }

    /// Moves process `pid` in.
    fn enter(&self, pid: i32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        fn remove(dir: &std::path::Path, up: &std::path::Path) {
            for d in std::fs::read_dir(dir).into_iter().flatten().flatten().filter(|e| e.path().is_dir()) {
                remove(&d.path(), up);
            }
            for _ in 0..500 {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines() {
                    let _ = std::fs::write(up.join("cgroup.procs"), pid);
                }
                match std::fs::remove_dir(dir) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(10))
                    }
                    _ => return,
                }
            }
        }
        remove(&self.dir, &self.up);
    }
}

/// This test process's own cpuset cgroup, as a directory of the mounted hierarchy.
fn own_cgroup_dir() -> PathBuf {
    let probe = Cpusets::open().unwrap();
    probe.dir().parent().unwrap().to_path_buf()
}

#[test]
#[cfg_attr(not(has_cpusets), ignore = "needs a writable cpuset cgroup (root, or a delegated v2 subtree)")]
fn a_program_in_a_cgroup_someone_else_made_stays_there_confined_by_affinity() {
    writable();
    // As Slurm makes a step's cgroup: beside the manager's tree, with CPUs 0-1 (the name starts
    // as a manager's does, which must not fool `escape` or a manager cleaning up).
    let own = own_cgroup_dir();
    let name = format!("cpumgr-test-foreign-{}", std::process::id());
    let foreign = CgroupGuard::make(&own, &name, "0-1");
    let own_cg = cgroup_of(std::process::id() as i32);
    let foreign_cg = format!("{}/{name}", own_cg.trim_end_matches('/'));
    let kids = Sleepers::spawn(2);
    let (f_pid, r_pid) = (kids.pids()[0], kids.pids()[1]);
    foreign.enter(f_pid);
    assert_eq!(cgroup_of(f_pid), foreign_cg);
    let (home, f_wide, r_wide) = (cgroup_of(r_pid), affinity(f_pid), affinity(r_pid));
    let as_they_were = |when: &str| {
        assert_eq!(cgroup_of(f_pid), foreign_cg, "{when}: the foreign program is where it was");
        assert_eq!(affinity(f_pid), f_wide, "{when}");
        assert_eq!(cgroup_of(r_pid), home, "{when}: the other program is back home");
        assert_eq!(affinity(r_pid), r_wide, "{when}");
    };

    // A manager on the cpuset backend: one CPU each; the foreign program pinned, never moved.
    let live = Live::start(&two_cpus_on_cpusets());
    let (f, _sf) = live.register(f_pid, 2);
    let (r, _sr) = live.register(r_pid, 1);
    let tree = format!("/cpumgr-{}-", std::process::id());
    let of = |s: &cpumgr_proto::msg::StatusReport, id: u64| s.programs.iter().find(|p| p.id == id).unwrap().clone();
    let s = live.wait_status("both confined to one CPU each", |s| {
        s.programs.iter().all(|p| p.count == 1 && p.confined_by.is_some())
            && affinity(f_pid) == of(s, f).cpus
            && affinity(r_pid) == of(s, r).cpus
            && cgroup_of(r_pid).ends_with(&format!("/prog-{r}"))
    });
    assert_eq!(of(&s, f).confined_by.as_deref(), Some("affinity"), "{s:?}");
    assert_eq!(of(&s, r).confined_by.as_deref(), Some("cpuset"), "{s:?}");
    assert_eq!(cgroup_of(f_pid), foreign_cg, "the foreign program never leaves its cgroup");
    assert!(cgroup_of(r_pid).contains(&tree), "{}", cgroup_of(r_pid));
    // Its allocation follows by affinity: alone, it gets both CPUs, still where it was.
    live.conn.call(&cpumgr_proto::Request::Unregister { id: r }).unwrap();
    live.wait_status("the foreign program alone on both CPUs", |s| {
        s.programs.len() == 1 && of(s, f).count == 2 && affinity(f_pid) == of(s, f).cpus
    });
    assert_eq!(cgroup_of(f_pid), foreign_cg);
    assert_eq!((cgroup_of(r_pid), affinity(r_pid)), (home.clone(), r_wide.clone()), "released home");
    drop(live);
    as_they_were("after the manager stopped");

    // A manager killed outright: its watchdog leaves both as they were.
    let mut manager = ManagerProcess::start(&own);
    let dead_tree = CgroupGuard { dir: own.join(format!("cpumgr-{}-0", manager.child.id())), up: own.clone() };
    manager.register(f_pid);
    manager.register(r_pid);
    let tree = format!("/cpumgr-{}-", manager.child.id());
    support::wait_for("one CPU each, the foreign program pinned and the other in the tree", || {
        affinity(f_pid).len() == 1 && affinity(r_pid).len() == 1 && cgroup_of(r_pid).contains(&tree)
    });
    assert_eq!(cgroup_of(f_pid), foreign_cg);
    manager.kill();
    let released = || {
        cgroup_of(f_pid) == foreign_cg
            && affinity(f_pid) == f_wide
            && cgroup_of(r_pid) == home
            && affinity(r_pid) == r_wide
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !released() {
        let now = [(cgroup_of(f_pid), affinity(f_pid)), (cgroup_of(r_pid), affinity(r_pid))];
        assert!(std::time::Instant::now() < deadline, "not released by the watchdog: {now:?}");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    as_they_were("after the manager was killed");
    drop(dead_tree);
    drop(kids);
    drop(foreign);
    assert!(!own.join(&name).exists(), "the test's cgroup is removed");
}
