//! A program started under `taskset` is bound by it: `cpumgr run` under `taskset -c 1`, beside
//! a program allowed both CPUs, is only ever given CPU 1, and when the manager is killed its
//! supervisor gives it back its own affinity (CPU 1), the other's the CPUs it inherited.

mod common;

use std::process::{Command, Stdio};

use common::*;
use cpumgr_core::CpuSet;

#[test]
fn a_program_run_under_taskset_is_only_given_its_cpu_and_gets_it_back_from_its_supervisor() {
    let one = CpuSet::parse("1").unwrap();
    let mut d = Daemon::start_with("equipartition", &["--backend", "affinity"]);
    // Registered first, the bound one would be placed first, on CPU 0, were its binding not
    // known.
    let run = Command::new("taskset")
        .args(["-c", "1", BIN, "run", "--name", "narrow", "--", "sh", "-c", BUSY])
        .env("CPUMGR_SOCKET", &d.socket)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    d.runs.push(run);
    let mut narrow = 0;
    wait_for("narrow to register", || {
        narrow = d.status().programs.iter().find(|p| p.name == "narrow").map_or(0, |p| p.pid);
        narrow != 0
    });
    let wide = d.run("wide", BUSY);
    wait_for("CPU 1 to the bound program, CPU 0 to the other", || {
        allowed(narrow) == Some(one.clone()) && allowed(wide) == Some(CpuSet::parse("0").unwrap())
    });
    for _ in 0..20 {
        let s = d.status();
        let program = |name: &str| s.programs.iter().find(|p| p.name == name).unwrap().clone();
        let (n, w) = (program("narrow"), program("wide"));
        assert!(n.cpus.is_subset(&one), "{n:?}");
        assert_eq!((n.allowed, w.allowed), (Some(one.clone()), None));
        assert!(allowed(narrow).is_some_and(|a| a.is_subset(&one)));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    d.child.kill().unwrap(); // SIGKILL: the supervisors release their programs
    d.child.wait().unwrap();
    wait_for("both released by their supervisors", || {
        allowed(narrow) == Some(one.clone()) && allowed(wide) == Some(inherited()) && !stopped(narrow) && !stopped(wide)
    });
}
