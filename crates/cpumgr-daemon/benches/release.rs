//! Latency from a CPU's release to its use by a waiting program, end to end on real processes.
//!
//! One managed CPU and a 5 s quantum. Program A (a sleeping process) holds the CPU; program B, a
//! process that spins writing `CLOCK_MONOTONIC` into a shared page, waits stopped. The bench, as
//! A's runtime would, lowers A's request to 0 in A's slot and rings A's doorbell, then times:
//! - *published*: until B's slot shows its CPU (what a cooperative runtime reads);
//! - *running*: until B itself writes a time (the manager stopped A, pinned and continued B).
//!
//! Then A asks for its CPU again, and the next round starts once B is stopped. Prints the
//! distribution over the rounds (`CPUMGR_BENCH_ROUNDS`, default 200).
//!
//! `cargo bench -p cpumgr-daemon --bench release`

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_daemon::Settings;
use cpumgr_proto::slot::monotonic_ns;
use support::{state_of, Live, Sleepers};

/// A child that spins writing the time into `page`, leading its own process group, killed with
/// its parent.
fn spinner(page: &'static AtomicU64) -> i32 {
    // SAFETY: the bench is single-threaded here (no manager yet); the child only reads the vDSO
    // clock and stores to shared memory until it is killed.
    match unsafe { libc::fork() } {
        0 => unsafe {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            loop {
                page.store(monotonic_ns(), Ordering::Release);
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

fn shared_page() -> &'static AtomicU64 {
    // SAFETY: a fresh anonymous shared mapping, never unmapped; AtomicU64 is valid for any bits.
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
        &*(p as *const AtomicU64)
    }
}

/// B's last time once B has really stopped (a signal lands when the target is next scheduled,
/// which on a loaded machine takes a while): the time it wrote stays put across 5 ms.
fn stopped_time(page: &AtomicU64) -> u64 {
    let mut last = page.load(Ordering::Acquire);
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = page.load(Ordering::Acquire);
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

fn main() {
    let rounds: usize = std::env::var("CPUMGR_BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let page = shared_page();
    let b_pid = spinner(page);
    let kids = Sleepers::spawn(1);
    let settings = Settings {
        policy: "equipartition".into(),
        quantum: Duration::from_secs(5),
        cpus: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    let (a, a_slot) = live.register(kids.pids()[0], 1);
    let (b, b_slot) = live.register(b_pid, 1);
    let bell = live.doorbell(a);
    let (mut published, mut running) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        live.wait_status("a running, b stopped", |s| state_of(s, a).0 == "running" && state_of(s, b).0 == "stopped");
        let frozen = stopped_time(page);
        let t0 = monotonic_ns();
        a_slot.slot().set_request(0, 0, 1);
        bell.ring();
        let mut seen_pub = None;
        let ran = loop {
            if seen_pub.is_none() && b_slot.slot().allocated_count() == 1 {
                seen_pub = Some(monotonic_ns());
            }
            let t = page.load(Ordering::Acquire);
            if t != frozen {
                break t;
            }
            std::hint::spin_loop();
        };
        let seen_pub = seen_pub.unwrap_or(ran).min(ran);
        published.push(seen_pub.saturating_sub(t0));
        running.push(ran.saturating_sub(t0));
        a_slot.slot().set_request(1, 1, 1);
        bell.ring();
    }
    println!("release -> use by a waiting program, 1 managed CPU, 5 s quantum, doorbell rung:");
    percentiles("published", published);
    percentiles("running", running);
    drop(live);
    // SAFETY: our own child.
    unsafe {
        libc::kill(b_pid, libc::SIGKILL);
        libc::waitpid(b_pid, std::ptr::null_mut(), 0);
    }
}
