//! The live manager on real processes: busy-loop programs started by the tests, a manager on a
//! private socket per test, and the outcome read back from `/proc` (affinity, state) and from
//! `cpumgr status`.

mod common;

use cpumgr_core::CpuSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use cpumgr_proto::{Conn, Reply, Request};
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

/// CPU time of process `pid` so far, in clock ticks (`/proc/PID/stat` utime + stime).
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(") ").map_or("", |(_, rest)| rest).split_whitespace().collect();
    fields
        .get(11)
        .zip(fields.get(12))
        .and_then(|(u, s)| Some(u.parse::<u64>().ok()? + s.parse::<u64>().ok()?))
        .unwrap_or(0)
}

/// Three busy programs on two CPUs under equipartition, whose paper rule runs the first two: the
/// starvation bound gives each one turns, so every one is stopped at some point for another's
/// turn and gets CPU time again after it (without the bound the third stays stopped and the first
/// two are never stopped).
#[test]
fn more_programs_than_cpus_all_get_turns() {
    let mut d = Daemon::start("equipartition");
    let programs = [d.run("a", BUSY), d.run("b", BUSY), d.run("c", BUSY)];
    // Per program, its CPU time when it was first seen stopped.
    let mut at_stop: [Option<u64>; 3] = [None; 3];
    wait_for("every program to be stopped for another's turn and to run again", || {
        for (k, &p) in programs.iter().enumerate() {
            if at_stop[k].is_none() && stopped(p) {
                at_stop[k] = Some(cpu_ticks(p));
            }
        }
        programs.iter().zip(&at_stop).all(|(&p, t)| t.is_some_and(|t| cpu_ticks(p) > t))
    });
}

#[test]
fn a_new_program_keeps_its_cpus_until_its_runtime_attaches_or_a_grace_has_passed() {
    // A runtime counts the CPUs it starts with once (libgomp throttles its spinning for good when
    // its team outnumbers them), so a new program is pinned only after its start-up grace.
    let mut d = Daemon::start_with("equipartition", &["--grace", "5s"]);
    let a = d.run("a", BUSY);
    let b = d.run("b", BUSY);
    wait_for("one CPU each in the decision", || {
        let s = d.status();
        s.programs.len() == 2 && s.programs.iter().all(|p| p.count == 1 && p.state == "running")
    });
    // Inside the grace b keeps the mask it inherited (this test's: every CPU of the machine,
    // beyond the manager's 0-1 where the machine has more).
    assert_eq!(allowed(b), allowed(std::process::id() as i32), "b was pinned inside its start-up grace");
    wait_for("one CPU each, disjoint, once the grace has passed", || match (allowed(a), allowed(b)) {
        (Some(x), Some(y)) => x.len() == 1 && y.len() == 1 && x.is_disjoint(&y),
        _ => false,
    });
}

