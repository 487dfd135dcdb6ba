//! Crashes on real processes: programs killed with SIGKILL at random, the manager killed with
//! SIGKILL in the middle of gang scheduling and started again, and chaos mode. Each soak is
//! bounded and prints its figures; the sizes come from variables so the default suite stays fast:
//!
//! ```text
//! CPUMGR_SOAK_KILLS=1000 CPUMGR_SOAK_RESTARTS=100 CPUMGR_SOAK_CHAOS=1000 \
//!     cargo test -p cpumgr --test crash -- --nocapture --test-threads 1
//! ```
//!
//! Every wait polls for the expected state with a generous deadline; what must happen "within one
//! quantum" or "within one second" is counted and printed, and the assertions are on the states
//! reached (nothing stopped, nothing pinned, nothing held by a dead program, no stale slot, no
//! zombie), so a loaded machine slows the soaks down without failing them.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use cpumgr_core::CpuSet;
use cpumgr_proto::msg::StatusReport;
use cpumgr_proto::{Conn, Reply, Request};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// The quantum of every manager here (`Daemon::start`'s).
const QUANTUM: Duration = Duration::from_millis(50);

/// A size from the environment, else the default.
fn size(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A small deterministic generator (xorshift64*), so a soak's choices can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Starts `cpumgr daemon` on `d`'s socket again (after it died), with `extra` arguments, and
/// waits until it answers, or died first: a manager in chaos mode may die at its first step,
/// before anyone connected, and leave its socket file behind (the caller sees `d.child` ended
/// and starts another).
fn restart(d: &mut Daemon, policy: &str, extra: &[&str]) {
    let mut args = vec!["daemon", "--policy", policy, "--quantum", "50ms", "--cpus", "0-1"];
    args.extend_from_slice(extra);
    d.child = d.cpumgr(&args).spawn().unwrap();
    wait_for("the new manager to answer", || Conn::connect(&d.socket).is_ok() || d.child.try_wait().unwrap().is_some());
}

/// `status`, or `None` when the manager is down or lost the message (chaos).
fn try_status(d: &Daemon) -> Option<StatusReport> {
    let c = Conn::connect(&d.socket).ok()?;
    c.set_timeout(Some(Duration::from_secs(2))).ok()?;
    match c.call(&Request::Status).ok()?.0 {
        Reply::Status(s) => Some(s),
        _ => None,
    }
}

/// Starts `cpumgr run --name NAME -- sh -c SCRIPT` without waiting for it to register.
/// The pids of the processes in group `pgid`.
fn group(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| cpumgr_daemon::procfs::parse_stat(&t))
                .is_some_and(|s| s.pgrp == pgid && s.state != 'Z')
        })
        .collect()
}

/// Whether some process of group `pgid` is stopped, and whether some thread of it has an
/// affinity other than `wide` (`/proc/PID/task/*/status`).
fn held(pgid: i32, wide: &CpuSet) -> (bool, bool) {
    let (mut stopped_any, mut narrowed) = (false, false);
    for pid in group(pgid) {
        stopped_any |= stopped(pid);
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for t in tasks.flatten() {
            let Ok(s) = std::fs::read_to_string(t.path().join("status")) else { continue };
            let cpus =
                s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).and_then(|v| CpuSet::parse(v.trim()).ok());
            narrowed |= cpus.is_some_and(|c| c != *wide);
        }
    }
    (stopped_any, narrowed)
}

/// The inodes of the slot memfds process `pid` holds open (`/proc/PID/fd`).
fn slots(pid: u32) -> BTreeSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return BTreeSet::new() };
    fds.flatten()
        .filter(|f| std::fs::read_link(f.path()).is_ok_and(|l| l.to_string_lossy().starts_with("/memfd:cpumgr-slot")))
        .filter_map(|f| std::fs::metadata(f.path()).ok().map(|m| m.ino()))
        .collect()
}

