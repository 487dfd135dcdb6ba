//! Burst (paper 004 §3, in the spirit of BubbleSched's bursting bubbles): every program is kept
//! inside one topology domain — a core, an L3 domain, a NUMA node, a package — the smallest that
//! holds its share. Fair shares (max-min) are rounded down to a domain size and the program is
//! placed on a whole, aligned domain of that size; the CPUs rounding leaves over are handed back,
//! in arrival order, by growing programs to the next domain size where it fits.
//!
//! Good at: locality — a program's threads share caches and memory, and programs never share a
//! domain's cache. Bad at: utilisation on machines whose domain sizes are far apart (a program that
//! deserves 5 CPUs on 4-CPU L3 domains gets 4).

use super::equipartition::water_fill;
use super::{reserve_rigid, PolicyInfo};
use crate::policy::{Decision, Policy, View};
use crate::topology::Level;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "burst",
    paper: "004 §3",
    summary: "topology-aware: fair shares rounded to whole topology domains, each program inside one domain",
    params: &[],
    build: |_| Ok(Box::new(Burst)),
};

/// The burst policy.
#[derive(Debug, Clone, Default)]
pub struct Burst;

/// The domain sizes of the machine, smallest first: 1, CPUs per core, per L3, per NUMA node, per
/// package, the machine (each level's smallest domain, so a block of that size fits anywhere).
pub fn domain_sizes(view: &View) -> Vec<u32> {
    let mut sizes: Vec<u32> = Level::ALL
        .iter()
        .filter_map(|&l| view.topology.level(l).map(|d| d.cpus.len() as u32).min())
        .filter(|&s| s <= view.cpus)
        .collect();
    sizes.push(1);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

impl Policy for Burst {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let left = reserve_rigid(view, out).left;
        let open: Vec<usize> = (0..view.programs.len()).filter(|&i| view.programs[i].kind.rigid_procs().is_none()).collect();
        let wants: Vec<u32> = open.iter().map(|&i| view.programs[i].wants()).collect();
        let shares = water_fill(left, &wants);
        let sizes = domain_sizes(view);
        let round_down = |s: u32| sizes.iter().rev().copied().find(|&d| d <= s).unwrap_or(0);
        let mut counts: Vec<u32> = shares.iter().map(|&s| round_down(s)).collect();
        let mut free = left - counts.iter().sum::<u32>();
        for (k, c) in counts.iter_mut().enumerate() {
            if let Some(&next) = sizes.iter().find(|&&d| d > *c) {
                if next - *c <= free && next <= wants[k] {
                    free -= next - *c;
                    *c = next;
                }
            }
        }
        for (&i, &c) in open.iter().zip(&counts) {
            out.give(i, c);
            out.allocations[i].block = c.max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placer::{validate, Placer};
    use crate::program::Program;
    use crate::topology::{CpuInfo, Topology};

    /// 2 L3 domains of 2 cores × 2 SMT = 8 CPUs.
    fn machine() -> Topology {
        let infos: Vec<CpuInfo> = (0..8)
            .map(|cpu| CpuInfo { cpu, package: Some(0), numa: Some(0), l3: Some(cpu / 4), core: Some(cpu / 2) })
            .collect();
        Topology::from_cpus(&infos).unwrap()
    }

    fn decide(progs: &[Program]) -> (Decision, Vec<crate::CpuSet>) {
        let t = machine();
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 8, programs: progs };
        let mut d = Decision::default();
        d.reset(progs.len());
        Burst.decide(&view, &mut d);
        let mut sets = Vec::new();
        Placer::new().place(&t, t.cpus(), progs, &d, &mut sets);
        validate(t.cpus(), &d, &sets).unwrap();
        (d, sets)
    }

    #[test]
    fn each_program_gets_a_whole_domain() {
        let t = machine();
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 8, programs: &[] };
        assert_eq!(domain_sizes(&view), vec![1, 2, 4, 8]);
        // Three programs wanting 8: fair shares 3, 3, 2 round to 2, 2, 2; the 2 left over grow
        // the first to a whole L3 domain.
        let (d, sets) = decide(&crate::testing::programs(&[8, 8, 8]));
        let counts: Vec<u32> = d.allocations.iter().map(|a| a.count).collect();
        assert_eq!(counts, vec![4, 2, 2]);
        assert_eq!(sets[0].to_string(), "0-3", "one whole L3");
        assert!(["4-5", "6-7"].contains(&sets[1].to_string().as_str()), "one whole core: {}", sets[1]);
    }
}
