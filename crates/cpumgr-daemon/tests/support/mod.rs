//! What the daemon's tests and benchmarks share: real child processes to register, and a
//! manager on a private socket.
#![allow(dead_code)] // each test or bench binary uses part of it

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cpumgr_daemon::{Manager, Settings, State};
use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::{Conn, Doorbell, PeerCred, Registration, Reply, Request, Segment};

/// Sleeping child processes, each leading its own process group; killed and reaped on drop.
pub struct Sleepers(pub Vec<Child>);

impl Sleepers {
    /// `n` children running `sleep 600`.
    pub fn spawn(n: usize) -> Sleepers {
        use std::os::unix::process::CommandExt;
        Sleepers(
            (0..n)
                .map(|_| {
                    Command::new("sleep").arg("600").process_group(0).stdin(Stdio::null()).spawn().expect("spawn sleep")
                })
                .collect(),
        )
    }

    /// Their pids.
    pub fn pids(&self) -> Vec<i32> {
        self.0.iter().map(|c| c.id() as i32).collect()
    }
}

/// The backend for a manager of `node`, a modelled machine when `Some`: a cgroup cannot be given
/// CPUs the host lacks (each step would retry the write), while an affinity call fails for them
/// as cheaply as it succeeds on a real node.
pub fn backend_for(node: Option<&cpumgr_core::Topology>) -> cpumgr_daemon::enforce::Choice {
    use cpumgr_daemon::enforce::Choice;
    if node.is_some() {
        Choice::Affinity
    } else {
        Choice::Auto
    }
}

/// Registers every sleeper with `state` directly, as this process (no socket): a manager's state
/// stepped by the caller.
pub fn register_all(state: &mut State, kids: &Sleepers) {
    let peer = PeerCred {
        pid: std::process::id() as i32,
        uid: nix::unistd::geteuid().as_raw(),
        gid: nix::unistd::getegid().as_raw(),
    };
    for pid in kids.pids() {
        let reg = Registration { pid: Some(pid), name: format!("s{pid}"), ..Default::default() };
        let (r, _) = state.handle(&peer, Request::Register(reg));
        assert!(matches!(r, Reply::Registered { .. }), "{r:?}");
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::SIGKILL);
            let _ = c.wait();
        }
    }
}

/// A manager on a socket in a private directory, and a connection to it.
pub struct Live {
    /// The manager.
    pub manager: Option<Manager>,
    /// A control connection.
    pub conn: Conn,
    _dir: tempfile::TempDir,
}

impl Live {
    /// Starts a manager with `settings`.
    pub fn start(settings: &Settings) -> Live {
        let dir = tempfile::tempdir().unwrap();
        let socket: PathBuf = dir.path().join("cpumgr.sock");
        let manager = Manager::start(&socket, settings).expect("manager starts");
        let conn = Conn::connect(&socket).unwrap();
        conn.set_timeout(Some(Duration::from_secs(5))).unwrap();
        Live { manager: Some(manager), conn, _dir: dir }
    }

    /// Registers process `pid` asking for `now` CPUs (at most `now`); its id and slot.
    pub fn register(&self, pid: i32, wanted: u32) -> (u64, Segment) {
        let reg = Registration {
            pid: Some(pid),
            name: format!("p{pid}"),
            wanted: Some(wanted),
            max: Some(wanted),
            ..Default::default()
        };
        match self.conn.call(&Request::Register(reg)).unwrap() {
            (Reply::Registered { id }, fds) => (id, Segment::open(fds.into_iter().next().unwrap()).unwrap()),
            (other, _) => panic!("registration refused: {other:?}"),
        }
    }

    /// Program `id`'s doorbell.
    pub fn doorbell(&self, id: u64) -> Doorbell {
        match self.conn.call(&Request::OpenDoorbell { id: Some(id) }).unwrap() {
            (Reply::Doorbell { id: got }, fds) if got == id => Doorbell::from_fd(fds.into_iter().next().unwrap()),
            (other, _) => panic!("no doorbell: {other:?}"),
        }
    }

    /// The manager's status.
    pub fn status(&self) -> StatusReport {
        match self.conn.call(&Request::Status).unwrap() {
            (Reply::Status(s), _) => s,
            (other, _) => panic!("status: {other:?}"),
        }
    }

    /// Waits (up to 20 s, a bound for a stuck manager, not a timing) until `cond` holds on the
    /// status.
    pub fn wait_status(&self, what: &str, cond: impl Fn(&StatusReport) -> bool) -> StatusReport {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.status();
            if cond(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}: {s:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The state of program `id` in `s` ("running", "waiting", "stopped"), and its CPU count.
pub fn state_of(s: &StatusReport, id: u64) -> (String, u32) {
    let p = s.programs.iter().find(|p| p.id == id).expect("program listed");
    (p.state.clone(), p.count)
}

/// Waits (up to 20 s, a bound for something stuck, not a timing) until `cond` holds.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
