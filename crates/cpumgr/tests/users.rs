//! Several users on one manager, and hostile programs: a manager run as root, two Unix users
//! created by the tests (`useradd`, removed after), each running real programs through
//! `cpumgr run`; what one user tries against the other's programs runs in a process of that user
//! (this test binary re-run as [`as_user`]). Tests that need root print why and pass without it.

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::{Conn, Registration, Reply, Request, Segment};

/// The variable that turns [`as_user`] into a helper: `SOCKET;OP;OP...`.
const OPS_VAR: &str = "CPUMGR_USERS_TEST_OPS";

/// A Unix user created for one test and removed with it.
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

impl User {
    /// Creates user `cpumgr-t<pid>-<tag>` (the tests that call this need root).
    fn create(tag: &str) -> User {
        let name = format!("cpumgr-t{}-{tag}", std::process::id());
        // Tests run in parallel and useradd locks /etc/passwd: retry while it is busy.
        let mut last = String::new();
        for _ in 0..50 {
            let out = Command::new("useradd")
                .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", &name])
                .output()
                .expect("useradd starts");
            if out.status.success() {
                let id = |flag: &str| -> u32 {
                    let out = Command::new("id").args([flag, &name]).output().expect("id starts");
                    String::from_utf8_lossy(&out.stdout)
                        .trim()
                        .parse()
                        .unwrap_or_else(|e| panic!("id {flag} {name}: {e}"))
                };
                return User { uid: id("-u"), gid: id("-g"), name };
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("useradd {name} kept failing: {last}");
    }

    /// `cpumgr ARGS` as this user, aimed at `socket`.
    fn cpumgr(&self, socket: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).env("CPUMGR_SOCKET", socket).env("HOME", "/").stderr(Stdio::null()).uid(self.uid).gid(self.gid);
        c
    }

    /// Runs `ops` against the manager on `socket` from a process of this user; one result line
    /// per op: `ok ...` or `error ...`.
    fn try_ops(&self, socket: &Path, ops: &[String]) -> Vec<String> {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "as_user", "--ignored", "--nocapture", "--test-threads", "1"])
            .env(OPS_VAR, format!("{};{}", socket.display(), ops.join(";")))
            .uid(self.uid)
            .gid(self.gid)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let results: Vec<String> =
            text.lines().filter_map(|l| l.split_once("RESULT ")).map(|(_, r)| r.to_string()).collect();
        assert_eq!(results.len(), ops.len(), "helper output: {text}");
        results
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // Nothing of the user may be left running, or userdel refuses.
        let _ = Command::new("pkill").args(["-KILL", "-U", &self.uid.to_string()]).status();
        for _ in 0..50 {
            if Command::new("userdel").arg(&self.name).stderr(Stdio::null()).status().is_ok_and(|s| s.success()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("userdel {} failed", self.name);
    }
}

/// Not a test of its own: the process of another user the tests run (this binary, under that
/// user's uid) to try things against the manager. Without [`OPS_VAR`] it returns at once.
#[test]
#[ignore = "not a test: the other user's process the tests start with --ignored --exact as_user"]
fn as_user() {
    let Ok(spec) = std::env::var(OPS_VAR) else { return };
    let mut parts = spec.split(';');
    let socket = PathBuf::from(parts.next().unwrap());
    for op in parts {
        let r = match op.split_once(':') {
            None => call(&socket, Request::Status),
            Some(("unregister", id)) => call(&socket, Request::Unregister { id: id.parse().unwrap() }),
            Some(("set-request", id)) => {
                call(&socket, Request::SetRequest { id: id.parse().unwrap(), wanted: 1, min: None, max: None })
            }
            Some(("open-slot", id)) => call(&socket, Request::OpenSlot { id: Some(id.parse().unwrap()) }),
            Some(("register", pid)) => {
                call(&socket, Request::Register(Registration { pid: Some(pid.parse().unwrap()), ..Default::default() }))
            }
            // Open a path read-write and map it, as one would a slot.
            Some(("open", path)) => match std::fs::OpenOptions::new().read(true).write(true).open(path) {
                Ok(f) => match Segment::open(f.into()) {
                    Ok(_) => "ok mapped".to_string(),
                    Err(e) => format!("ok opened, not mapped: {e}"),
                },
                Err(e) => format!("error {e}"),
            },
            Some((other, _)) => panic!("unknown op {other}"),
        };
        println!("RESULT {r}");
    }
}

/// One request on a fresh connection; the reply in one line (`ok ...` or `error ...`).
fn call(socket: &Path, req: Request) -> String {
    match Conn::connect(socket).and_then(|c| c.call(&req).map_err(std::io::Error::other)) {
        Ok((Reply::Error { message }, _)) => format!("error {message}"),
        Ok((Reply::Status(s), _)) => format!("ok {}", serde_json::to_string(&s).unwrap()),
        Ok((r, fds)) => format!("ok {r:?} with {} descriptors", fds.len()),
        Err(e) => format!("error {e}"),
    }
}

/// A manager run by root for every user: its socket in a directory anyone may enter, its
/// settings from a config file (a quantum of 50 ms unless it names one); stopped (SIGTERM) with
/// every program when dropped.
struct Shared {
    dir: tempfile::TempDir,
    socket: PathBuf,
    manager: Child,
    runs: Vec<Child>,
}

impl Shared {
    fn start(config: &str) -> Shared {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("cpumgr.sock");
        let file = dir.path().join("cpumgr.toml");
        std::fs::write(&file, config).unwrap();
        let quantum: &[&str] = if config.contains("quantum") { &[] } else { &["--quantum", "50ms"] };
        let manager = Command::new(BIN)
            .args(["daemon", "--config", file.to_str().unwrap(), "--cpus", "0-1"])
            .args(quantum)
            .env("CPUMGR_SOCKET", &socket)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = Shared { dir, socket, manager, runs: Vec::new() };
        wait_for("the manager to answer", || Conn::connect(&s.socket).is_ok());
        s
    }

