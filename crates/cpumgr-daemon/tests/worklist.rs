//! The work-list on real processes: a CPU released through a slot reaches the waiting program
//! when the releasing program rings its doorbell, long before the next quantum boundary, and
//! not before the boundary when it does not ring.

mod support;

use std::time::{Duration, Instant};

use cpumgr_core::CpuSet;
use cpumgr_daemon::Settings;
use support::{state_of, Live, Sleepers};

/// The quantum of these tests: any step seen well before it was not a boundary's. The longest
/// the manager takes (10 s), so that the first boundary does not fall in the test's 300 ms
/// window when starting the manager and two programs takes seconds on a loaded machine (with
/// 5 s it once did, under a parallel build and profiler).
const QUANTUM: Duration = Duration::from_secs(10);

#[test]
fn a_cpu_released_through_the_slot_reaches_the_waiting_program_at_once_when_the_doorbell_rings() {
    let kids = Sleepers::spawn(2);
    let settings = Settings {
        policy: "equipartition".into(),
        quantum: QUANTUM,
        cpus: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    let pids = kids.pids();
    let (a, a_slot) = live.register(pids[0], 1);
    let (b, _b_slot) = live.register(pids[1], 1);
    let bell = live.doorbell(a);
    // Registrations schedule at once: the one CPU goes to the first program, the other waits.
    live.wait_status("a running, b stopped", |s| {
        state_of(s, a) == ("running".into(), 1) && state_of(s, b) == ("stopped".into(), 0)
    });
    // A kicked step waits a few times as long as the last step held the state, so on a loaded
    // machine the registrations' steps may still be coming: count from when they settle.
    let mut steps = live.status().steps;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = live.status().steps;
        if now == steps {
            break;
        }
        steps = now;
    }

    // Released in the slot alone: nothing happens until the boundary, seconds away.
    a_slot.slot().set_request(0, 0, 1);
    std::thread::sleep(Duration::from_millis(300));
    let s = live.status();
    assert_eq!(s.steps, steps, "no step without a ring, well before the boundary: {s:?}");
    assert_eq!(state_of(&s, b), ("stopped".into(), 0), "b still waits for the boundary");

    // The ring makes the manager schedule now: b runs on the released CPU.
    let rang = Instant::now();
    bell.ring();
    let s = live.wait_status("b running on the released CPU", |s| state_of(s, b) == ("running".into(), 1));
    let took = rang.elapsed();
    assert!(took < QUANTUM / 5, "the release took {took:?}, as if it waited for the boundary");
    assert_eq!(s.steps, steps + 1, "exactly one step, the kicked one: {s:?}");
    // a gave its CPU back itself (request 0): it holds none and is not stopped, so that it can
    // ask again.
    assert_eq!(state_of(&s, a), ("waiting".into(), 0));
    assert_eq!(s.programs.iter().find(|p| p.id == b).unwrap().cpus, CpuSet::parse("0").unwrap());
}

/// A kicked step re-fits the programs within the quantum; it does not start the next one. Under
/// gang, with two one-CPU programs on one CPU, rings between boundaries leave the row that runs
/// as it is (were each to turn the rotation, a program that rang at every request change would
/// switch the gang's rows as fast as the manager steps).
#[test]
fn a_kicked_step_does_not_turn_a_time_sharing_rotation() {
    let kids = Sleepers::spawn(2);
    let settings = Settings {
        policy: "gang".into(),
        quantum: QUANTUM,
        cpus: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    let pids = kids.pids();
    let (a, a_slot) = live.register(pids[0], 1);
    let (b, _b_slot) = live.register(pids[1], 1);
    let bell = live.doorbell(a);
    let one_runs = |s: &cpumgr_proto::msg::StatusReport| {
        let (sa, sb) = (state_of(s, a).0, state_of(s, b).0);
        (sa == "running") != (sb == "running")
    };
    let s = live.wait_status("one of the two running", one_runs);
    let running = state_of(&s, a).0 == "running";
    let mut steps = s.steps;
    for _ in 0..3 {
        a_slot.slot().set_request(1, 1, 1);
        bell.ring();
        let s = live.wait_status("the kicked step", |s| s.steps > steps);
        steps = s.steps;
        assert_eq!(state_of(&s, a).0 == "running", running, "the rotation turned at a kicked step: {s:?}");
        assert!(one_runs(&s), "{s:?}");
    }
}
