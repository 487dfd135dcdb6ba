//! The live manager with real processes: busy programs under `cpumgr run` and `cpumgr daemon`,
//! checked through `/proc` (affinity masks, stopped states, CPU time). The tests share the
//! machine's CPUs, so they run one at a time (a lock), each with its own socket; they poll for
//! the expected state with generous deadlines instead of sleeping fixed times.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

const BUSY: &str = "while :; do :; done";

/// Processes started by a test, ended (whole process groups) when it finishes; `cpumgr run`
/// kills its program when it dies (PR_SET_PDEATHSIG), so nothing outlives a test.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn cpumgr(socket: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cpumgr"));
    c.env("CPUMGR_SOCKET", socket).env_remove("CPUMGR_POLICY");
    c
}

/// `cpumgr run` of a busy shell loop, in its own process group so the test can end it.
fn run_busy(socket: &Path, name: &str, extra: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    cpumgr(socket).args(["run", "--name", name]).args(extra).args(["--", "sh", "-c", BUSY]).process_group(0).stdout(Stdio::null()).spawn().unwrap()
}

fn status(socket: &Path) -> Option<Value> {
    let o = cpumgr(socket).args(["status", "--json"]).output().ok()?;
    o.status.success().then(|| serde_json::from_slice(&o.stdout).ok()).flatten()
}

/// Polls `check` until it returns `Some` or `secs` pass.
fn wait_for<T>(secs: u64, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn program_pids(socket: &Path, n: usize) -> Vec<i32> {
    wait_for(10, "programs to register", || {
        let s = status(socket)?;
        let pids: Vec<i32> = s["programs"].as_array()?.iter().map(|p| p["pid"].as_i64().unwrap_or(0) as i32).collect();
        (pids.len() == n).then_some(pids)
    })
}

fn allowed(pid: i32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or("").trim().to_string()
}

fn state(pid: i32) -> char {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    text.rfind(')').and_then(|i| text[i + 2..].chars().next()).unwrap_or('?')
}

fn all_cpus() -> String {
    allowed(std::process::id() as i32)
}

fn sock(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("m.sock")
}

#[test]
fn equipartition_pins_each_program_to_its_own_cpu_and_gang_alternates() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if all_cpus() != "0-1" {
        eprintln!("this test is written for the 2-CPU machine; CPUs here: {}", all_cpus());
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = sock(&dir);
    let mut procs = Procs(vec![run_busy(&socket, "a", &[])]);
    wait_for(10, "the embedded manager", || status(&socket));
    procs.0.push(run_busy(&socket, "b", &[]));
    let pids = program_pids(&socket, 2);
    let masks = wait_for(10, "one CPU each", || {
        let m: Vec<String> = pids.iter().map(|&p| allowed(p)).collect();
        (m.iter().all(|x| !x.contains(['-', ','])) && m[0] != m[1]).then_some(m)
    });
    assert_ne!(masks[0], masks[1], "disjoint CPUs: {masks:?}");

    // Switch to gang: the two programs take turns; each is seen stopped and each runs.
    let ok = cpumgr(&socket).args(["policy", "set", "gang"]).status().unwrap();
    assert!(ok.success());
    let mut seen_stopped = [false, false];
    let mut both_stopped = false;
    wait_for(10, "both programs to be stopped in turn", || {
        let s = [state(pids[0]), state(pids[1])];
        for k in 0..2 {
            seen_stopped[k] |= s[k] == 'T';
        }
        both_stopped |= s == ['T', 'T'];
        (seen_stopped == [true, true]).then_some(())
    });
    assert!(!both_stopped, "a gang always runs");
    let s = status(&socket).unwrap();
    assert_eq!(s["policy"], "gang");
}

#[test]
fn an_ended_program_gives_its_cpu_to_the_other() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = sock(&dir);
    let mut procs = Procs(vec![run_busy(&socket, "a", &[])]);
    wait_for(10, "the embedded manager", || status(&socket));
    let victim = run_busy(&socket, "b", &[]);
    let pids = program_pids(&socket, 2);
    wait_for(10, "one CPU each", || (!allowed(pids[0]).contains(['-', ','])).then_some(()));
    // SIGKILL the second program itself (not its `cpumgr run`): the manager notices it is gone.
    unsafe { libc::kill(pids[1], libc::SIGKILL) };
    procs.0.push(victim);
    let all = all_cpus();
    wait_for(5, "the survivor to get every CPU", || (allowed(pids[0]) == all).then_some(()));
    wait_for(5, "the dead program to leave the status", || (status(&socket)?["programs"].as_array()?.len() == 1).then_some(()));
}

