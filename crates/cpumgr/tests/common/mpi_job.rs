//! Real MPI jobs under plain `cpumgr run`, the same checks for each MPI implementation: a job of
//! `kernels/halo.c` (2 ranks, built with the implementation's own `mpicc`) gives the plain
//! result, registers as a rigid team of its ranks without `--rigid`, is found whole (the
//! launcher's ranks make process groups or sessions of their own), stopped and continued whole,
//! and left running and unpinned when the manager is killed. `tests/mpi.rs` runs them with the
//! default MPI (`mpicc`, `mpiexec`), `tests/openmpi.rs` with Debian's Open MPI beside it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::common::*;

/// An MPI implementation's commands, and what its jobs need and do.
pub struct Mpi {
    /// Its compiler wrapper.
    pub mpicc: &'static str,
    /// Its launcher, which `cpumgr run` recognises by name.
    pub launcher: &'static str,
    /// The launcher's flag for the rank count.
    pub ranks_flag: &'static str,
    /// Variables the launcher needs in its environment (Open MPI refuses root without two).
    pub env: &'static [(&'static str, &'static str)],
    /// Whether the launcher binds each rank to a CPU of its own inside the CPUs it is given
    /// (Open MPI binds 2 ranks to a core each by default; MPICH leaves them unbound).
    pub binds_ranks: bool,
    /// `halo` built with `mpicc`, once for the test binary.
    pub built: OnceLock<(tempfile::TempDir, PathBuf)>,
    /// Held by each test: the tests find a job's ranks by their binary, which every test runs.
    pub serial: Mutex<()>,
}

impl Mpi {
    /// Serialises the tests of one binary.
    pub fn one_at_a_time(&self) -> MutexGuard<'_, ()> {
        self.serial.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `halo` built with this implementation's `mpicc`, into a directory of its own.
    pub fn halo(&self) -> &Path {
        let (_, bin) = self.built.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let bin = dir.path().join("halo");
            let src = cpumgr_kernels::source_dir().join("halo.c");
            let out = Command::new(self.mpicc).args(["-O2", "-o"]).arg(&bin).arg(&src).output();
            let out = out.unwrap_or_else(|e| panic!("{} does not start: {e}", self.mpicc));
            assert!(out.status.success(), "{} failed: {}", self.mpicc, String::from_utf8_lossy(&out.stderr));
            (dir, bin)
        });
        bin
    }

    /// `LAUNCHER FLAG 2 halo ARGS` as a command line's words.
    fn job(&self, args: &[&str]) -> Vec<String> {
        let mut words: Vec<String> = [self.launcher, self.ranks_flag, "2"].map(String::from).into();
        words.push(self.halo().to_string_lossy().into_owned());
        words.extend(args.iter().map(|a| a.to_string()));
        words
    }

    /// `cpumgr run --name halo -- JOB ARGS` aimed at `d`, with the launcher's environment.
    fn managed(&self, d: &Daemon, args: &[&str]) -> Command {
        let mut cmd = d.cpumgr(&["run", "--name", "halo", "--"]);
        cmd.args(self.job(args)).envs(self.env.iter().copied());
        cmd
    }
}

/// The processes running `bin` (a job's ranks).
pub fn ranks(bin: &Path) -> Vec<i32> {
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

/// A 2000-step job run plain and under `cpumgr run` prints the same checksum.
pub fn gives_the_plain_result(mpi: &Mpi) {
    let _serial = mpi.one_at_a_time();
    let words = mpi.job(&["-steps", "2000"]);
    let plain = Command::new(&words[0]).args(&words[1..]).envs(mpi.env.iter().copied()).output().unwrap();
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let d = Daemon::start("equipartition");
    let managed = mpi.managed(&d, &["-steps", "2000"]).output().unwrap();
    assert!(managed.status.success(), "{}", String::from_utf8_lossy(&managed.stderr));
    let checksum = |o: &Output| {
        let line = String::from_utf8_lossy(&o.stdout).into_owned();
        line.split_whitespace().find(|f| f.starts_with("checksum=")).map(String::from)
    };
    assert!(checksum(&plain).is_some(), "{}", String::from_utf8_lossy(&plain.stdout));
    assert_eq!(checksum(&managed), checksum(&plain));
}

/// A job that polls for good registers as a rigid team of 2; beside a busy program it is stopped
/// and continued whole, every rank; a killed manager leaves no rank stopped or pinned.
pub fn is_a_rigid_team_stopped_and_continued_whole_and_released_by_a_killed_manager(mpi: &Mpi) {
    let _serial = mpi.one_at_a_time();
    let bin = mpi.halo().to_path_buf();
    let mut d = Daemon::start("equipartition");
    let job = mpi.managed(&d, &["-steps", "1000000000"]).stdout(Stdio::null()).spawn().unwrap();
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
    // Running whole: every rank on both CPUs, or, where the launcher binds its ranks, on a CPU
    // of its own of the two.
    let whole = |pids: &[i32]| {
        let cpus: Vec<_> = pids.iter().filter_map(|&p| allowed(p)).collect();
        let on_both = cpus.iter().all(|c| c.len() == 2);
        let spread = cpus.iter().all(|c| c.len() == 1) && cpus.first() != cpus.last();
        cpus.len() == pids.len() && (on_both || (mpi.binds_ranks && spread))
    };
    wait_for_or(
        "a quantum with the job running whole on both CPUs",
        || state(&d) == Some(("running".into(), 2)) && pids.iter().all(|&p| !stopped(p)) && whole(&pids),
        || {
            let ranks: Vec<_> = pids.iter().map(|&p| (p, stopped(p), allowed(p))).collect();
            format!("{:?}\n{ranks:?}", d.status().programs)
        },
    );
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