    /// Starts `cpumgr run --name NAME -- sh -c SCRIPT` as `user` (root when `None`); the program's pid.
    fn run(&mut self, user: Option<&User>, name: &str, script: &str) -> i32 {
        let args = ["run", "--name", name, "--", "sh", "-c", script];
        let mut cmd = match user {
            Some(u) => u.cpumgr(&self.socket, &args),
            None => {
                let mut c = Command::new(BIN);
                c.args(args).env("CPUMGR_SOCKET", &self.socket).stderr(Stdio::null());
                c
            }
        };
        self.runs.push(cmd.spawn().unwrap());
        let mut pid = 0;
        wait_for(&format!("{name} to register"), || {
            pid = self.status().programs.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
            pid != 0
        });
        pid
    }

    /// `status` as root: every program.
    fn status(&self) -> StatusReport {
        match Conn::connect(&self.socket).unwrap().call(&Request::Status).unwrap().0 {
            Reply::Status(s) => s,
            r => panic!("{r:?}"),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.manager.id() as i32), nix::sys::signal::SIGTERM);
        let _ = self.manager.wait();
        for r in &mut self.runs {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.id() as i32), nix::sys::signal::SIGTERM);
            let _ = r.wait();
        }
        let _ = &self.dir;
    }
}

/// The slot descriptors `pid` holds: `/proc/PID/fd/N` paths whose link names the slot memfd.
fn slot_fds(pid: i32) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    dir.flatten()
        .map(|e| e.path())
        .filter(|p| std::fs::read_link(p).is_ok_and(|l| l.to_string_lossy().contains("cpumgr-slot")))
        .collect()
}

#[test]
#[cfg_attr(not(is_root), ignore = "needs root: creates Unix users")]
fn a_user_can_neither_see_nor_open_nor_change_another_users_programs() {
    let (a, b) = (User::create("a"), User::create("b"));
    let mut m = Shared::start("policy = \"equipartition\"\n");
    let pid = m.run(Some(&a), "secret-job-of-a", BUSY);
    let supervisor = m.runs[0].id() as i32;
    let seen = m.status();
    let mine = seen.programs.iter().find(|p| p.pid == pid).unwrap().clone();
    let id = mine.id;
    wait_for("A's program to be allocated", || m.status().programs.iter().any(|p| p.pid == pid && p.count == 2));

    // The segment: held by the manager and by A's supervisor (once it has read the reply that
    // carries it), openable through neither by B.
    wait_for("A's supervisor to hold the slot", || !slot_fds(supervisor).is_empty());
    let paths: Vec<PathBuf> = slot_fds(m.manager.id() as i32).into_iter().chain(slot_fds(supervisor)).collect();
    assert!(paths.len() >= 2, "the manager's and the supervisor's slot descriptors: {paths:?}");
    let mut ops: Vec<String> = paths.iter().map(|p| format!("open:{}", p.display())).collect();
    ops.extend([
        format!("unregister:{id}"),
        format!("set-request:{id}"),
        format!("open-slot:{id}"),
        format!("register:{pid}"),
        "status".into(),
    ]);
    let results = b.try_ops(&m.socket, &ops);
    let (status, refused) = results.split_last().unwrap();
    for (op, r) in ops.iter().zip(refused) {
        assert!(r.starts_with("error"), "user B did {op}: {r}");
    }
    // B's status shows none of A's programs: no name, no pid, no command line.
    let b_view: StatusReport = serde_json::from_str(status.strip_prefix("ok ").unwrap()).unwrap();
    assert!(b_view.programs.is_empty(), "{b_view:?}");
    assert!(!status.contains("secret-job-of-a") && !status.contains(&format!("\"pid\":{pid},")), "{status}");

    // A sees its own program and may change it; root saw it all along.
    let a_view = a.try_ops(&m.socket, &["status".into(), format!("set-request:{id}")]);
    assert!(a_view[0].contains("secret-job-of-a"), "{a_view:?}");
    assert!(a_view[1].starts_with("ok"), "{a_view:?}");
    wait_for("A's own change to hold", || {
        m.status().programs.iter().any(|p| p.pid == pid && p.request == 1 && p.count == 1)
    });
    assert!(m.status().programs.iter().any(|p| p.pid == pid && p.name == "secret-job-of-a"));
}

