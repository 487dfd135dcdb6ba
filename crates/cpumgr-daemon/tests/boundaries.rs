//! Quantum boundaries under a storm of requests: every request kicks a step, and kicked steps
//! reuse the last walk of `/proc`; only the boundary steps walk it, so they must keep coming
//! every quantum however many kicked steps run between them (each kicked step used to push the
//! next boundary a quantum further, and a storm left every program's `/proc` sample frozen).

mod support;

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
                let req = Request::SetRequest { id: quiet_id, now: 1 + (sent % 2) as u32, min: None, max: None };
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
