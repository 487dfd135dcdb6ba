//! `cpumgr daemon --backend`: the confinement backend asked for is the one `status` reports, and a
//! backend that does not exist stops the manager with exit code 2 naming the choices.

mod common;

use common::*;

#[test]
fn the_backend_flag_is_what_status_reports_and_a_bad_one_exits_2() {
    let mut d = Daemon::start_with("equipartition", &["--backend", "affinity"]);
    assert_eq!(d.status().backend, "affinity");
    let (a, b) = (d.run("a", BUSY), d.run("b", BUSY));
    wait_for("one CPU each", || [a, b].iter().all(|&p| allowed(p).is_some_and(|s| s.len() == 1)));
    for p in [a, b] {
        let cgroups = std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap();
        assert!(!cgroups.contains("cpumgr-"), "affinity only, no cgroup of the manager's: {cgroups}");
    }
    let err = daemon_refuses(&["--backend", "cgroups"]);
    assert!(err.contains("--backend cgroups") && err.contains("auto, affinity, cpuset"), "{err}");
}
