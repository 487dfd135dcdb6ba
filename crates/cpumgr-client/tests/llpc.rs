//! LLPC mode on this machine: the team it gives reads the real `/proc/loadavg` and this process's
//! allowed CPUs, and stays within the cap.

use cpumgr_client::client::allowed_cpus;
use cpumgr_client::llpc::Llpc;

#[test]
fn this_machine_gives_a_team_within_bounds() {
    let mut l = Llpc::new(allowed_cpus());
    let t = l.team(4);
    assert!((1..=4).contains(&t), "{t}");
}