/// Polls `status` until it satisfies `settled` (`what`; on timeout the last status is shown),
/// then returns the next `k` samples.
fn samples(m: &Shared, what: &str, k: usize, settled: impl Fn(&StatusReport) -> bool) -> Vec<StatusReport> {
    let end = Instant::now() + DEADLINE;
    loop {
        let s = m.status();
        if settled(&s) {
            break;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    (0..k)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(30));
            m.status()
        })
        .collect()
}

/// CPUs held by the programs of `pids` in a status sample.
fn held(s: &StatusReport, pids: &[i32]) -> u32 {
    s.programs.iter().filter(|p| pids.contains(&p.pid) && p.state == "running").map(|p| p.count).sum()
}

#[test]
#[cfg_attr(not(is_root), ignore = "needs root: creates Unix users")]
fn share_user_gives_each_user_half_whatever_the_number_of_programs() {
    let (a, b) = (User::create("fa"), User::create("fb"));
    // Equipartition's rule with 4 programs on 2 CPUs runs the first two: user A's, registered
    // first. Per program, B's lone program waits, until the starvation bound (1 s, or a
    // quantum: 5 s here) grants it a turn; per user, it holds one CPU throughout, and still
    // once A's waiting programs have had their turns (the bound at 50 ms quanta), on A's CPU.
    for (share, b_runs, quantum) in [("program", false, "5s"), ("user", true, "50ms")] {
        let config = format!("policy = \"equipartition\"\nshare = \"{share}\"\nquantum = \"{quantum}\"\n");
        let mut m = Shared::start(&config);
        let a_pids: Vec<i32> = (0..3).map(|i| m.run(Some(&a), &format!("a{i}"), BUSY)).collect();
        let b_pid = m.run(Some(&b), "b0", BUSY);
        let (b_cpus, a_cpus) = if b_runs { (1, 1) } else { (0, 2) };
        let expected = |s: &StatusReport| held(s, &[b_pid]) == b_cpus && held(s, &a_pids) == a_cpus;
        let what = format!("share {share}: B on {b_cpus} CPU, A on {a_cpus}");
        for s in samples(&m, &what, 20, |s| s.programs.len() == 4 && expected(s)) {
            assert!(expected(&s), "share {share}: {s:?}");
        }
        if b_runs {
            assert!(!stopped(b_pid) && allowed(b_pid).is_some_and(|c| c.len() == 1));
            // Every one of A's programs runs in turn, and B keeps its CPU meanwhile.
            let mut ran = std::collections::BTreeSet::new();
            wait_for("each of A's programs to have a turn", || {
                let s = m.status();
                assert!(expected(&s), "share {share}, during A's turns: {s:?}");
                ran.extend(
                    s.programs.iter().filter(|p| a_pids.contains(&p.pid) && p.state == "running").map(|p| p.pid),
                );
                ran.len() == a_pids.len()
            });
        }
    }
}

#[test]
#[cfg_attr(not(is_root), ignore = "needs root: creates Unix users")]
fn per_user_limits_cap_programs_and_weight_for_each_user_alone() {
    let (a, b) = (User::create("la"), User::create("lb"));
    let mut m = Shared::start("max_programs_per_user = 2\nmax_weight = 4.0\n");
    m.run(Some(&a), "a0", "sleep 600");
    m.run(Some(&a), "a1", "sleep 600");
    // A third program of A's is refused with the reason (`cpumgr run` says so and runs it
    // unmanaged).
    let third = a.cpumgr(&m.socket, &["run", "--name", "a2", "--", "true"]).stderr(Stdio::piped()).output().unwrap();
    assert!(
        String::from_utf8_lossy(&third.stderr).contains(&format!("user {} already has its limit of 2 programs", a.uid)),
        "{third:?}"
    );
    // B is not limited by A's count, but by the weight cap like everyone.
    let heavy = b.cpumgr(&m.socket, &["run", "--weight", "5", "--", "true"]).stderr(Stdio::piped()).output().unwrap();
    assert!(String::from_utf8_lossy(&heavy.stderr).contains("weight 5 is above the limit of 4"), "{heavy:?}");
    m.run(Some(&b), "b0", "sleep 600");
    let names: Vec<String> = m.status().programs.into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["a0", "a1", "b0"]);
}

