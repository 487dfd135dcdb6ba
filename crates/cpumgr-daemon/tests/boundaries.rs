//! Quantum boundaries under a storm of requests: every request kicks a step, and kicked steps
//! reuse the last walk of `/proc`; only the boundary steps walk it, so they must keep coming
//! every quantum however many kicked steps run between them (a kicked step that pushed the next
//! boundary a quantum further would, under a storm, freeze every program's `/proc` sample).

mod support;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_daemon::Settings;
use cpumgr_proto::{Conn, Reply, Request};
use support::{Live, Sleepers};

/// A busy shell loop leading its own process group, killed and reaped on drop.
struct Busy(Child);

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_storm_of_requests_does_not_hold_back_the_walks_of_proc() {
    let settings = Settings {
        policy: "equipartition".into(),
        quantum: Duration::from_millis(50),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    // A busy program: the CPU time `status` shows for it comes from the walks alone.
    let busy = Busy(Command::new("sh").args(["-c", "while :; do :; done"]).process_group(0).spawn().unwrap());
    let quiet = Sleepers::spawn(1);
    let (busy_id, _busy_slot) = live.register(busy.0.id() as i32, 1);
    let (quiet_id, _quiet_slot) = live.register(quiet.pids()[0], 1);
    let cpu_ms = |live: &Live| live.status().programs.iter().find(|p| p.id == busy_id).map_or(0, |p| p.cpu_ms);
    support::wait_for("the busy program's first CPU time", || cpu_ms(&live) > 0);
    // The storm: the other program's request, again and again, each one a kick.
    let socket = live.manager.as_ref().unwrap().socket().to_path_buf();
    let stop = Arc::new(AtomicBool::new(false));
    let storm = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let conn = Conn::connect(&socket).unwrap();
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let req = Request::SetRequest { id: quiet_id, wanted: 1 + (sent % 2) as u32, min: None, max: None };
                assert_eq!(conn.call(&req).unwrap().0, Reply::Ok);
                sent += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            sent
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_ms(&live);
    let mut seen_more = false;
    support::wait_for("the busy program's CPU time to grow during the storm", || {
        seen_more = cpu_ms(&live) > before;
        seen_more || storm.is_finished()
    });
    stop.store(true, Ordering::Relaxed);
    let sent = storm.join().unwrap();
    assert!(seen_more, "no walk of /proc during a storm of {sent} requests");
    assert!(sent > 10, "a storm: {sent} requests");
}

/// VTQ-DSS times its gang by the quantum: each boundary must start the next gang, however late
/// the step runs. A policy that saw the time the step ran would end nothing at a boundary step
/// that ran earlier after its boundary than the last one (the gang's end still ahead), and the
/// same gang would run a second quantum: about a third of the boundaries, at 100 ms quanta. Two
/// programs of two CPUs on two, one gang each: every boundary step switches them.
#[test]
fn every_boundary_starts_the_next_time_shared_gang() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let settings = Settings {
        policy: "vtq-dss".into(),
        quantum: Duration::from_millis(50),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        trace: Some(trace.clone()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    let kids = Sleepers::spawn(2);
    for pid in kids.pids() {
        live.register(pid, 2);
    }
    // The gangs switched: the trace's allocations that start a program (whole lines: the
    // manager may be writing the next).
    let switches = || {
        let text = std::fs::read_to_string(&trace).unwrap_or_default();
        text.split_inclusive('\n')
            .filter(|l| l.ends_with('\n') && l.contains("\"kind\":\"allocate\"") && l.contains("\"running\":true"))
            .count()
    };
    support::wait_for("both gangs to have run", || switches() >= 2);
    // No kicks from here on (sleeping programs ask nothing): every step is a boundary's. A step
    // may fall between reading the step count and the trace, at either end.
    let (steps_before, before) = (live.status().steps, switches());
    std::thread::sleep(Duration::from_secs(1));
    let (after, steps) = (switches(), live.status().steps - steps_before);
    println!("{} gang switches in {steps} boundary steps", after - before);
    assert!(steps >= 5, "the boundaries came: {steps} steps in a second");
    assert!(after - before + 2 >= steps as usize, "{} switches in {steps} boundary steps", after - before);
}

/// VTQ-DSS's members run for quanta of their own (inversely to their CPUs) and the policy asks
/// for a step when one expires (`Decision::wake_at`); the manager steps then. On three CPUs, a
/// gang of a two-CPU and a one-CPU program: the wide one's quantum is half the gang's, so it
/// stops halfway while the other runs on (without the wake-up it ran to the boundary, and the
/// next gang was the same two). Needs three CPUs: ignored where the build found fewer. The build
/// cannot see the affinity the test runs under (`taskset`), so a narrower one fails the test,
/// saying so, rather than letting it pass without having run.
#[test]
#[cfg_attr(not(has_3_cpus), ignore = "needs 3 CPUs: VTQ-DSS's members differ in width on three CPUs or more")]
fn a_policy_wake_up_is_a_step() {
    let mine = cpumgr_daemon::enforce::affinity(0).unwrap();
    assert!(mine.len() >= 3, "the build found 3 CPUs, this run's affinity has {}: run it without taskset", mine.len());
    let three: CpuSet = mine.iter().take(3).collect();
    let settings =
        Settings { policy: "vtq-dss".into(), quantum: Duration::from_secs(2), cpus: Some(three), ..Default::default() };
    let live = Live::start(&settings);
    let kids = Sleepers::spawn(2);
    let (wide, _w) = live.register(kids.pids()[0], 2);
    let (narrow, _n) = live.register(kids.pids()[1], 1);
    let state = |s: &cpumgr_proto::msg::StatusReport, id| support::state_of(s, id).0;
    live.wait_status("the wide program stopped at its own quantum's end, the narrow one running", |s| {
        state(s, wide) != "running" && state(s, narrow) == "running"
    });
}

/// A boundary step walks `/proc` for the programs that run, not for those the manager holds
/// stopped (their samples from before the stop stand): on a node of many programs and few CPUs,
/// most are stopped, and the walk's cost follows the CPUs.
#[test]
fn a_boundary_walk_leaves_out_the_programs_held_stopped() {
    use cpumgr_daemon::procfs::{self, Target};
    use cpumgr_daemon::State;

    let is_stopped = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|t| procfs::parse_stat(&t)).map(|s| s.state)
            == Some('T')
    };

    let settings = Settings { cpus: Some(CpuSet::parse("0").unwrap()), ..Default::default() };
    let mut state = State::new(&settings).unwrap();
    let kids = Sleepers::spawn(3);
    support::register_all(&mut state, &kids);
    // The first survey reads every program (none sampled yet); its step stops all but one.
    assert_eq!(state.survey(Some(std::time::Instant::now())).targets().len(), 3);
    state.step(true);
    // A stop is a signal: the kernel stops the process when it is next scheduled.
    let mut stopped = Vec::new();
    support::wait_for("two of the three stopped", || {
        stopped = kids.pids().into_iter().filter(|&p| is_stopped(p)).collect();
        stopped.len() == 2
    });
    let walked: Vec<Target> = state.survey(Some(std::time::Instant::now())).targets().to_vec();
    assert_eq!(walked.len(), 1, "{walked:?}");
    assert!(!stopped.contains(&walked[0].leader()), "walked a stopped program: {walked:?}");
    state.release_all();
}

