//! Load from outside: how many of the managed CPUs are kept busy by processes the manager does
//! not manage (a compiler, a browser, another user's unmanaged job), so that the policy is
//! offered only the CPUs they leave (`--yield-outside`, off by default).
//!
//! Paper 001's LLPC sizes each program's team from the system load so that running threads never
//! outnumber CPUs. A manager that ignores unmanaged load hands a spinning team every CPU, and the
//! team then competes with the outsiders for time slices and pays one at every barrier; with the
//! rule, cooperative programs size their teams to the CPUs the outsiders leave and the outsiders
//! keep theirs. It is a rule for a good neighbour, not for speed under heavy load: the managed
//! programs then get the CPUs the outsiders leave, where unpinned threads would have taken a
//! share of every CPU (one run each, back to back, with ~10 other runnable processes on this 2-CPU
//! machine: the demo under equipartition took 32.7 s with the rule, 18.9 s without, passive
//! waiting 7.9-9.3 s).
//!
//! The measure is CPU time, not a count of runnable threads: `/proc/stat`'s per-CPU counters of
//! the managed CPUs (busy = user + nice + system + irq + softirq; steal is the hypervisor's, not
//! an outsider's), minus the CPU time of the managed programs and of the manager itself, over a
//! sliding window of quanta. Counting only the managed CPUs keeps it right in a container whose
//! host runs other work on other CPUs (the machine-wide `procs_running` would not). Outsiders that
//! compete with spinning teams get less than they would alone (one busy thread against two
//! spinners on two CPUs gets two thirds of a CPU), so the estimate rounds to the nearest CPU: two
//! thirds reserve one, the outsider then has a CPU to itself, measures a full one, and keeps it
//! until it stops.

use std::collections::VecDeque;

use cpumgr_core::CpuSet;

/// Quanta (walks of `/proc`) in the sliding window: about a second at the default quantum.
pub const WINDOW: usize = 10;

/// The busy and total clock ticks of each managed CPU, read from `/proc/stat` text.
pub fn cpu_ticks(stat: &str, managed: &CpuSet) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(managed.len());
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else { continue };
        let mut fields = rest.split_ascii_whitespace();
        let Some(cpu) = fields.next().and_then(|c| c.parse::<u32>().ok()) else { continue };
        if !managed.contains(cpu) {
            continue;
        }
        let v: Vec<u64> = fields.take(8).map(|f| f.parse().unwrap_or(0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        let busy = at(0) + at(1) + at(2) + at(5) + at(6);
        out.push((busy, busy + at(3) + at(4) + at(7)));
    }
    out
}

/// One walk's differences: CPU ticks busy on the managed CPUs, elapsed per CPU, and used by the
/// managed programs and the manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Delta {
    busy: u64,
    elapsed: u64,
    inside: u64,
}

/// Tracks the load from outside over a sliding window and says how many CPUs to leave it.
#[derive(Debug, Default)]
pub struct OutsideLoad {
    last: Option<(u64, u64)>,
    window: VecDeque<Delta>,
    reserved: u32,
}

impl OutsideLoad {
    /// A tracker with nothing measured: nothing reserved.
    pub fn new() -> OutsideLoad {
        OutsideLoad::default()
    }

    /// Takes in one walk: the managed CPUs' counters (from [`cpu_ticks`]) and the clock ticks the
    /// managed programs and the manager used since the previous walk. Returns how many CPUs the
    /// outside now keeps, at most `cpus - 1` so that the programs always have one.
    pub fn sample(&mut self, counters: &[(u64, u64)], inside: u64) -> u32 {
        let busy: u64 = counters.iter().map(|c| c.0).sum();
        let total: u64 = counters.iter().map(|c| c.1).sum();
        let n = counters.len() as u64;
        if let Some((b0, t0)) = self.last.replace((busy, total)) {
            if n > 0 && total >= t0 && busy >= b0 {
                self.window.push_back(Delta { busy: busy - b0, elapsed: (total - t0) / n, inside });
                if self.window.len() > WINDOW {
                    self.window.pop_front();
                }
            }
        }
        let sum = self.window.iter().fold(Delta::default(), |a, d| Delta {
            busy: a.busy + d.busy,
            elapsed: a.elapsed + d.elapsed,
            inside: a.inside + d.inside,
        });
        self.reserved = if sum.elapsed == 0 {
            0
        } else {
            let outside = sum.busy.saturating_sub(sum.inside) as f64 / sum.elapsed as f64;
            (outside.round() as u32).min((n as u32).saturating_sub(1))
        };
        self.reserved
    }