/// Children that sleep, killed and reaped when dropped.
struct Sleepers(Vec<Child>);

impl Sleepers {
    fn spawn(n: usize) -> Sleepers {
        Sleepers((0..n).map(|_| Command::new("sleep").arg("600").spawn().unwrap()).collect())
    }

    fn pid(&self, i: usize) -> i32 {
        self.0[i].id() as i32
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Descriptors `pid` keeps (the slots, the pidfds, other files): not sockets, since connections
/// come and go with the tests' own requests, and not `/proc` or `/sys` files, which the manager
/// opens for a read every quantum (one open at the moment of counting failed a comparison).
fn open_fds(pid: i32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    let transient = |l: &std::path::Path| {
        let l = l.to_string_lossy();
        l.starts_with("socket:") || l.starts_with("/proc/") || l.starts_with("/sys/")
    };
    dir.flatten().filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| !transient(&l))).count()
}

fn register(conn: &Conn, pid: i32) -> (Reply, Vec<std::os::fd::OwnedFd>) {
    conn.call(&Request::Register(Registration { pid: Some(pid), ..Default::default() })).unwrap()
}

#[test]
fn thousands_of_registrations_are_capped_and_leave_nothing_behind() {
    let m =
        Shared::start("max_programs_per_user = 8\nrequests_per_second = 100000\nuser_requests_per_second = 100000\n");
    let manager = m.manager.id() as i32;
    let kids = Sleepers::spawn(12);
    let conn = Conn::connect(&m.socket).unwrap();
    let fds_before = open_fds(manager);
    let rss_before = status_field(manager, "VmRSS").unwrap();
    let mut ids = Vec::new();
    for i in 0..kids.0.len() {
        match register(&conn, kids.pid(i)) {
            (Reply::Registered { id }, _) => ids.push(id),
            (Reply::Error { message }, _) => {
                assert!(message.contains("already has its limit of 8 programs"), "{message}")
            }
            r => panic!("{r:?}"),
        }
    }
    assert_eq!(ids.len(), 8);
    // Each program holds its slot and pidfds in the manager (the socket thread takes its copy
    // of a pidfd before it answers the next request).
    conn.call(&Request::Status).unwrap();
    let fds_registered = open_fds(manager);
    assert!(fds_registered >= fds_before + 2 * 8, "{fds_before} -> {fds_registered}");
    // Thousands more, every one refused (over the limit, or already registered), costing nothing.
    for k in 0..3000 {
        let (r, fds) = register(&conn, kids.pid(k % kids.0.len()));
        assert!(matches!(r, Reply::Error { .. }) && fds.is_empty(), "{r:?}");
    }
    assert_eq!(m.status().programs.len(), 8);
    assert_eq!(open_fds(manager), fds_registered);
    eprintln!(
        "manager RSS before {rss_before}, after 3000 refused registrations {}",
        status_field(manager, "VmRSS").unwrap()
    );
    for id in ids {
        assert_eq!(conn.call(&Request::Unregister { id }).unwrap().0, Reply::Ok);
    }
    assert_eq!(m.status().programs.len(), 0);
    wait_for("the manager's descriptors back to where they were", || open_fds(manager) == fds_before);
}

