//! Making decisions true on real processes: confining a program to its CPUs through a
//! [`Backend`] (the cgroup cpuset tree when the manager may write it, else CPU affinity of every
//! thread, `sched_setaffinity`; affinity too for a program in a cgroup someone else made, which
//! the cpuset tree never takes it out of: [`crate::cgroup_owner`]), and stopping or continuing a program (`SIGSTOP`/`SIGCONT` to its
//! process group). [`release`] undoes both, and is what the manager runs for every program when it
//! exits, and what `cpumgr run` runs as a supervisor when its manager disappears.

use std::io;
use std::path::{Path, PathBuf};

use cpumgr_core::CpuSet;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::affinity;
use crate::cpuset::{self, Cpusets};
use crate::entry::Entry;
use crate::own_masks::OwnMasks;
use crate::procfs::{self, Stray, Target};

/// Which backend the manager asks for (`backend` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// The cpuset tree when it can be written, else affinity.
    #[default]
    Auto,
    /// Per-thread CPU affinity only.
    Affinity,
    /// The cpuset tree, or refuse to start.
    Cpuset,
}

impl std::str::FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> Result<Choice, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "affinity" => Ok(Choice::Affinity),
            "cpuset" => Ok(Choice::Cpuset),
            other => Err(format!("backend {other:?} is not one of auto, affinity, cpuset")),
        }
    }
}

/// How a program is confined to its CPUs.
#[derive(Debug)]
pub enum Backend {
    /// Every thread's affinity, re-applied every quantum to catch new threads.
    Affinity,
    /// The program's processes in a cgroup of the manager's cpuset tree.
    Cpuset(Cpusets),
}

impl Backend {
    /// The backend `choice` gives: with [`Choice::Auto`], affinity when the cpuset tree cannot
    /// be written (logged, with why).
    pub fn new(choice: Choice) -> Result<Backend, String> {
        match choice {
            Choice::Affinity => Ok(Backend::Affinity),
            Choice::Cpuset => Cpusets::open().map(Backend::Cpuset).map_err(|e| format!("cpuset backend: {e}")),
            Choice::Auto => Ok(match Cpusets::open() {
                Ok(c) => Backend::Cpuset(c),
                Err(e) => {
                    tracing::info!("cpuset backend unavailable ({e}); using affinity");
                    Backend::Affinity
                }
            }),
        }
    }

    /// `affinity`, `cpuset-v1` or `cpuset-v2`, as `status` reports it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Affinity => "affinity",
            Backend::Cpuset(c) => c.name(),
        }
    }

    /// The cgroup above the manager's cpuset tree (where a process leaves it to); `None` with
    /// affinity.
    pub fn cgroup_exit(&self) -> Option<PathBuf> {
        match self {
            Backend::Affinity => None,
            Backend::Cpuset(c) => c.dir().parent().map(Path::to_path_buf),
        }
    }

    /// How program `id` is confined when it is: `cpuset`, or `affinity` (the affinity backend, or
    /// a program in a cgroup someone else made), as `status` reports it.
    pub fn confined_by(&self, id: cpumgr_core::ProgramId) -> &'static str {
        match self {
            Backend::Cpuset(c) if !c.is_foreign(id) => "cpuset",
            _ => "affinity",
        }
    }

    /// Confines program `e` (its processes as last sampled) to `cpus`; false when the system
    /// refused part of it. The affinity of each of its processes the manager has not confined
    /// before is read first, for [`Backend::release`] to give back ([`OwnMasks`]), and widens
    /// the program's [`Entry::original`].
    pub fn confine(&mut self, e: &mut Entry, cpus: &CpuSet) -> bool {
        e.masks.record(&e.sample, &mut e.original);
        match self {
            Backend::Affinity => pin(&e.sample.tids, cpus) == 0,
            Backend::Cpuset(c) => match c.apply(e.id, e.pid, &e.sample.pids, cpus) {
                Ok(true) => true,
                Ok(false) => pin(&e.sample.tids, cpus) == 0,
                Err(err) => {
                    tracing::warn!(id = e.id.0, "cpuset: {err}");
                    false
                }
            },
        }
    }

    /// Leaves program `e` as if no manager had touched it: out of any cgroup of the manager's,
    /// continued, each process's affinity back to its own ([`OwnMasks`]) and every other
    /// thread's to [`Entry::original`]. A program the manager never confined (it only waited,
    /// stopped, or was still in its start-up grace) is only continued, with its strays, its
    /// processes outside its group at its last scan: it needs no search for its threads, a walk
    /// of all of `/proc` that would be most of an unregistration's cost under a churn of short
    /// registrations.
    pub fn release(&mut self, e: &Entry) {
        if let Backend::Cpuset(c) = self {
            c.release(e.id);
        }
        let strays = e.strays();
        if e.applied.is_some() {
            release_each(e.target, &e.original, &e.masks, &strays);
        } else if let Err(err) = cont(e.target, &strays) {
            tracing::warn!(target = ?e.target, "cannot continue: {err}");
        }
    }
}