/// The resident memory of process `pid`, in kB (`VmRSS`).
fn rss_kb(pid: u32) -> u64 {
    status_field(pid as i32, "VmRSS").and_then(|v| v.trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// How many descriptors process `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Zombie processes whose parent is one of `parents`.
fn zombies(parents: &[u32]) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|s| {
            let field = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string());
            field("State:").is_some_and(|v| v.starts_with('Z'))
                && field("PPid:").and_then(|v| v.parse::<u32>().ok()).is_some_and(|p| parents.contains(&p))
        })
        .count()
}

/// Entries of `/dev/shm` that name cpumgr (there should never be any: slots are memfds).
fn shm_entries() -> usize {
    std::fs::read_dir("/dev/shm")
        .map_or(0, |d| d.flatten().filter(|e| e.file_name().to_string_lossy().contains("cpumgr")).count())
}

/// The pids of the programs `status` shows.
fn pids(s: &StatusReport) -> BTreeSet<i32> {
    s.programs.iter().map(|p| p.pid).collect()
}

#[test]
fn a_restarted_manager_readopts_the_running_programs_with_their_slots() {
    let mut d = Daemon::start("gang");
    let a = d.run("a", BUSY);
    let b = d.run("b", &format!("({BUSY}) & {BUSY}"));
    wait_for("one of them stopped by gang", || stopped(a) || stopped(b));
    let before = d.status();
    // The manager registers a program, and may stop it, before its supervisor has read the
    // reply that carries the slot.
    let kept = || d.runs.iter().flat_map(|r| slots(r.id())).collect::<BTreeSet<u64>>();
    wait_for("each supervisor to keep its program's slot", || kept().len() == 2);
    let kept = kept();
    assert_eq!(slots(d.child.id()), kept, "the manager maps the slots its supervisors hold");
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    let all = inherited();
    wait_for("both released by their supervisors", || {
        held(a, &all) == (false, false) && held(b, &all) == (false, false)
    });
    restart(&mut d, "gang", &[]);
    wait_for("both re-adopted", || try_status(&d).is_some_and(|s| pids(&s) == pids(&before)));
    assert_eq!(slots(d.child.id()), kept, "the new manager maps the very same slots");
    for r in &mut d.runs {
        assert!(r.try_wait().unwrap().is_none(), "no program or supervisor restarted");
    }
    let s = d.status();
    let names: BTreeSet<_> = s.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["a", "b"]));
    // The new manager enforces again: gang stops them in turns.
    wait_for("gang again", || stopped(a) || stopped(b));
    // The same program coming back with its slot to the manager that still has it (its
    // connection was lost, not the manager) keeps its id; without its slot, it is refused.
    let id = s.programs.iter().find(|p| p.pid == a).unwrap().id;
    let c = Conn::connect(&d.socket).unwrap();
    let (r, fds) = c.call(&Request::OpenSlot { id: Some(id) }).unwrap();
    assert!(matches!(r, Reply::Slot { .. }), "{r:?}");
    let reg = Request::Register(cpumgr_proto::Registration { pid: Some(a), ..Default::default() });
    let bytes = cpumgr_proto::msg::encode(&reg).unwrap();
    c.send(&bytes, &[std::os::fd::AsFd::as_fd(&fds[0])]).unwrap();
    let back: Reply = cpumgr_proto::msg::decode(&c.recv().unwrap().bytes).unwrap();
    assert_eq!(back, Reply::Registered { id });
    let (r, _) = c.call(&reg).unwrap();
    assert!(matches!(r, Reply::Error { ref message } if message.contains("already registered")), "{r:?}");
    // A descriptor that is not a slot (here a plain file, which anyone could truncate under the
    // manager's mapping) is refused, and the manager keeps serving.
    let file = tempfile::tempfile().unwrap();
    file.set_len(4096).unwrap();
    let other = Command::new("sleep").arg("60").spawn().unwrap();
    let other_reg =
        Request::Register(cpumgr_proto::Registration { pid: Some(other.id() as i32), ..Default::default() });
    d.runs.push(other);
    c.send(&cpumgr_proto::msg::encode(&other_reg).unwrap(), &[std::os::fd::AsFd::as_fd(&file)]).unwrap();
    let refused: Reply = cpumgr_proto::msg::decode(&c.recv().unwrap().bytes).unwrap();
    assert!(matches!(refused, Reply::Error { ref message } if message.contains("cannot be sealed")), "{refused:?}");
    assert_eq!(pids(&d.status()), pids(&before));
}

