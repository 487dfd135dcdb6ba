//! What the real-process tests share: a manager on a private socket, `cpumgr` commands aimed at
//! it, polling waits with a generous deadline, and `/proc` readers. Every wait polls for the
//! expected state, so a noisy machine slows the tests down but does not fail them.
#![allow(dead_code)] // each test file uses its own part of these helpers

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cpumgr_core::CpuSet;
use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::{Conn, Reply, Request};

pub const BIN: &str = env!("CARGO_BIN_EXE_cpumgr");
pub const BUSY: &str = "while :; do :; done";
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The CPUs this test may run on: what a released program's affinity goes back to (its
/// affinity at registration, inherited from here). Every online CPU, unless the test runs in a
/// cpuset or under `taskset`.
pub fn inherited() -> CpuSet {
    allowed(std::process::id() as i32).expect("the test's own affinity")
}

/// A manager (`cpumgr daemon`) on a private socket, stopped with SIGTERM when dropped.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
    pub runs: Vec<Child>,
}

impl Daemon {
    pub fn start(policy: &str) -> Daemon {
        Daemon::start_with(policy, &[])
    }

    /// A manager with `extra` daemon flags after the usual ones (CPUs 0-1 unless they name
    /// `--cpus`, a 50 ms quantum unless they name `--quantum`).
    pub fn start_with(policy: &str, extra: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cpumgr.sock");
        let child = Command::new(BIN)
            .args(["daemon", "--policy", policy])
            .args(if extra.contains(&"--quantum") { &[][..] } else { &["--quantum", "50ms"][..] })
            .args(if extra.contains(&"--cpus") { &[][..] } else { &["--cpus", "0-1"][..] })
            .args(extra)
            .env("CPUMGR_SOCKET", &socket)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon { child, socket, _dir: dir, runs: Vec::new() };
        wait_for("the manager to answer", || Conn::connect(&d.socket).is_ok());
        d
    }

    pub fn cpumgr(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).env("CPUMGR_SOCKET", &self.socket).stderr(Stdio::null());
        c
    }

    /// Starts `cpumgr run --name NAME -- sh -c SCRIPT` and returns the program's pid.
    pub fn run(&mut self, name: &str, script: &str) -> i32 {
        let child = self.cpumgr(&["run", "--name", name, "--", "sh", "-c", script]).spawn().unwrap();
        self.runs.push(child);
        let mut pid = 0;
        wait_for(&format!("{name} to register"), || {
            pid = self.status().programs.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
            pid != 0
        });
        pid
    }

    pub fn status(&self) -> StatusReport {
        match Conn::connect(&self.socket).unwrap().call(&Request::Status).unwrap().0 {
            Reply::Status(s) => s,
            r => panic!("{r:?}"),
        }
    }

    pub fn call(&self, req: Request) -> Reply {
        Conn::connect(&self.socket).unwrap().call(&req).unwrap().0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop(&mut self.child);
        for r in &mut self.runs {
            stop(r);
        }
    }
}

/// Stops `child` with SIGTERM and reaps it. A child already reaped (a test waited for it) is
/// not signalled: its pid may belong to another process by now.
fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGTERM);
    }
    let _ = child.wait();
}

/// Runs `cpumgr daemon ARGS` on a private socket, expects it to refuse them with exit code 2
/// before serving, and returns what it printed on stderr.
pub fn daemon_refuses(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("daemon")
        .args(args)
        .env("CPUMGR_SOCKET", dir.path().join("s.sock"))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "cpumgr daemon {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of `text` that are whole: a log read while its program still writes may end in
/// half a line.
pub fn whole_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n').filter_map(|l| l.strip_suffix('\n'))
}

pub fn wait_for(what: &str, ok: impl FnMut() -> bool) {
    wait_for_or(what, ok, String::new);
}

/// As [`wait_for`], and a timeout's message ends with what `explain` says then (a log's lines).
pub fn wait_for_or(what: &str, mut ok: impl FnMut() -> bool, explain: impl FnOnce() -> String) {
    let end = Instant::now() + DEADLINE;
    while !ok() {
        if Instant::now() >= end {
            panic!("timed out waiting for {what}\n{}", explain());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn status_field(pid: i32, field: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| l.strip_prefix(field)).map(|v| v.trim_start_matches(':').trim().to_string())
}

pub fn allowed(pid: i32) -> Option<CpuSet> {
    CpuSet::parse(&status_field(pid, "Cpus_allowed_list")?).ok()
}

pub fn stopped(pid: i32) -> bool {
    status_field(pid, "State").is_some_and(|s| s.starts_with('T'))
}

pub fn gone(pid: i32) -> bool {
    match status_field(pid, "State") {
        Some(s) => s.starts_with('Z'),
        None => true,
    }
}

/// The kernels built once per compiler for this test binary.
pub fn kernels(cc: &str) -> PathBuf {
    static DIRS: OnceLock<std::sync::Mutex<Vec<(String, tempfile::TempDir)>>> = OnceLock::new();
    let dirs = DIRS.get_or_init(Default::default);
    // A test whose compiler failed panicked with the lock held: the others still build theirs.
    let mut dirs = dirs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, d)) = dirs.iter().find(|(c, _)| c == cc) {
        return d.path().to_path_buf();
    }
    let d = tempfile::tempdir().unwrap();
    cpumgr_kernels::build(d.path(), cc).unwrap_or_else(|e| panic!("building the kernels with {cc}: {e}"));
    let p = d.path().to_path_buf();
    dirs.push((cc.to_string(), d));
    p
}

/// Fails unless the OpenMP adapter was built beside the `cpumgr` binary.
pub fn adapter_is_built() {
    let lib = Path::new(BIN).with_file_name("libcpumgr_omp.so");
    assert!(lib.is_file(), "{} is missing: run `cargo build --workspace` before the tests", lib.display());
}

/// `Cpus_allowed_list` of every thread of `pid`.
pub fn thread_cpus(pid: i32) -> Vec<cpumgr_core::CpuSet> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|v| cpumgr_core::CpuSet::parse(v.trim()).ok())
        })
        .collect()
}
