//! Each process's own affinity, kept from the first time the manager confines it, so that a
//! released program gets every process's own CPUs back.

use std::collections::HashMap;

use cpumgr_core::CpuSet;

use crate::affinity;
use crate::procfs::{self, Stray};

/// Each process's own affinity, read the first time the manager confines it, to give back when
/// the program is released: a job step that Slurm binds task by task (rank 0 on CPU 0, rank 1 on
/// CPU 1) gets each task's CPUs back, not one mask for all. A process that started after the
/// program was first confined inherited its mask from a confined parent, so it has none of its
/// own and gets the program's [`crate::entry::Entry::original`].
#[derive(Debug, Default)]
pub struct OwnMasks {
    /// When the manager first confined the program, clock ticks after boot (the clock of a
    /// process's start time in `/proc`).
    since: Option<u64>,
    /// Per pid, the process's start time and its own mask (`None`: it has none).
    known: HashMap<i32, (u64, Option<CpuSet>)>,
}

impl OwnMasks {
    /// Reads the masks of the processes of `sample` not seen before, at a confinement: every
    /// process at the program's first, afterwards those that started before it (found late:
    /// a first look at a program reads its leader alone). Each mask read is added to `original`.
    pub fn record(&mut self, sample: &procfs::Sample, original: &mut CpuSet) {
        let first = self.since.is_none();
        let since = *self.since.get_or_insert_with(boot_ticks);
        for &pid in &sample.pids {
            if self.known.contains_key(&pid) {
                continue;
            }
            let Some(start) = procfs::start_of(pid) else { continue };
            let own = (first || start < since).then(|| affinity::get(pid).ok()).flatten();
            if let Some(mask) = &own {
                original.union_with(mask);
            }
            self.known.insert(pid, (start, own));
        }
        // A long-lived program that starts many short processes (a build) forgets those gone.
        if !sample.leaders_only && self.known.len() > 2 * sample.pids.len() + 64 {
            self.known.retain(|&pid, &mut (start, _)| sample.pids.contains(&pid) || Stray { pid, start }.alive());
        }
    }

    /// The own mask of process `pid`, if it is still the process whose mask was read.
    pub fn of(&self, pid: i32) -> Option<&CpuSet> {
        let (start, own) = self.known.get(&pid)?;
        own.as_ref().filter(|_| Stray { pid, start: *start }.alive())
    }
}

/// Clock ticks since boot now (`CLOCK_BOOTTIME`, the clock of `/proc`'s start times).
fn boot_ticks() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_BOOTTIME exists on every kernel this runs on.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    let ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
    (ns * procfs::ticks_per_sec() as u128 / 1_000_000_000) as u64
}