/// Sets the CPU affinity of one thread ([`affinity::set`]). A thread that is gone is not an error.
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    match affinity::set(tid, cpus) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r,
    }
}

/// The CPU affinity of a thread or process (0: the caller): [`affinity::get`].
pub fn affinity(tid: i32) -> io::Result<CpuSet> {
    affinity::get(tid)
}

/// Sets the affinity of every thread in `tids`; returns how many failed (other than being gone).
pub fn pin(tids: &[i32], cpus: &CpuSet) -> usize {
    tids.iter().filter(|&&t| set_affinity(t, cpus).is_err()).count()
}

/// Sends `sig` to a program: its whole group, or its one process.
pub fn signal(target: Target, sig: Signal) -> io::Result<()> {
    let r = match target {
        Target::Group(g) => killpg(Pid::from_raw(g), sig),
        Target::Process(p) => kill(Pid::from_raw(p), sig),
    };
    match r {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sends `sig` to a program: its group (or its one process), and `strays`, its processes outside
/// the group (see [`procfs::Sample::strays`]).
pub fn signal_all(target: Target, strays: &[Stray], sig: Signal) -> io::Result<()> {
    let r = signal(target, sig);
    for s in strays.iter().filter(|s| s.alive()) {
        match kill(Pid::from_raw(s.pid), sig) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => tracing::warn!(pid = s.pid, "cannot signal a process of {target:?}: {e}"),
        }
    }
    r
}

/// Stops a program: every process of its group, and its `strays`.
pub fn stop(target: Target, strays: &[Stray]) -> io::Result<()> {
    signal_all(target, strays, Signal::SIGSTOP)
}

/// Continues a program: every process of its group, and its `strays`.
pub fn cont(target: Target, strays: &[Stray]) -> io::Result<()> {
    signal_all(target, strays, Signal::SIGCONT)
}

/// Leaves a program as if no manager had touched it: continued, out of any manager's cpuset
/// cgroup (one a manager that died left it in), and every thread's affinity set back to `wide`:
/// its group, the descendants a fresh scan finds outside it, and `known`, the strays it had at
/// its last scan (orphans whose launcher died). Safe to call on a program that is gone or was
/// never touched.
pub fn release(target: Target, wide: &CpuSet, known: &[Stray]) {
    release_each(target, wide, &OwnMasks::default(), known);
}

/// [`release`], each process of `own` back to its own mask ([`OwnMasks`]) and every other thread
/// to `wide`.
pub fn release_each(target: Target, wide: &CpuSet, own: &OwnMasks, known: &[Stray]) {
    let mut s = procfs::scan(&[target]).remove(&target).unwrap_or_default();
    procfs::add_known(&mut s, known);
    if let Err(e) = cont(target, &s.strays) {
        tracing::warn!(?target, "cannot continue: {e}");
    }
    for &pid in &s.pids {
        cpuset::escape(pid);
    }
    let mut failed = 0;
    let mut tids = s.tids.as_slice();
    for (&pid, &n) in s.pids.iter().zip(&s.threads) {
        let (its, rest) = tids.split_at(n as usize);
        tids = rest;
        failed += pin(its, own.of(pid).unwrap_or(wide));
    }
    if failed > 0 {
        tracing::warn!(?target, failed, "cannot widen the affinity of some threads");
    }
}
