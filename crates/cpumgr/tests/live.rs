//! The live manager on real processes: busy-loop programs started by the tests, a manager on a
//! private socket per test, and the outcome read back from `/proc` (affinity, state) and from
//! `cpumgr status`. Every wait polls for the expected state with a generous deadline, so a noisy
//! machine slows the tests down but does not fail them.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cpumgr_core::CpuSet;
use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::{Conn, Reply, Request};

const BIN: &str = env!("CARGO_BIN_EXE_cpumgr");
const BUSY: &str = "while :; do :; done";
const DEADLINE: Duration = Duration::from_secs(20);

fn online() -> CpuSet {
    CpuSet::parse(std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap().trim()).unwrap()
}

/// A manager (`cpumgr daemon`) on a private socket, stopped with SIGTERM when dropped.
struct Daemon {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
    runs: Vec<Child>,
}

impl Daemon {
    fn start(policy: &str) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cpumgr.sock");
        let child = Command::new(BIN)
            .args(["daemon", "--policy", policy, "--quantum", "50ms", "--cpus", "0-1"])
            .env("CPUMGR_SOCKET", &socket)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon { child, socket, _dir: dir, runs: Vec::new() };
        wait_for("the manager to answer", || Conn::connect(&d.socket).is_ok());
        d
    }

    fn cpumgr(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).env("CPUMGR_SOCKET", &self.socket).stderr(Stdio::null());
        c
    }

    /// Starts `cpumgr run --name NAME -- sh -c SCRIPT` and returns the program's pid.
    fn run(&mut self, name: &str, script: &str) -> i32 {
        let child = self.cpumgr(&["run", "--name", name, "--", "sh", "-c", script]).spawn().unwrap();
        self.runs.push(child);
        let mut pid = 0;
        wait_for(&format!("{name} to register"), || {
            pid = self.status().programs.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
            pid != 0
        });
        pid
    }

    fn status(&self) -> StatusReport {
        match Conn::connect(&self.socket).unwrap().call(&Request::Status).unwrap().0 {
            Reply::Status(s) => s,
            r => panic!("{r:?}"),
        }
    }

    fn call(&self, req: Request) -> Reply {
        Conn::connect(&self.socket).unwrap().call(&req).unwrap().0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::SIGTERM);
        let _ = self.child.wait();
        for r in &mut self.runs {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.id() as i32), nix::sys::signal::SIGTERM);
            let _ = r.wait();
        }
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn status_field(pid: i32, field: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| l.strip_prefix(field)).map(|v| v.trim_start_matches(':').trim().to_string())
}

fn allowed(pid: i32) -> Option<CpuSet> {
    CpuSet::parse(&status_field(pid, "Cpus_allowed_list")?).ok()
}

fn stopped(pid: i32) -> bool {
    status_field(pid, "State").is_some_and(|s| s.starts_with('T'))
}

fn gone(pid: i32) -> bool {
    match status_field(pid, "State") {
        Some(s) => s.starts_with('Z'),
        None => true,
    }
}

#[test]
fn equipartition_gives_two_programs_one_cpu_each() {
    let mut d = Daemon::start("equipartition");
    let a = d.run("a", BUSY);
    let b = d.run("b", BUSY);
    wait_for("one CPU each", || match (allowed(a), allowed(b)) {
        (Some(x), Some(y)) => x.len() == 1 && y.len() == 1 && x.is_disjoint(&y),
        _ => false,
    });
    let s = d.status();
    assert_eq!(s.programs.len(), 2);
    assert!(s.programs.iter().all(|p| p.count == 1 && p.state == "running"), "{s:?}");
}

#[test]
fn gang_makes_two_programs_alternate() {
    let mut d = Daemon::start("equipartition");
    let a = d.run("a", BUSY);
    let b = d.run("b", BUSY);
    assert!(d.cpumgr(&["policy", "set", "gang"]).status().unwrap().success());
    // Each is seen stopped while the other runs, more than once: they take turns.
    let (mut a_turns, mut b_turns, mut last) = (0, 0, None);
    wait_for("alternation", || {
        let now = match (stopped(a), stopped(b)) {
            (true, false) => Some('b'),
            (false, true) => Some('a'),
            _ => None,
        };
        if now.is_some() && now != last {
            if now == Some('a') { a_turns += 1 } else { b_turns += 1 }
            last = now;
        }
        a_turns >= 3 && b_turns >= 3
    });
    assert_eq!(d.status().policy, "gang");
}

#[test]
fn an_exiting_program_gives_its_cpu_to_the_other() {
    let mut d = Daemon::start("equipartition");
    let a = d.run("a", BUSY);
    let b = d.run("b", &format!("trap 'exit 0' USR1; {BUSY}"));
    wait_for("one CPU each", || allowed(a).is_some_and(|s| s.len() == 1) && allowed(b).is_some_and(|s| s.len() == 1));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(b), nix::sys::signal::SIGUSR1).unwrap();
    wait_for("a to get both CPUs", || allowed(a) == Some(CpuSet::parse("0-1").unwrap()));
    wait_for("b to be forgotten", || d.status().programs.len() == 1);
}