#[test]
fn run_returns_the_programs_exit_status() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = sock(&dir);
    let code = cpumgr(&socket).args(["run", "--", "sh", "-c", "exit 7"]).status().unwrap();
    assert_eq!(code.code(), Some(7));
    let code = cpumgr(&socket).args(["run", "--", "sh", "-c", "kill -TERM $$"]).status().unwrap();
    assert_eq!(code.code(), Some(128 + libc::SIGTERM));
    let out = cpumgr(&socket).args(["run", "--", "/nonexistent/cmd"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!socket.exists(), "the embedded manager is gone with its last program");
}

#[test]
fn a_terminated_daemon_leaves_nothing_stopped_or_pinned() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = sock(&dir);
    let daemon = cpumgr(&socket).args(["daemon", "--policy", "gang", "--quantum", "50ms"]).stderr(Stdio::null()).spawn().unwrap();
    let daemon_pid = daemon.id() as i32;
    let mut procs = Procs(vec![daemon]);
    wait_for(10, "the daemon", || status(&socket));
    procs.0.push(run_busy(&socket, "a", &[]));
    procs.0.push(run_busy(&socket, "b", &[]));
    let pids = program_pids(&socket, 2);
    wait_for(10, "a program stopped by the gang scheduler", || pids.iter().any(|&p| state(p) == 'T').then_some(()));
    unsafe { libc::kill(daemon_pid, libc::SIGTERM) };
    let st = procs.0[0].wait().unwrap();
    assert!(st.success(), "the daemon exits cleanly on SIGTERM");
    let all = all_cpus();
    for &p in &pids {
        assert_ne!(state(p), 'T', "program {p} left stopped");
        assert_eq!(allowed(p), all, "program {p} left pinned");
    }
}

#[test]
fn bad_control_messages_get_errors_and_hurt_nobody() {
    use std::io::{BufRead, BufReader, Write};
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = sock(&dir);
    let mut procs = Procs(vec![cpumgr(&socket).args(["daemon"]).stderr(Stdio::null()).spawn().unwrap()]);
    wait_for(10, "the daemon", || status(&socket));
    // A client that connects and sends nothing does not block others.
    let _silent = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    for bad in ["garbage", "{\"v\":9,\"op\":\"status\"}", "{\"v\":1,\"op\":\"register\",\"pid\":1}", "{\"v\":1,\"op\":\"set_quantum\",\"ms\":0}", "{\"v\":1,\"op\":\"unregister\",\"id\":99}"] {
        s.write_all(format!("{bad}\n").as_bytes()).unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.contains("\"error\""), "{bad} → {line}");
    }
    s.write_all(&vec![b'x'; 70_000]).unwrap();
    s.write_all(b"\n").unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("bytes"), "oversized → {line}");
    // The manager still serves, and a program registers fine.
    procs.0.push(run_busy(&socket, "a", &[]));
    program_pids(&socket, 1);
}

#[test]
fn attach_manages_a_running_process_and_leaves_it_restored() {
    use std::os::unix::process::CommandExt;
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let socket = sock(&dir);
    let busy = Command::new("sh").args(["-c", BUSY]).process_group(0).spawn().unwrap();
    let pid = busy.id() as i32;
    let mut procs = Procs(vec![busy]);
    let before = allowed(pid);
    // A manager of CPU 0 only: the attached process is pinned there.
    let attach = cpumgr(&socket).args(["attach", &pid.to_string(), "--cpus", "0", "--name", "busy"]).process_group(0).spawn().unwrap();
    let attach_pid = attach.id() as i32;
    procs.0.push(attach);
    wait_for(10, "the attached process pinned to CPU 0", || (allowed(pid) == "0").then_some(()));
    let s = status(&socket).unwrap();
    assert_eq!(s["programs"][0]["name"], "busy");
    // Ending the attachment restores the process, which keeps running.
    unsafe { libc::kill(attach_pid, libc::SIGTERM) };
    let st = procs.0[1].wait().unwrap();
    assert!(st.success());
    assert_eq!(allowed(pid), before, "affinity restored");
    assert!(matches!(state(pid), 'R' | 'S'), "still running");
}