#[test]
fn with_yield_outside_a_busy_unmanaged_process_keeps_a_cpu() {
    let mut d = Daemon::start_with("equipartition", &["--yield-outside"]);
    let a = d.run("a", BUSY);
    // An unmanaged busy process on CPU 1: the manager measures its CPU time there and offers the
    // policy only CPU 0. (That the CPU comes back when it stops is the unit tests' part: other
    // tests running beside this one are outside load too.)
    let mut outsider = Command::new("taskset").args(["-c", "1", "sh", "-c", BUSY]).spawn().unwrap();
    wait_for("a to be left CPU 0 alone", || {
        let s = d.status();
        s.programs.iter().any(|p| p.pid == a && p.count == 1 && p.cpus == CpuSet::parse("0").unwrap())
            && allowed(a) == Some(CpuSet::parse("0").unwrap())
    });
    outsider.kill().unwrap();
    outsider.wait().unwrap();
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
            if now == Some('a') {
                a_turns += 1
            } else {
                b_turns += 1
            }
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
    let all = inherited();
    wait_for("both released", || {
        !stopped(a) && !stopped(b) && allowed(a) == Some(all.clone()) && allowed(b) == Some(all.clone())
    });
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
    for bad in
        [&b"not json"[..], b"{\"v\":1,\"op\":\"format-disk\"}", b"{\"v\":99,\"op\":\"status\"}", &vec![b'{'; 70_000]]
    {
        c.send(bad, &[]).unwrap();
        let r: Reply = cpumgr_proto::msg::decode(&c.recv().unwrap().bytes).unwrap();
        assert!(matches!(r, Reply::Error { .. }), "{r:?}");
    }
    assert!(matches!(d.call(Request::Unregister { id: 999 }), Reply::Error { .. }));
    for ms in [f64::NAN, 1e30, f64::MAX] {
        // 1e30 ms overflows a Duration: refused, and the socket thread keeps serving.
        assert!(matches!(d.call(Request::SetQuantum { ms }), Reply::Error { .. }), "{ms}");
    }
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
    let all = inherited();
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

/// The `Cpus_allowed_list` of every thread of `pid` (`/proc/PID/task/*/status`).
fn thread_cpus(pid: i32) -> Vec<CpuSet> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).and_then(|v| CpuSet::parse(v.trim()).ok())
        })
        .collect()
}

#[test]
fn attach_manages_a_running_process_and_an_interrupt_leaves_it_restored() {
    use std::os::unix::process::CommandExt;
    let mut d = Daemon::start("equipartition");
    let busy = Command::new("sh").args(["-c", BUSY]).process_group(0).spawn().unwrap();
    let pid = busy.id() as i32;
    d.runs.push(busy); // ended with the manager, even when an assertion fails
    let before = allowed(pid).unwrap();
    let other = d.run("other", BUSY);
    let mut attach = d.cpumgr(&["attach", &pid.to_string(), "--name", "attached"]).spawn().unwrap();
    wait_for("every thread of the attached process on one CPU", || {
        let t = thread_cpus(pid);
        !t.is_empty() && t.iter().all(|s| s.len() == 1)
    });
    wait_for("the other program on the other CPU", || allowed(other).is_some_and(|s| s.len() == 1));
    assert!(d.status().programs.iter().any(|p| p.pid == pid && p.name == "attached"));
    // Under gang the manager stops it in turns; an interrupt of `attach` must not leave it stopped.
    assert!(d.cpumgr(&["policy", "set", "gang"]).status().unwrap().success());
    wait_for("the attached process stopped by the manager", || stopped(pid));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(attach.id() as i32), nix::sys::signal::SIGINT).unwrap();
    assert!(attach.wait().unwrap().success());
    wait_for("the process widened back and continued", || {
        let t = thread_cpus(pid);
        !t.is_empty() && t.iter().all(|s| *s == before) && !stopped(pid)
    });
    assert!(!gone(pid), "attach ended only the attachment");
    assert!(d.status().programs.iter().all(|p| p.pid != pid));
}

#[test]
fn daemon_config_with_an_unknown_key_exits_2_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cpumgr.toml");
    std::fs::write(&config, "policy = \"gang\"\nquantm = \"50ms\"\n").unwrap();
    let err = daemon_refuses(&["--config", config.to_str().unwrap()]);
    assert!(err.contains(&format!("{}:2: field `quantm`", config.display())), "{err}");
    // A CPU list that names no online CPU is refused at its line too, not when the manager starts.
    for cpus in ["\"9999\"", "\"\""] {
        std::fs::write(&config, format!("policy = \"gang\"\ncpus = {cpus}\n")).unwrap();
        let err = daemon_refuses(&["--config", config.to_str().unwrap()]);
        assert!(err.contains(&format!("{}:2: field `cpus`", config.display())), "{err}");
    }
}

