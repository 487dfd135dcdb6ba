//! Making decisions true on real processes: CPU affinity of every thread
//! (`sched_setaffinity`), and stopping or continuing a program (`SIGSTOP`/`SIGCONT` to its process
//! group). [`release`] undoes both, and is what the manager runs for every program when it exits,
//! and what `cpumgr run` runs as a supervisor when its manager disappears.

use std::io;

use cpumgr_core::CpuSet;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::procfs::{self, Target};

/// The enforcement backend's name, as `status` reports it.
pub const BACKEND: &str = "affinity";

/// Sets the CPU affinity of one thread. A thread that is gone is not an error.
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let limit = 8 * std::mem::size_of::<libc::cpu_set_t>() as u32;
    for c in cpus.iter().filter(|&c| c < limit) {
        // SAFETY: c is below the set's capacity.
        unsafe { libc::CPU_SET(c as usize, &mut mask) };
    }
    // SAFETY: the mask is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mask) };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(e)
    }
}

/// The CPU affinity of a thread or process (0: the caller).
pub fn affinity(tid: i32) -> io::Result<CpuSet> {
    // SAFETY: as in set_affinity.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the mask is writable and of the size passed.
    if unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let limit = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: c is below the set's capacity.
    Ok((0..limit).filter(|&c| unsafe { libc::CPU_ISSET(c, &mask) }).map(|c| c as u32).collect())
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

/// Stops a program (every process of its group).
pub fn stop(target: Target) -> io::Result<()> {
    signal(target, Signal::SIGSTOP)
}

/// Continues a program.
pub fn cont(target: Target) -> io::Result<()> {
    signal(target, Signal::SIGCONT)
}

/// Leaves a program as if no manager had touched it: continued, and every thread's affinity set
/// back to `wide`. Safe to call on a program that is gone or was never touched.
pub fn release(target: Target, wide: &CpuSet) {
    if let Err(e) = cont(target) {
        tracing::warn!(?target, "cannot continue: {e}");
    }
    if let Some(s) = procfs::scan(&[target]).remove(&target) {
        let failed = pin(&s.tids, wide);
        if failed > 0 {
            tracing::warn!(?target, failed, "cannot widen the affinity of some threads");
        }
    }
}
