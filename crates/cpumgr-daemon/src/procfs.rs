//! What the manager reads from `/proc` and does to threads: the processes of a program's process
//! group, their threads and how many are runnable, their CPU time, and CPU affinity.

use std::fs;

use cpumgr_core::CpuSet;

/// The fields of `/proc/PID/stat` the manager uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// One-letter state: R running, S sleeping, D disk, T stopped, Z zombie, ...
    pub state: char,
    /// Process group.
    pub pgrp: i32,
    /// User + system time in clock ticks.
    pub ticks: u64,
}

/// Parses a `stat` line (the command name may hold spaces and parentheses).
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat { state: f.first()?.chars().next()?, pgrp: f.get(2)?.parse().ok()?, ticks: f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()? })
}

/// The stat of a process or thread (`/proc/PID/stat` or `/proc/PID/task/TID/stat`).
pub fn stat(path: &str) -> Option<Stat> {
    parse_stat(&fs::read_to_string(path).ok()?)
}

/// Whether the process exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    stat(&format!("/proc/{pid}/stat")).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// Every live process in process group `pgrp`.
pub fn group_members(pgrp: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| stat(&format!("/proc/{pid}/stat")).is_some_and(|s| s.pgrp == pgrp && s.state != 'Z'))
        .collect()
}

/// The thread ids of a process.
pub fn threads(pid: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).collect()
}

/// What the manager sees of a process group in one sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSample {
    /// Threads alive.
    pub threads: u32,
    /// Threads that used CPU time since the previous sample (`previous`): the team actually at
    /// work. A spinning team squeezed onto too few CPUs still shows every thread here, even
    /// when its threads are caught sleeping between spins.
    pub active: u32,
    /// CPU ticks of the group's processes.
    pub ticks: u64,
    /// Per thread id, its CPU ticks (the next sample's `previous`).
    pub per_thread: std::collections::HashMap<i32, u64>,
}

/// Samples a process group's threads against the previous sample's per-thread ticks.
pub fn sample_group(pids: &[i32], previous: &std::collections::HashMap<i32, u64>) -> GroupSample {
    let mut s = GroupSample::default();
    for &pid in pids {
        if let Some(st) = stat(&format!("/proc/{pid}/stat")) {
            s.ticks += st.ticks;
        }
        for tid in threads(pid) {
            if let Some(st) = stat(&format!("/proc/{pid}/task/{tid}/stat")) {
                s.threads += 1;
                let before = previous.get(&tid).copied();
                if st.state == 'R' || before.is_some_and(|b| st.ticks > b) {
                    s.active += 1;
                }
                s.per_thread.insert(tid, st.ticks);
            }
        }
    }
    s
}

/// Sets the CPU affinity of one thread (a tid, or a pid for its main thread).
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it for ids below
    // CPU_SETSIZE, which we check.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus.iter().filter(|&c| (c as usize) < libc::CPU_SETSIZE as usize) {
        unsafe { libc::CPU_SET(c as usize, &mut mask) };
    }
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mask) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPU affinity of a thread.
pub fn affinity(tid: i32) -> std::io::Result<CpuSet> {
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity fills the mask it is given.
    let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as u32).filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &mask) }).collect())
}

/// Sets the affinity of every thread of every process in `pids`; returns how many threads were
/// set (threads that vanished meanwhile are skipped).
pub fn set_group_affinity(pids: &[i32], cpus: &CpuSet) -> usize {
    let mut n = 0;
    for &pid in pids {
        for tid in threads(pid) {
            if set_affinity(tid, cpus).is_ok() {
                n += 1;
            }
        }
    }
    n
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_names() {
        let s = parse_stat("42 (a (b) c) R 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5 0 0").unwrap();
        assert_eq!(s, Stat { state: 'R', pgrp: 42, ticks: 10 });
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        assert!(alive(me));
        assert!(threads(me).contains(&me));
        let mine = affinity(me).unwrap();
        assert!(!mine.is_empty());
        assert!(!alive(i32::MAX));
    }
}