#[test]
fn daemon_reads_its_config_file_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cpumgr.toml");
    let socket = dir.path().join("from-file.sock");
    std::fs::write(
        &config,
        format!("policy = \"gang\"\nquantum = \"40ms\"\nsocket = {:?}\n", socket.to_str().unwrap()),
    )
    .unwrap();
    let mut d = Command::new(BIN)
        .args(["daemon", "--config", config.to_str().unwrap(), "--quantum", "30ms"])
        .env_remove("CPUMGR_SOCKET")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the manager on the socket from the file", || Conn::connect(&socket).is_ok());
    let Reply::Status(s) = Conn::connect(&socket).unwrap().call(&Request::Status).unwrap().0 else { panic!() };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    assert!(d.wait().unwrap().success());
    assert_eq!(s.policy, "gang");
    assert_eq!(s.quantum_ms, 30.0);
}

/// `GET path` over plain HTTP/1.1; the whole response.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // A scrape that is not answered within this is a bug (the server's own deadlines are 2 s).
    s.set_read_timeout(Some(std::time::Duration::from_secs(8))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Children sent SIGTERM and waited for when dropped, so a failed assertion leaks no busy loop.
struct Reap(Vec<std::process::Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        for c in self.0.iter_mut().rev() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::SIGTERM);
            let _ = c.wait();
        }
    }
}

#[test]
fn daemon_serves_openmetrics_with_the_programs_series() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("m.sock");
    let mut d = Command::new(BIN)
        .args(["daemon", "--cpus", "0-1", "--quantum", "50ms", "--metrics", "127.0.0.1:0"])
        .env("CPUMGR_SOCKET", &socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = std::io::BufReader::new(d.stderr.take().unwrap());
    let mut procs = Reap(vec![d]);
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the daemon ended without serving metrics");
        if let Some(url) = line.trim().strip_prefix("cpumgr: metrics on http://") {
            break url.trim_end_matches("/metrics").to_string();
        }
    };
    procs.0.push(
        Command::new(BIN)
            .args(["run", "--name", "spin", "--", "sh", "-c", BUSY])
            .env("CPUMGR_SOCKET", &socket)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut pid = 0;
    wait_for("the program to register", || {
        let Reply::Status(status) = Conn::connect(&socket).unwrap().call(&Request::Status).unwrap().0 else { panic!() };
        pid = status.programs.first().map_or(0, |p| p.pid);
        pid != 0
    });
    let labels = format!("id=\"1\",name=\"spin\",pid=\"{pid}\"");
    let allocated = format!("cpumgr_program_allocated_cpus{{{labels}}} 2\n");
    let mut text = String::new();
    wait_for("the program's allocation in the series", || {
        text = http_get(&addr, "/metrics");
        text.contains(&allocated)
    });
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0"), "{head}");
    assert!(body.contains(&format!("cpumgr_program_state{{{labels},cpumgr_program_state=\"running\"}} 1\n")), "{body}");
    assert!(body.contains("cpumgr_cpu_owner{cpu=\"0\"} 1\n"), "{body}");
    assert!(body.contains("cpumgr_registrations_total 1\n"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(http_get(&addr, "/nope").starts_with("HTTP/1.1 404"));
    // Idle clients and one that trickles a byte at a time (each read comes before any per-read
    // timeout) hold up no scrape, and the trickler is cut off at the request deadline.
    let idle: Vec<_> = (0..4).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    let trickler = std::net::TcpStream::connect(&addr).unwrap();
    let writer = trickler.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        use std::io::Write;
        let mut w = writer;
        for _ in 0..100 {
            if w.write_all(b"X").is_err() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        false
    });
    assert!(http_get(&addr, "/metrics").starts_with("HTTP/1.1 200"), "a scrape beside slow clients");
    assert!(trickle.join().unwrap(), "the server closed the trickling connection");
    drop(idle);
}

#[test]
fn metrics_on_a_non_loopback_address_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["daemon", "--metrics", "0.0.0.0:0"])
        .env("CPUMGR_SOCKET", dir.path().join("s.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not loopback"));
}