    /// CPUs the outside keeps, as of the last sample.
    pub fn reserved(&self) -> u32 {
        self.reserved
    }
}

/// The CPUs offered to the policy: `managed` less its last `reserved` CPUs (a stable choice, so
/// that programs keep their CPUs while the outside load holds; the kernel moves unpinned
/// outsiders to the CPUs nobody is pinned to).
pub fn offered(managed: &CpuSet, reserved: u32) -> CpuSet {
    let keep = managed.len().saturating_sub(reserved as usize).max(1);
    managed.iter().take(keep).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 0 10 100 0 0 0 0 0 0\n\
                        cpu0 100 5 20 300 7 1 2 9 0 0\n\
                        cpu1 50 0 10 400 0 0 0 0 0 0\n\
                        cpu2 1 1 1 1 1 1 1 1 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn counters_of_the_managed_cpus_only() {
        let c = cpu_ticks(STAT, &CpuSet::parse("0-1").unwrap());
        // cpu0: busy 100+5+20+1+2 = 128, total 128+300+7+9 = 444; the aggregate line is skipped.
        assert_eq!(c, vec![(128, 444), (60, 460)]);
        assert_eq!(cpu_ticks(STAT, &CpuSet::parse("2").unwrap()), vec![(5, 8)]);
    }

    fn feed(o: &mut OutsideLoad, steps: &[(u64, u64)], cpus: u64, per_step: u64) -> Vec<u32> {
        // steps: (busy ticks summed over the CPUs, ticks used inside) per walk.
        let (mut busy, mut total) = (0, 0);
        let mut out = vec![o.sample(&vec![(0, 0); cpus as usize], 0)];
        for &(b, inside) in steps {
            busy += b;
            total += per_step * cpus;
            let counters: Vec<(u64, u64)> = (0..cpus).map(|i| if i == 0 { (busy, total) } else { (0, 0) }).collect();
            out.push(o.sample(&counters, inside));
        }
        out
    }

    #[test]
    fn a_busy_outsider_keeps_one_cpu_and_gives_it_back_when_it_stops() {
        let mut o = OutsideLoad::new();
        // Two CPUs, 10 ticks each per walk: the programs use 13, an outsider about 7 (two thirds
        // of a CPU against two spinners), then a whole CPU, then nothing.
        let mut steps = vec![(20, 13); 10];
        steps.extend(vec![(20, 10); 10]);
        steps.extend(vec![(10, 10); 10]);
        let r = feed(&mut o, &steps, 2, 10);
        assert_eq!(r[0], 0, "nothing reserved before a difference is known");
        assert_eq!(r[10], 1, "two thirds of a CPU reserve one");
        assert_eq!(r[20], 1, "a whole CPU keeps it");
        assert_eq!(r[30], 0, "the window forgets an outsider that stopped");
    }

    #[test]
    fn noise_reserves_nothing_and_the_programs_keep_one_cpu() {
        let mut o = OutsideLoad::new();
        let r = feed(&mut o, &[(20, 18); 12], 2, 10);
        assert!(r.iter().all(|&x| x == 0), "{r:?}");
        let mut o = OutsideLoad::new();
        let r = feed(&mut o, &[(40, 0); 12], 4, 10);
        assert_eq!(*r.last().unwrap(), 3, "four outsiders on four CPUs leave the programs one");
    }

    #[test]
    fn offered_drops_the_last_cpus_and_keeps_at_least_one() {
        let m = CpuSet::parse("0-3").unwrap();
        assert_eq!(offered(&m, 0), m);
        assert_eq!(offered(&m, 1), CpuSet::parse("0-2").unwrap());
        assert_eq!(offered(&m, 9), CpuSet::parse("0").unwrap());
    }
}