/// Between two listings of `/proc` a boundary walk reads only what each program's last sample
/// had; a process a running program starts in a session of its own (as MPI launchers' ranks do)
/// is found by the next listing, within a sweep (`procfs::SWEEP`), and from then on its CPU time
/// is the program's. The program's leader sleeps: its CPU time is the stray's alone.
#[test]
fn a_stray_started_between_listings_is_found_and_its_cpu_time_counted() {
    use std::process::Stdio;

    /// Kills the process whose pid the stray wrote, on drop.
    struct KillPid(std::path::PathBuf);
    impl Drop for KillPid {
        fn drop(&mut self) {
            if let Some(pid) = std::fs::read_to_string(&self.0).ok().and_then(|t| t.trim().parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
            }
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("stray.pid");
    let _stray = KillPid(pidfile.clone());
    let settings = Settings {
        quantum: Duration::from_millis(50),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    let script =
        format!("read x; setsid timeout 120 sh -c 'echo $$ > {}; while :; do :; done' & wait", pidfile.display());
    let mut leader =
        Busy(Command::new("sh").args(["-c", &script]).process_group(0).stdin(Stdio::piped()).spawn().unwrap());
    let (id, _slot) = live.register(leader.0.id() as i32, 1);
    live.wait_status("the program running", |s| support::state_of(s, id).0 == "running");
    let cpu_ms = |live: &Live| live.status().programs.iter().find(|p| p.id == id).map_or(0, |p| p.cpu_ms);
    let idle = cpu_ms(&live);
    writeln!(leader.0.stdin.as_mut().unwrap()).unwrap();
    support::wait_for("the stray's pid", || pidfile.exists());
    support::wait_for("the stray's CPU time counted as the program's", || cpu_ms(&live) >= idle + 100);
}
