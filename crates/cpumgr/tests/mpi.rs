//! Real MPI jobs (`mpiexec -n 2` of `kernels/halo.c`, built with `mpicc`) under plain
//! `cpumgr run`: recognised as rigid teams of their ranks without `--rigid`, found whole although
//! the launcher's proxy and ranks make sessions of their own, co-scheduled (stopped and continued
//! together, every rank), and left running and unpinned when the manager is killed.
//!
//! Needs an MPI implementation (`mpicc`, `mpiexec`; CI installs Debian's MPICH): elsewhere the
//! tests are ignored, and the runner says so.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::*;

/// Held by each test: the tests find a job's ranks by their binary, which both tests run.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `halo` built with `mpicc` once for this test binary.
fn halo() -> PathBuf {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, bin) = BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("halo");
        let src = cpumgr_kernels::source_dir().join("halo.c");
        let out = Command::new("mpicc").args(["-O2", "-o"]).arg(&bin).arg(&src).output().expect("mpicc starts");
        assert!(out.status.success(), "mpicc failed: {}", String::from_utf8_lossy(&out.stderr));
        (dir, bin)
    });
    bin.clone()
}

/// The processes running `bin` (the job's ranks).
fn ranks(bin: &Path) -> Vec<i32> {
    let want = bin.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).next().is_some_and(|a| a == want.as_bytes()))
        })
        .filter(|&p| !gone(p))
        .collect()
}

#[test]
#[cfg_attr(not(has_mpi), ignore = "needs MPI: mpicc and mpiexec (apt-get install mpich libmpich-dev)")]
fn an_mpi_job_under_cpumgr_run_gives_the_plain_result() {
    let _serial = one_at_a_time();
    let bin = halo();
    let plain = Command::new("mpiexec").args(["-n", "2"]).arg(&bin).args(["-steps", "2000"]).output().unwrap();
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let d = Daemon::start("equipartition");
    let managed = d.cpumgr(&["run", "--", "mpiexec", "-n", "2"]).arg(&bin).args(["-steps", "2000"]).output().unwrap();
    assert!(managed.status.success(), "{}", String::from_utf8_lossy(&managed.stderr));
    let checksum = |o: &std::process::Output| {
        let line = String::from_utf8_lossy(&o.stdout).into_owned();
        line.split_whitespace().find(|f| f.starts_with("checksum=")).map(String::from)
    };
    assert!(checksum(&plain).is_some());
    assert_eq!(checksum(&managed), checksum(&plain));
}

#[test]
#[cfg_attr(not(has_mpi), ignore = "needs MPI: mpicc and mpiexec (apt-get install mpich libmpich-dev)")]
fn an_mpi_job_is_a_rigid_team_stopped_and_continued_whole_and_released_by_a_killed_manager() {
    let _serial = one_at_a_time();
    let bin = halo();
    let mut d = Daemon::start("equipartition");
    let job = d
        .cpumgr(&["run", "--name", "halo", "--", "mpiexec", "-n", "2"])
        .arg(&bin)
        .args(["-steps", "1000000000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    d.runs.push(job);
    wait_for("the job to register as a rigid team of its 2 ranks", || {
        d.status().programs.iter().any(|p| p.name == "halo" && p.request == 2)
    });
    let mut pids = Vec::new();
    wait_for("its 2 ranks to start", || {
        pids = ranks(&bin);
        pids.len() == 2
    });
    // Beside a busy program, equipartition means one CPU each: the job's two polling ranks are
    // run as a gang in turns, every rank stopped while the busy program runs.
    d.run("busy", BUSY);
    let state =
        |d: &Daemon| d.status().programs.into_iter().find(|p| p.name == "halo").map(|p| (p.state, p.cpus.len()));
    wait_for_or(
        "a quantum with the job stopped, both ranks with it",
        || state(&d).is_some_and(|(s, _)| s == "stopped") && pids.iter().all(|&p| stopped(p)),
        || {
            let ranks: Vec<(i32, bool)> = pids.iter().map(|&p| (p, stopped(p))).collect();
            format!("{:?}\n{ranks:?}", d.status().programs)
        },
    );
    wait_for("a quantum with the job running whole on both CPUs", || {
        state(&d) == Some(("running".into(), 2))
            && pids.iter().all(|&p| !stopped(p) && allowed(p).is_some_and(|c| c.len() == 2))
    });
    // Killed, the manager leaves no rank stopped or pinned (`cpumgr run` releases its job).
    let _ = d.child.kill();
    let _ = d.child.wait();
    let wide = inherited();
    wait_for("every rank continued and unpinned", || {
        pids.iter().all(|&p| !stopped(p) && thread_cpus(p).iter().all(|c| *c == wide))
    });
    // Its ranks poll until the job ends: end them now, not after this test, so that no test that
    // follows meets them on its CPUs.
    for &p in &pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::SIGKILL);
    }
    wait_for("the ranks gone", || pids.iter().all(|&p| gone(p)));
}
