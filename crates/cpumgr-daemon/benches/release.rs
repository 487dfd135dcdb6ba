//! Latency from a CPU's release to its use by a waiting program, end to end on real processes.
//!
//! One managed CPU and a 5 s quantum. Program A (a sleeping process) holds the CPU; program B, a
//! process that spins reading `CLOCK_MONOTONIC` and notes in a shared page when it resumes after a
//! gap, waits stopped. The bench, as A's runtime would, lowers A's request to 0 in A's slot and
//! rings A's doorbell at time t0, then sleeps until B has run, and reports:
//! - *step*: t0 to the start of the scheduler step that gave B the CPU (the manager's heartbeat in
//!   B's slot; publication follows within the step);
//! - *running*: t0 to B's first instruction on the CPU (the manager stopped A, confined and
//!   continued B), B's own clock;
//! - *queued*: of that, how long B, continued, waited in the kernel's run queue for the CPU
//!   (`/proc/PID/schedstat`, read by B as it resumes): the OS's share, not the manager's.
//!
//! Then A asks for its CPU again, and the next round starts once B is stopped. Prints the
//! distribution over the rounds (`CPUMGR_BENCH_ROUNDS`, default 200), with the affinity backend
//! and then the cpuset one where the tree is writable. The bench thread sleeps
//! while it waits, so it does not take a CPU from the manager.
//!
//! `cargo bench -p cpumgr-daemon --bench release`

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_daemon::enforce::Choice;
use cpumgr_daemon::Settings;
use cpumgr_proto::slot::monotonic_ns;
use support::{state_of, Live, Sleepers};

/// Slots of the shared page: B's latest time, and when it last resumed after a gap.
struct Page {
    now: AtomicU64,
    resumed: AtomicU64,
    /// B's run-queue wait (`schedstat`) as it resumed.
    queued_at_resume: AtomicU64,
}

/// A child that spins reading the clock, noting the time in `page` and, after a gap of more than
/// 100 µs (it was stopped, or preempted), the time it resumed; it leads its own process group and
/// is killed with its parent.
fn spinner(page: &'static Page) -> i32 {
    // SAFETY: the bench is single-threaded here (no manager yet), so the child may allocate; it
    // reads the clock and its schedstat and stores to shared memory until it is killed.
    match unsafe { libc::fork() } {
        0 => unsafe {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let mut last = monotonic_ns();
            loop {
                let t = monotonic_ns();
                if t - last > 100_000 {
                    page.queued_at_resume.store(run_queue_ns(0), Ordering::Relaxed);
                    page.resumed.store(t, Ordering::Release);
                }
                page.now.store(t, Ordering::Release);
                last = t;
            }
        },
        pid if pid > 0 => {
            // Both sides set the group, so it is set before the parent registers it.
            unsafe { libc::setpgid(pid, pid) };
            pid
        }
        _ => panic!("fork: {}", std::io::Error::last_os_error()),
    }
}

fn shared_page() -> &'static Page {
    // SAFETY: a fresh zeroed anonymous shared mapping, never unmapped; atomics are valid for any
    // bits.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        &*(p as *const Page)
    }
}

/// B's last time once B has really stopped (a signal lands when the target is next scheduled,
/// which on a loaded machine takes a while): the time it wrote stays put across 5 ms.
fn stopped_time(page: &Page) -> u64 {
    let mut last = page.now.load(Ordering::Acquire);
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = page.now.load(Ordering::Acquire);
        if now == last {
            return now;
        }
        last = now;
    }
}

fn percentiles(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    println!(
        "{name:<10} median {:>7.0} µs   p90 {:>7.0} µs   p99 {:>7.0} µs   max {:>7.0} µs   ({} rounds)",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        v.len()
    );
}

/// The rounds with the manager confining programs through `backend`.
fn measure(backend: Choice, rounds: usize, page: &'static Page, b_pid: i32) {
    let kids = Sleepers::spawn(1);
    let settings = Settings {
        policy: "equipartition".into(),
        quantum: Duration::from_secs(5),
        cpus: Some(CpuSet::parse("0").unwrap()),
        backend,
        ..Default::default()
    };
    let live = Live::start(&settings);
    let (a, a_slot) = live.register(kids.pids()[0], 1);
    let (b, b_slot) = live.register(b_pid, 1);
    let bell = live.doorbell(a);
    let (mut stepped, mut running, mut queued) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        live.wait_status("a running, b stopped", |s| state_of(s, a).0 == "running" && state_of(s, b).0 == "stopped");
        stopped_time(page);
        let before = page.resumed.load(Ordering::Acquire);
        let waited = run_queue_ns(b_pid);
        let t0 = monotonic_ns();
        a_slot.slot().set_request(0, 0, 1);
        bell.ring();
        let ran = loop {
            std::thread::sleep(Duration::from_micros(100));
            let r = page.resumed.load(Ordering::Acquire);
            if r != before {
                break r;
            }
        };
        queued.push(page.queued_at_resume.load(Ordering::Relaxed).saturating_sub(waited));
        let step = b_slot.slot().manager.heartbeat.load(Ordering::Acquire);
        stepped.push(step.saturating_sub(t0));
        running.push(ran.saturating_sub(t0));
        a_slot.slot().set_request(1, 1, 1);
        bell.ring();
    }
    let s = live.status();
    println!("backend {}: release -> use by a waiting program, 1 managed CPU, 5 s quantum, doorbell rung:", s.backend);
    percentiles("step", stepped);
    percentiles("running", running);
    percentiles("queued", queued);
}

/// Nanoseconds process `pid` (0: the caller) has spent runnable but waiting for a CPU
/// (`schedstat`, field 2).
fn run_queue_ns(pid: i32) -> u64 {
    let path = if pid == 0 { "/proc/self/schedstat".to_string() } else { format!("/proc/{pid}/schedstat") };
    std::fs::read_to_string(path).ok().and_then(|t| t.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

fn main() {
    let rounds: usize = std::env::var("CPUMGR_BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let page = shared_page();
    let b_pid = spinner(page);
    for backend in [Choice::Affinity, Choice::Auto] {
        measure(backend, rounds, page, b_pid);
    }
    // SAFETY: our own child.
    unsafe {
        libc::kill(b_pid, libc::SIGKILL);
        libc::waitpid(b_pid, std::ptr::null_mut(), 0);
    }
}
