//! The lease a step publishes in every slot: three quanta ahead, and never less than
//! [`LEASE_FLOOR`], so that a short quantum does not send cooperative runtimes back to their own
//! teams whenever the manager is held up for a moment.

mod support;

use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_daemon::state::LEASE_FLOOR;
use cpumgr_daemon::Settings;
use cpumgr_proto::slot::monotonic_ns;
use support::{wait_for, Live, Sleepers};

#[test]
fn a_short_quantum_still_leases_the_floor() {
    let quantum = Duration::from_millis(50);
    assert!(3 * quantum < LEASE_FLOOR / 2, "the test needs three quanta well under the floor");
    let kids = Sleepers::spawn(1);
    let settings = Settings {
        policy: "equipartition".into(),
        quantum,
        cpus: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    let live = Live::start(&settings);
    let (_, slot) = live.register(kids.pids()[0], 1);
    let floor = LEASE_FLOOR.as_nanos() as u64;
    // A lease is the time of its step plus the floor: never further than the floor from now, and
    // right after a step (they come every 50 ms) well beyond three quanta.
    wait_for("a lease beyond three quanta", || {
        let (lease, now) = (slot.slot().lease_until(), monotonic_ns());
        assert!(lease <= now + floor, "a lease of {} ms from now", (lease - now) / 1_000_000);
        lease > now + (3 * quantum).as_nanos() as u64 + floor / 4
    });
}