#[test]
fn a_sigkilled_program_is_reclaimed() {
    let mut d = Daemon::start("equipartition");
    let a = d.run("a", BUSY);
    let b = d.run("b", BUSY);
    wait_for("one CPU each", || allowed(a).is_some_and(|s| s.len() == 1) && allowed(b).is_some_and(|s| s.len() == 1));
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(b), nix::sys::signal::SIGKILL).unwrap();
    wait_for("a to get both CPUs", || allowed(a) == Some(CpuSet::parse("0-1").unwrap()));
    let s = d.status();
    assert_eq!(s.programs.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![a]);
    assert_eq!(s.programs[0].count, 2);
}

#[test]
fn after_sigterm_of_the_manager_nothing_is_left_stopped_or_pinned() {
    let mut d = Daemon::start("gang");
    let a = d.run("a", BUSY);
    let b = d.run("b", BUSY);
    wait_for("one of them stopped", || stopped(a) || stopped(b));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.child.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    assert!(d.child.wait().unwrap().success());
    let all = online();
    wait_for("both released", || !stopped(a) && !stopped(b) && allowed(a) == Some(all.clone()) && allowed(b) == Some(all.clone()));
}

#[test]
fn a_squeezed_team_runs_as_a_gang_not_on_fewer_cpus() {
    // Two programs of two busy processes each; equipartition would give each one CPU, where its
    // two processes would share it. The team guard runs each whole, in turns, instead.
    let mut d = Daemon::start("equipartition");
    let team = format!("({BUSY}) & {BUSY}");
    let a = d.run("a", &team);
    let b = d.run("b", &team);
    wait_for("turns of whole teams", || {
        let s = d.status();
        s.programs.len() == 2
            && s.programs.iter().all(|p| p.threads == Some(2))
            && s.programs.iter().any(|p| p.state == "stopped")
            && s.programs.iter().any(|p| p.state == "running" && p.count == 2)
    });
    for p in d.status().programs {
        assert!(p.count == 0 || p.count == 2, "a team of 2 confined to {} CPU: {p:?}", p.count);
    }
    let _ = (a, b);
}

#[test]
fn run_returns_the_programs_exit_status_with_an_embedded_manager() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let run = |script: &str| {
        Command::new(BIN)
            .args(["run", "--", "sh", "-c", script])
            .env("CPUMGR_SOCKET", &socket)
            .stderr(Stdio::null())
            .status()
            .unwrap()
    };
    assert_eq!(run("exit 7").code(), Some(7));
    assert_eq!(run("exit 0").code(), Some(0));
    assert_eq!(run("kill -9 $$").code(), Some(128 + 9));
    assert!(!Path::new(&socket).exists(), "the embedded manager removed its socket");
}

#[test]
fn bad_messages_get_errors_and_the_manager_keeps_serving() {
    let mut d = Daemon::start("equipartition");
    let idle = Conn::connect(&d.socket).unwrap(); // connects and never speaks
    let c = Conn::connect(&d.socket).unwrap();
    for bad in [&b"not json"[..], b"{\"v\":1,\"op\":\"format-disk\"}", b"{\"v\":99,\"op\":\"status\"}", &vec![b'{'; 70_000]] {
        c.send(bad, &[]).unwrap();
        let r: Reply = cpumgr_proto::msg::decode(&c.recv().unwrap().bytes).unwrap();
        assert!(matches!(r, Reply::Error { .. }), "{r:?}");
    }
    assert!(matches!(d.call(Request::Unregister { id: 999 }), Reply::Error { .. }));
    assert!(matches!(d.call(Request::SetQuantum { ms: f64::NAN }), Reply::Error { .. }));
    assert!(matches!(d.call(Request::SetPolicy { spec: "nonesuch".into() }), Reply::Error { .. }));
    // A program that writes absurd values into its slot is clamped; the others are unaffected.
    let a = d.run("a", "sleep 60");
    let b = d.run("b", BUSY);
    let id = d.status().programs.iter().find(|p| p.pid == a).unwrap().id;
    let (r, fds) = Conn::connect(&d.socket).unwrap().call(&Request::OpenSlot { id: Some(id) }).unwrap();
    assert!(matches!(r, Reply::Slot { .. }), "{r:?}");
    let seg = cpumgr_proto::Segment::open(fds.into_iter().next().unwrap()).unwrap();
    seg.slot().set_request(1_000_000_000, 7, 1_000_000_000);
    seg.slot().report_speedup(2, f64::NAN);
    wait_for("the clamp", || d.status().programs.iter().any(|p| p.pid == a && p.request == 2));
    wait_for("b to keep a CPU", || allowed(b).is_some_and(|s| !s.is_empty()) && !stopped(b));
    drop(idle);
}

#[test]
fn a_dead_manager_is_replaced_by_the_run_supervisor_releasing_its_program() {
    let mut d = Daemon::start("gang");
    let a = d.run("a", BUSY);
    let b = d.run("b", BUSY);
    wait_for("one of them stopped", || stopped(a) || stopped(b));
    d.child.kill().unwrap(); // SIGKILL: the manager cleans nothing up itself
    d.child.wait().unwrap();
    let all = online();
    wait_for("both released by their supervisors", || {
        !stopped(a) && !stopped(b) && allowed(a) == Some(all.clone()) && allowed(b) == Some(all.clone())
    });
    for r in &mut d.runs {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.id() as i32), nix::sys::signal::SIGTERM);
        let st = r.wait().unwrap();
        assert!(st.code() == Some(128 + 15) || st.signal().is_some(), "{st:?}");
    }
    d.runs.clear();
    wait_for("the programs to end", || gone(a) && gone(b));
}