#[test]
fn top_once_prints_the_cpus_and_programs_of_a_live_manager() {
    let mut d = Daemon::start("equipartition");
    d.run("spinner", BUSY);
    wait_for("an allocation", || d.status().programs.iter().any(|p| p.count > 0));
    let out = d.cpumgr(&["top", "--once"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 24, "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    assert!(text.contains("policy equipartition"), "{text}");
    assert!(text.contains("pkg0 ["), "{text}");
    assert!(text.contains("spinner") && text.contains("running"), "{text}");
}

#[test]
fn a_subscriber_receives_trace_events_as_they_are_emitted() {
    use cpumgr_core::trace::EventKind;
    let mut d = Daemon::start("equipartition");
    let feed = Conn::connect(&d.socket).unwrap();
    feed.set_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    assert_eq!(feed.call(&Request::SubscribeEvents).unwrap().0, Reply::Ok);
    d.run("watched", BUSY);
    let next = || match cpumgr_proto::msg::decode::<Reply>(&feed.recv().unwrap().bytes).unwrap() {
        Reply::Event { event } => event,
        r => panic!("{r:?}"),
    };
    let id = loop {
        let e = next();
        if let EventKind::Arrive { name, .. } = &e.kind {
            assert_eq!(name, "watched");
            break e.program.unwrap();
        }
    };
    loop {
        let e = next();
        if let (Some(p), EventKind::Allocate { count, running, .. }) = (e.program, &e.kind) {
            assert_eq!(p, id);
            assert!(*running && *count == 2, "{e:?}");
            break;
        }
    }
    assert!(d.cpumgr(&["quantum", "set", "70ms"]).status().unwrap().success());
    while !matches!(next().kind, EventKind::Quantum { quantum: 70_000_000 }) {}
}

/// A socket path that names a file which is not a socket (a typo in `--socket`) is refused: the
/// file is left as it was, and the command fails before running anything.
#[test]
fn a_socket_path_that_is_a_file_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let ran = dir.path().join("ran");
    let out = Command::new(BIN)
        .args(["run", "--socket"])
        .arg(&file)
        .args(["--", "touch"])
        .arg(&ran)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a socket"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    assert!(!ran.exists(), "the command did not run");
}

/// Program options that cannot describe a program are bad input (exit 2) before anything runs:
/// no CPUs wanted, a minimum above the maximum or the request, a weight that is not positive.
#[test]
fn impossible_program_options_exit_2_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let socket = dir.path().join("s.sock");
    for opts in [
        &["--request", "0"][..],
        &["--rigid", "0"],
        &["--min", "2", "--max", "1"],
        &["--min", "3", "--request", "2"],
        &["--weight", "0"],
        &["--weight", "nan"],
    ] {
        let out = Command::new(BIN)
            .arg("run")
            .arg("--socket")
            .arg(&socket)
            .args(opts)
            .arg("--")
            .arg("touch")
            .arg(&ran)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{opts:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!ran.exists() && !socket.exists(), "{opts:?}: nothing ran, no manager started");
    }
}

/// A live manager's trace is whole lines a reader can parse while the manager runs, flushed every
/// quantum, and stays so when the manager is killed.
#[test]
fn the_trace_of_a_running_manager_is_readable_and_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("live.jsonl");
    let mut d = Daemon::start_with("equipartition", &["--trace", trace.to_str().unwrap()]);
    d.run("a", BUSY);
    let parsed = || -> Option<Vec<cpumgr_core::trace::Event>> {
        let text = std::fs::read_to_string(&trace).ok()?;
        text.lines().map(|l| serde_json::from_str(l).ok()).collect()
    };
    let allocated = |events: &[cpumgr_core::trace::Event]| {
        events.iter().any(|e| matches!(e.kind, cpumgr_core::trace::EventKind::Allocate { .. }))
    };
    wait_for("an allocation in the trace while the manager runs", || parsed().is_some_and(|e| allocated(&e)));
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    let events = parsed().expect("whole lines after the kill");
    assert!(allocated(&events));
}
