//! The cpuset backend on real processes: each program's processes in a cgroup of the manager's
//! whose `cpuset.cpus` is its allocation, children born inside, and nothing left in a cgroup the
//! manager created after a program leaves, after the manager stops, or after it dies outright.
//! Ignored where the build found no writable cpuset hierarchy; skipped, saying why, where the
//! tree then cannot be written after all (permission bits and delegation can mislead the probe).

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use cpumgr_core::{CpuSet, ProgramId};
use cpumgr_daemon::cpuset::Cpusets;
use cpumgr_daemon::enforce::{self, Choice};
use cpumgr_daemon::procfs::{self, Target};
use cpumgr_daemon::Settings;
use support::{Live, Sleepers};

/// Whether the tree can be written here; says why not on stderr, past the harness's capture.
fn writable(test: &str) -> bool {
    match Cpusets::open() {
        Ok(_) => true,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "skipped: {test}: needs a writable cpuset tree ({e})");
            false
        }
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

fn affinity(pid: i32) -> CpuSet {
    enforce::affinity(pid).unwrap()
}

#[test]
#[cfg_attr(not(has_cpusets), ignore = "needs a writable cpuset cgroup (root, or a delegated v2 subtree)")]
fn programs_live_in_cgroups_of_their_cpus_and_leave_nothing_behind() {
    if !writable("programs_live_in_cgroups_of_their_cpus_and_leave_nothing_behind") {
        return;
    }
    // A: a shell that forks a child once confined; B: a sleeper.
    let kids = Sleepers::spawn(1);
    let mut a_cmd = Command::new("sh");
    std::os::unix::process::CommandExt::process_group(&mut a_cmd, 0);
    let mut a_proc =
        a_cmd.args(["-c", "read x; sleep 600 & wait"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
    let (a_pid, b_pid) = (a_proc.id() as i32, kids.pids()[0]);
    let home = cgroup_of(b_pid);
    let wide = affinity(b_pid);
    let settings = Settings {
        policy: "equipartition".into(),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        backend: Choice::Cpuset,
        ..Default::default()
    };
    let live = Live::start(&settings);
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
    if !writable("a_dead_managers_cgroups_are_escaped_by_supervisors_and_removed_by_the_next_manager") {
        return;
    }
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

/// Not a test: the manager process of the next test, run as this test binary in a child process
/// (so that it can be SIGKILLed), moved into the cgroup named in [`MANAGER_CGROUP`] and serving
/// the socket named in [`MANAGER_SOCKET`] until killed.
#[test]
#[ignore = "not a test: the manager process a_killed_managers_watchdog_takes_programs_out_of_its_cgroups starts"]
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
    if !writable("a_killed_managers_watchdog_takes_programs_out_of_its_cgroups") {
        return;
    }
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
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("cpumgr.sock");
    let mut manager = Command::new(std::env::current_exe().unwrap())
        .args(["manager_process", "--exact", "--ignored", "--nocapture"])
        .env(MANAGER_SOCKET, &socket)
        .env(MANAGER_CGROUP, &private)
        .spawn()
        .unwrap();
    let conn = loop {
        if let Ok(c) = cpumgr_proto::Conn::connect(&socket) {
            break c;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    // Registered raw: no supervisor watches these programs, only the manager's watchdog.
    for &pid in &pids {
        let reg = cpumgr_proto::Registration { pid: Some(pid), wanted: Some(1), max: Some(1), ..Default::default() };
        let (r, _) = conn.call(&cpumgr_proto::Request::Register(reg)).unwrap();
        assert!(matches!(r, cpumgr_proto::Reply::Registered { .. }), "{r:?}");
    }
    let tree = format!("/cpumgr-{}-", manager.id());
    support::wait_for("both confined to one CPU each", || {
        pids.iter().all(|&p| cgroup_of(p).contains(&tree) && affinity(p).len() == 1)
    });
    let dead_dir = std::fs::read_dir(&private)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&tree[1..]))
        .unwrap()
        .path();
    manager.kill().unwrap();
    manager.wait().unwrap();
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