#[test]
fn a_program_that_wrecks_its_slot_hurts_only_itself() {
    use std::os::fd::AsRawFd;
    let mut m = Shared::start("policy = \"equipartition\"\n");
    let other = m.run(None, "other", BUSY);
    let kids = Sleepers::spawn(1);
    let conn = Conn::connect(&m.socket).unwrap();
    let (r, fds) = register(&conn, kids.pid(0));
    assert!(matches!(r, Reply::Registered { .. }), "{r:?}");
    let fd = fds.into_iter().next().unwrap();
    // Truncating the slot under the manager's mapping would kill it with SIGBUS: sealed.
    let file = std::fs::File::from(fd);
    assert!(file.set_len(0).is_err(), "the slot was truncated");
    assert!(file.set_len(1 << 30).is_err(), "the slot was grown");
    // Garbage over every byte of the page, the manager's half included, again and again.
    // SAFETY: a fresh shared mapping of the slot's one page, unmapped below.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    let page = page as *mut u8;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for round in 0..50 {
        for i in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // SAFETY: the page is mapped writable for 4096 bytes.
            unsafe { page.add(i).write_volatile(x as u8) };
        }
        if round % 10 == 0 {
            std::thread::sleep(Duration::from_millis(60));
        }
    }
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(page as *mut libc::c_void, 4096) };
    // The manager still serves, the wrecked program's request is clamped to the machine, and the
    // other program keeps running on its CPU.
    assert!(m.manager.try_wait().unwrap().is_none(), "the manager died");
    let s = m.status();
    let wrecked = s.programs.iter().find(|p| p.pid == kids.pid(0)).unwrap();
    assert!(wrecked.request <= 2, "{wrecked:?}");
    wait_for("the other program to run on a CPU", || {
        m.status().programs.iter().any(|p| p.pid == other && p.count >= 1 && p.state == "running") && !stopped(other)
    });
}

#[test]
fn a_socket_flood_is_held_to_its_rate_and_other_users_are_served() {
    const RATE: u32 = 20;
    // Another user needs root to create: without it, only the flood is checked.
    let b = cfg!(is_root).then(|| User::create("sb"));
    let m = Shared::start(&format!("requests_per_second = 1000\nuser_requests_per_second = {RATE}\n"));
    // Two connections of one user send status requests as fast as the manager takes them; their
    // replies, counted over a measured time, stay within the user's burst plus its rate.
    let started = Instant::now();
    let floods: Vec<_> = (0..2)
        .map(|_| {
            let conn = Conn::connect(&m.socket).unwrap();
            conn.set_timeout(Some(Duration::from_millis(200))).unwrap();
            std::thread::spawn(move || {
                let bytes = cpumgr_proto::msg::encode(&Request::Status).unwrap();
                let end = Instant::now() + Duration::from_millis(1500);
                let mut answered = 0u32;
                while Instant::now() < end {
                    if conn.send(&bytes, &[]).is_err() {
                        continue;
                    }
                    if conn.recv().is_ok() {
                        answered += 1;
                    }
                }
                answered
            })
        })
        .collect();
    // Meanwhile another user's request is answered: it has a bucket of its own.
    if let Some(b) = &b {
        let mut out = b.cpumgr(&m.socket, &["status", "--json"]).stdout(Stdio::piped()).spawn().unwrap();
        let mut text = String::new();
        out.stdout.take().unwrap().read_to_string(&mut text).unwrap();
        assert!(out.wait().unwrap().success() && text.contains("\"policy\""), "{text}");
    }
    let answered: u32 = floods.into_iter().map(|t| t.join().unwrap()).sum();
    let elapsed = started.elapsed().as_secs_f64();
    let bound = RATE as f64 * (1.0 + elapsed) + 2.0;
    eprintln!("flood: {answered} answered in {elapsed:.2} s (bound {bound:.0})");
    assert!(answered as f64 <= bound, "{answered} answers in {elapsed:.2} s at {RATE}/s");
    assert!(answered >= RATE, "the burst was served: {answered}");
}

#[test]
fn a_client_that_never_reads_its_replies_is_dropped_and_stalls_no_one() {
    use cpumgr_proto::transport::TransportError;
    const SENT: usize = 3000;
    let m = Shared::start("requests_per_second = 100000\nuser_requests_per_second = 100000\n");
    let flooder = Conn::connect(&m.socket).unwrap();
    flooder.set_timeout(Some(Duration::from_millis(200))).unwrap();
    let bytes = cpumgr_proto::msg::encode(&Request::Status).unwrap();
    // Requests without reading a reply, until the manager hangs up or all are sent.
    let mut sent = 0;
    let deadline = Instant::now() + DEADLINE;
    while sent < SENT && Instant::now() < deadline {
        match flooder.send(&bytes, &[]) {
            Ok(()) => sent += 1,
            Err(TransportError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => break,
        }
    }
    // Meanwhile the others are served.
    for _ in 0..20 {
        assert!(!m.status().cpus.is_empty());
    }
    // The replies that fit in its queue are there; then the manager closed the connection
    // rather than wait for it to read.
    let mut answered = 0;
    let end = loop {
        match flooder.recv() {
            Ok(_) => answered += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(end, TransportError::Closed), "{end:?} after {answered} replies of {sent} requests");
    assert!(answered < SENT, "every reply was delivered");
    eprintln!("a client that did not read: {sent} requests sent, {answered} replies queued, then closed");
}