#[test]
fn programs_killed_at_random_leave_no_cpu_slot_or_zombie_behind() {
    let kills = size("CPUMGR_SOAK_KILLS", 50);
    let mut d = Daemon::start("equipartition");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let shm_before = shm_entries();
    // An OpenMP stencil with the adapter (cooperative: it maps its slot, its teams follow the
    // allocation, it is nearly always inside a parallel region), a busy loop, a team of two.
    assert!(Path::new(BIN).with_file_name("libcpumgr_omp.so").is_file(), "run `cargo build --workspace` first");
    let kernels = tempfile::tempdir().unwrap();
    cpumgr_kernels::build(kernels.path(), "gcc").unwrap();
    let stencil = kernels.path().join("stencil");
    let team = format!("({BUSY}) & {BUSY}");
    let programs: [Vec<&str>; 3] = [
        vec!["--omp", "--", stencil.to_str().unwrap(), "-n", "64", "-iters", "1000000000", "-regions", "100000000"],
        vec!["--", "sh", "-c", BUSY],
        vec!["--", "sh", "-c", &team],
    ];
    let mut live: Vec<(i32, Child, usize)> = Vec::new();
    let mut serial = 0;
    let mut start_one = |d: &mut Daemon, live: &mut Vec<(i32, Child, usize)>, rng: &mut Rng| {
        serial += 1;
        let name = format!("p{serial}");
        let kind = rng.below(programs.len());
        let mut args = vec!["run", "--name", &name];
        args.extend_from_slice(&programs[kind]);
        let child = d.cpumgr(&args).env("OMP_NUM_THREADS", "2").stdout(Stdio::null()).spawn().unwrap();
        let mut pid = 0;
        wait_for(&format!("{name} to register"), || {
            pid = d.status().programs.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
            pid != 0
        });
        live.push((pid, child, kind));
    };
    for _ in 0..3 {
        start_one(&mut d, &mut live, &mut rng);
    }
    wait_for("the first allocations", || d.status().programs.iter().any(|p| p.count > 0));
    let fds_at_start = open_fds(d.child.id());
    let rss_at_start = rss_kb(d.child.id());
    let (mut while_stopped, mut holding, mut in_region) = (0, 0, 0);
    let (mut late, mut stale, mut held_by_dead) = (0, 0, 0);
    let began = Instant::now();
    for k in 0..kills {
        if k % 10 == 5 {
            // Half the time under gang, so that kills also hit stopped programs.
            let policy = if (k / 10) % 2 == 0 { "gang" } else { "equipartition" };
            assert!(d.cpumgr(&["policy", "set", policy]).status().unwrap().success());
        }
        let (pid, mut run, kind) = live.swap_remove(rng.below(live.len()));
        while_stopped += usize::from(stopped(pid));
        let allocated = d.status().programs.iter().any(|p| p.pid == pid && p.count > 0);
        holding += usize::from(allocated);
        in_region += usize::from(kind == 0 && allocated);
        killpg(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        let st = run.wait().unwrap();
        assert_eq!(st.code(), Some(128 + 9), "cpumgr run reports the kill");
        std::thread::sleep(QUANTUM);
        let reclaimed = |s: &StatusReport| !s.programs.iter().any(|p| p.pid == pid);
        if !reclaimed(&d.status()) {
            late += 1;
            wait_for("the killed program to be forgotten", || reclaimed(&d.status()));
        }
        start_one(&mut d, &mut live, &mut rng);
        let s = d.status();
        let alive: BTreeSet<i32> = live.iter().map(|(p, ..)| *p).collect();
        held_by_dead += s.programs.iter().filter(|p| !alive.contains(&p.pid)).map(|p| p.cpus.len()).sum::<usize>();
        stale += slots(d.child.id()).len().saturating_sub(s.programs.len());
    }
    let elapsed = began.elapsed();
    // Connections the test just closed may still be open on the manager's side for a moment.
    let mut fds_at_end = 0;
    let settled = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settled {
        fds_at_end = open_fds(d.child.id());
        if fds_at_end <= fds_at_start {
            break;
        }
        std::thread::sleep(QUANTUM);
    }
    if fds_at_end > fds_at_start {
        for f in std::fs::read_dir(format!("/proc/{}/fd", d.child.id())).unwrap().flatten() {
            eprintln!("{:?} -> {:?}", f.path(), std::fs::read_link(f.path()));
        }
    }
    // The manager's unreaped children. Not this process's: the tests of this file run at once in
    // it, and another test's manager or program that has just died is its zombie until that test
    // waits for it (this test waits for each `cpumgr run` it kills above).
    let zombie_count = zombies(&[d.child.id()]);
    for (pid, mut run, _) in live {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        let _ = run.wait();
    }
    wait_for("no program left", || d.status().programs.is_empty());
    let slots_left = slots(d.child.id()).len();
    let rss_at_end = rss_kb(d.child.id());
    println!(
        "kill soak: {kills} kill -9 in {:.1} s ({while_stopped} of stopped programs, {holding} holding CPUs, {in_region} of them \
         OpenMP stencils in a region); not reclaimed after one quantum: {late}; \
         CPUs held by dead programs: {held_by_dead}; stale slots: {stale} (after the last program: {slots_left}); \
         manager fds {fds_at_start} -> {fds_at_end}, resident memory {rss_at_start} -> {rss_at_end} kB; zombies: {zombie_count}; /dev/shm cpumgr entries: {} -> {}",
        elapsed.as_secs_f64(),
        shm_before,
        shm_entries()
    );
    assert_eq!(held_by_dead, 0);
    assert_eq!(stale, 0);
    assert_eq!(slots_left, 0);
    assert_eq!(zombie_count, 0);
    assert!(fds_at_end <= fds_at_start, "the same programs, no more descriptors: nothing leaks");
    assert_eq!(shm_entries(), shm_before);
}

#[test]
fn the_manager_killed_mid_gang_leaves_nothing_stopped_or_pinned_and_every_program_is_readopted() {
    let restarts = size("CPUMGR_SOAK_RESTARTS", 5);
    let mut d = Daemon::start("gang");
    let programs = [d.run("one", BUSY), d.run("team", &format!("({BUSY}) & {BUSY}")), d.run("three", BUSY)];
    let all = inherited();
    let (mut left_stopped, mut left_narrowed, mut missing) = (0, 0, 0);
    let (mut slowest_release, mut slowest_readopt) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..restarts {
        wait_for("gang to stop a program", || programs.iter().any(|&p| stopped(p)));
        d.child.kill().unwrap();
        let killed = Instant::now();
        // Watched before the dead manager is reaped: the release does not wait for that.
        let released = || programs.iter().all(|&p| held(p, &all) == (false, false));
        while !released() && killed.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let after_one_second: Vec<(bool, bool)> = programs.iter().map(|&p| held(p, &all)).collect();
        left_stopped += after_one_second.iter().filter(|h| h.0).count();
        left_narrowed += after_one_second.iter().filter(|h| h.1).count();
        wait_for("every program released", released);
        slowest_release = slowest_release.max(killed.elapsed());
        d.child.wait().unwrap();
        let restarted = Instant::now();
        restart(&mut d, "gang", &[]);
        let expected: BTreeSet<i32> = programs.into_iter().collect();
        wait_for("every program re-adopted", || try_status(&d).is_some_and(|s| pids(&s) == expected));
        slowest_readopt = slowest_readopt.max(restarted.elapsed());
        // What an administrator sees: `cpumgr status --json`.
        let out = d.cpumgr(&["status", "--json"]).output().unwrap();
        assert!(out.status.success());
        let shown: StatusReport = serde_json::from_slice(&out.stdout).unwrap();
        missing += expected.len() - pids(&shown).intersection(&expected).count();
    }
    for r in &mut d.runs {
        assert!(r.try_wait().unwrap().is_none(), "a supervisor ended");
    }
    println!(
        "manager kill soak: {restarts} SIGKILLs mid-gang; after 1 s: {left_stopped} programs left stopped, {left_narrowed} narrowed; \
         slowest release {:.0} ms; slowest restart to all re-adopted {:.0} ms; missing from status: {missing}",
        slowest_release.as_secs_f64() * 1e3,
        slowest_readopt.as_secs_f64() * 1e3
    );
    // Released at all is the behaviour (`wait_for` above); how soon is a figure, printed: a
    // loaded machine may not run the supervisors within a second.
    assert_eq!(missing, 0);
}

#[test]
fn under_chaos_programs_are_never_left_stopped_or_pinned() {
    let quanta = size("CPUMGR_SOAK_CHAOS", 60);
    // A few of the six programs killed over the run, the manager dead every 50 quanta or so.
    let chaos = |n: usize| format!("seed={n},delay=20ms,drop=0.05,kill={},die=0.02", (2.0 / quanta as f64).max(0.005));
    let mut d = Daemon::start("gang");
    let programs: Vec<i32> = (0..6).map(|i| d.run(&format!("c{i}"), BUSY)).collect();
    // Swap in a manager in chaos mode; the supervisors bring their programs to it.
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    let mut deaths = 0;
    restart(&mut d, "gang", &["--chaos", &chaos(deaths)]);
    let end = Instant::now() + QUANTUM * quanta as u32;
    while Instant::now() < end {
        // The test is the manager's restarter (as systemd's Restart=always would be).
        if d.child.try_wait().unwrap().is_some() {
            deaths += 1;
            restart(&mut d, "gang", &["--chaos", &chaos(deaths)]);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // A manager that stops cleanly (SIGTERM) releases everything, and so does a dead one
    // through the supervisors: either way, nothing is left held.
    let _ = kill(Pid::from_raw(d.child.id() as i32), Signal::SIGTERM);
    d.child.wait().unwrap();
    let survivors: BTreeSet<i32> = programs.iter().copied().filter(|&p| !group(p).is_empty()).collect();
    let all = inherited();
    wait_for("every program released", || survivors.iter().all(|&p| held(p, &all) == (false, false)));
    // A manager without chaos re-adopts every program still running.
    restart(&mut d, "gang", &[]);
    wait_for("every program re-adopted", || try_status(&d).is_some_and(|s| pids(&s) == survivors));
    let ended = d.runs.iter_mut().map(|r| r.try_wait().unwrap().is_some()).filter(|&e| e).count();
    println!(
        "chaos soak: {quanta} quanta: the manager died {deaths} times, {} of 6 programs killed, the {} others released and re-adopted",
        6 - survivors.len(),
        survivors.len()
    );
    assert_eq!(ended, 6 - survivors.len(), "a supervisor ends only with its program");
}

/// The children of `pid` (of any of its threads) named `cpumgr-watchdog`.
fn watchdogs(pid: u32) -> Vec<i32> {
    let tasks =
        std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
    let children: String = tasks
        .iter()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .collect::<Vec<_>>()
        .join(" ");
    children
        .split_whitespace()
        .filter_map(|c| c.parse::<i32>().ok())
        .filter(|c| std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "cpumgr-watchdog"))
        .collect()
}

#[test]
fn the_watchdog_continues_a_programs_processes_outside_its_group_when_the_manager_is_killed() {
    use std::os::unix::process::CommandExt;
    let mut d = Daemon::start("gang");
    // Registered by a raw `register` (no supervisor): a group whose busy child made a session of
    // its own, as MPI launchers' proxies do, beside a busy program to time-share with.
    let script = "setsid sh -c 'while :; do :; done' & wait";
    let a = Command::new("sh").args(["-c", script]).process_group(0).spawn().unwrap();
    let b = Command::new("sh").args(["-c", BUSY]).process_group(0).spawn().unwrap();
    let (pa, pb) = (a.id() as i32, b.id() as i32);
    d.runs.extend([a, b]);
    for pid in [pa, pb] {
        let r = d.call(Request::Register(cpumgr_proto::Registration { pid: Some(pid), ..Default::default() }));
        assert!(matches!(r, Reply::Registered { .. }), "{r:?}");
    }
    let mut stray = 0;
    wait_for("the child in its own session", || {
        let children = std::fs::read_to_string(format!("/proc/{pa}/task/{pa}/children")).unwrap_or_default();
        stray = children.split_whitespace().next().and_then(|c| c.parse().ok()).unwrap_or(0);
        stray != 0
    });
    // Gang stops the program in the other's quanta: its stray with it.
    wait_for("a quantum with the program and its stray stopped", || stopped(pa) && stopped(stray));
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    let all = inherited();
    wait_for("the stray continued and widened by the watchdog", || held(stray, &all) == (false, false));
    let _ = kill(Pid::from_raw(stray), Signal::SIGKILL);
}

#[test]
fn the_watchdog_releases_programs_without_a_supervisor_when_the_manager_is_killed() {
    use std::os::unix::process::CommandExt;
    let mut d = Daemon::start("gang");
    // Two programs registered by a raw `register` (as a script or the client library would):
    // no `cpumgr run` watches them.
    let spawn = || Command::new("sh").args(["-c", BUSY]).process_group(0).spawn().unwrap();
    let (a, b) = (spawn(), spawn());
    let (pa, pb) = (a.id() as i32, b.id() as i32);
    d.runs.extend([a, b]);
    for pid in [pa, pb] {
        let r = d.call(Request::Register(cpumgr_proto::Registration { pid: Some(pid), ..Default::default() }));
        assert!(matches!(r, Reply::Registered { .. }), "{r:?}");
    }
    // The watchdog names itself after the fork: wait for the name rather than race it.
    let mut first = Vec::new();
    wait_for("one watchdog per manager", || {
        first = watchdogs(d.child.id());
        first.len() == 1
    });
    // A killed watchdog is replaced within a quantum.
    kill(Pid::from_raw(first[0]), Signal::SIGKILL).unwrap();
    let mut dogs = Vec::new();
    wait_for("a new watchdog", || {
        dogs = watchdogs(d.child.id());
        dogs.len() == 1 && dogs != first
    });
    // Killed while gang holds one of them stopped, on a narrowed set or not.
    wait_for("gang to stop one of them", || stopped(pa) || stopped(pb));
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    let all = inherited();
    wait_for("both released by the watchdog", || held(pa, &all) == (false, false) && held(pb, &all) == (false, false));
    wait_for("the watchdog to end", || dogs.iter().all(|&w| gone(w)));
    // A manager that stops cleanly reaps its watchdog: no process, no zombie left.
    restart(&mut d, "gang", &[]);
    let mut dogs = Vec::new();
    wait_for("the new manager's watchdog", || {
        dogs = watchdogs(d.child.id());
        dogs.len() == 1
    });
    kill(Pid::from_raw(d.child.id() as i32), Signal::SIGTERM).unwrap();
    assert!(d.child.wait().unwrap().success());
    assert!(dogs.iter().all(|&w| std::fs::metadata(format!("/proc/{w}")).is_err()), "the watchdog was reaped");
}

#[test]
fn a_bad_chaos_spec_is_refused_with_exit_2() {
    let err = daemon_refuses(&["--chaos", "drop=2"]);
    assert!(err.contains("--chaos drop=2: drop=2: not a probability"), "{err}");
}

/// A program registered again with its own slot while the manager still has it, as its client
/// does after a lost connection (`cpumgr-client`'s rejoin), may be stopped at that moment: the
/// manager continues it, or it would stay stopped while allocated (no step continues a program
/// the manager believes running).
#[test]
fn a_program_registered_again_while_stopped_is_continued_when_allocated() {
    use std::os::unix::process::CommandExt;
    let mut d = Daemon::start("gang");
    let mut slots = Vec::new();
    for _ in 0..2 {
        let child = Command::new("sh").args(["-c", BUSY]).process_group(0).spawn().unwrap();
        let pid = child.id() as i32;
        d.runs.push(child);
        let conn = Conn::connect(&d.socket).unwrap();
        let (reply, fds) =
            conn.call(&Request::Register(cpumgr_proto::Registration { pid: Some(pid), ..Default::default() })).unwrap();
        assert!(matches!(reply, Reply::Registered { .. }), "{reply:?}");
        slots.push((pid, fds.into_iter().next().expect("the slot")));
    }
    wait_for("gang to stop one of them", || slots.iter().any(|(p, _)| stopped(*p)));
    // No more rotation: whoever is stopped now stays stopped under gang.
    assert!(d.cpumgr(&["quantum", "set", "10s"]).status().unwrap().success());
    std::thread::sleep(QUANTUM * 4);
    let (pid, slot) = slots.iter().find(|(p, _)| stopped(*p)).expect("one stopped");
    let conn = Conn::connect(&d.socket).unwrap();
    let reg = cpumgr_proto::Registration { pid: Some(*pid), ..Default::default() };
    let (reply, _) = conn.call_with(&Request::Register(reg), &[std::os::fd::AsFd::as_fd(slot)]).unwrap();
    assert!(matches!(reply, Reply::Registered { .. }), "{reply:?}");
    // Space sharing allocates both: the one registered again must run. (The registration
    // continues it, and the step it kicks may stop it again under gang: the manager's word and
    // the processes' states are read together, once the policy's step has come.)
    assert!(d.cpumgr(&["policy", "set", "equipartition"]).status().unwrap().success());
    wait_for("both to run under equipartition", || {
        d.status().programs.iter().all(|p| p.state == "running" && p.count == 1)
            && slots.iter().all(|(p, _)| !stopped(*p))
    });
}

/// A manager that is alive but does not work (stopped by SIGSTOP mid-gang) closes no connection:
/// the supervisors see the lease in their programs' slots run out and release them (nothing
/// stopped or pinned), and when the manager is continued it schedules them again.
#[test]
fn a_stopped_manager_leaves_no_program_stopped_or_pinned() {
    let mut d = Daemon::start("gang");
    let programs = [d.run("one", BUSY), d.run("two", BUSY)];
    let all = inherited();
    wait_for("gang to stop a program", || programs.iter().any(|&p| stopped(p)));
    let manager = Pid::from_raw(d.child.id() as i32);
    kill(manager, Signal::SIGSTOP).unwrap();
    let frozen = Instant::now();
    let released = || programs.iter().all(|&p| held(p, &all) == (false, false));
    wait_for("every program released while the manager is stopped", released);
    println!("stopped manager: every program released {:.2} s after SIGSTOP", frozen.elapsed().as_secs_f64());
    kill(manager, Signal::SIGCONT).unwrap();
    wait_for("gang to stop a program again", || programs.iter().any(|&p| stopped(p)));
}

/// The manager refuses what it cannot manage without stopping itself or the system: its own
/// process, and process 1; `cpumgr attach` refuses a process whose group holds the attach itself.
#[test]
fn attach_refuses_the_manager_init_and_its_own_group() {
    let d = Daemon::start("gang");
    for (pid, why) in [(d.child.id().to_string(), "this manager"), ("1".to_string(), "init")] {
        let out = d.cpumgr(&["attach", &pid]).stderr(Stdio::piped()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("refused") && stderr.contains(why), "{stderr}");
    }
    // A shell leading its own group attaches itself: the attach runs in that group.
    let attach = format!("exec {} attach --socket {} $$", env!("CARGO_BIN_EXE_cpumgr"), d.socket.display());
    let out = Command::new("setsid").args(["sh", "-c", &attach]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("would be stopped with it"), "{stderr}");
}
