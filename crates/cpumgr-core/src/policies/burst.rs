//! Burst (paper 004 §3, in the spirit of BubbleSched's bursting bubbles): every program is kept
//! inside one topology domain — a core, an L3 domain, a NUMA node, a package — the smallest that
//! holds its share. Fair shares (max-min) are rounded down to a domain size and the program is
//! placed on a whole, aligned domain of that size; the CPUs rounding leaves over are handed back,
//! in arrival order, by growing programs to the next domain size where it fits.
//!
//! A share larger than every domain below the managed machine has no domain of its own to keep
//! to: whatever it gets spans several of those domains, inside the machine that every program
//! shares. It is rounded down to whole domains of the largest such size instead (a bubble that
//! bursts at the machine's level spreads over its children's runqueues, paper 004 §3.1). On a
//! machine that describes no level between the CPU and the whole machine (a flat `--cpus N`
//! machine) that size is one CPU, so a program gets its fair share, as it would get from
//! equipartition, instead of one CPU.
//!
//! Good at: locality — a program's threads share caches and memory, and programs never share a
//! domain's cache. Bad at: utilisation on machines whose domain sizes are far apart (a program that
//! deserves 5 CPUs on 4-CPU L3 domains inside 16-CPU NUMA nodes gets 4).

use super::equipartition::water_fill;
use super::{reserve_rigid, PolicyInfo, RigidFirst};
use crate::policy::{Decision, Policy, SimHints, View};
use crate::topology::Level;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "burst",
    paper: "004 §3",
    summary:
        "topology-aware: fair shares rounded to whole domains, one each, or several of the largest below the machine",
    params: &[],
    build: |_| Ok(Box::new(Burst::default())),
};

/// The burst policy.
#[derive(Debug, Clone, Default)]
pub struct Burst {
    /// Whether its last decision served every program, all rigid, and on how many CPUs: what
    /// [`SimHints::update`] builds on.
    rigid: RigidFirst,
}

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

/// The counts burst hands out on a machine: a domain size up to the largest domain below the
/// managed CPUs (`unit`), whole multiples of `unit` above it.
#[derive(Debug)]
struct Grid {
    /// [`domain_sizes`] up to `unit`.
    sizes: Vec<u32>,
    /// The largest domain size below the managed CPUs (1 on a flat machine).
    unit: u32,
    /// The managed CPUs.
    cpus: u32,
}

impl Grid {
    /// The grid of the machine in `view`.
    fn of(view: &View) -> Grid {
        let mut sizes = domain_sizes(view);
        sizes.retain(|&s| s < view.cpus);
        let unit = sizes.last().copied().unwrap_or(1);
        Grid { sizes, unit, cpus: view.cpus }
    }

    /// The largest count of the grid at most `share` (0 below one CPU).
    fn round_down(&self, share: u32) -> u32 {
        if share >= self.unit {
            share / self.unit * self.unit
        } else {
            self.sizes.iter().rev().copied().find(|&d| d <= share).unwrap_or(0)
        }
    }

    /// The smallest count of the grid above `count` that the managed CPUs hold.
    fn next_up(&self, count: u32) -> Option<u32> {
        if count >= self.unit {
            Some(count + self.unit).filter(|&c| c <= self.cpus)
        } else {
            self.sizes.iter().copied().find(|&d| d > count)
        }
    }

    /// The placement block of a program given `count` CPUs: the whole domain it rounds to, or
    /// whole domains of `unit` for a count above it.
    fn block(&self, count: u32) -> u32 {
        count.min(self.unit).max(1)
    }
}

impl Policy for Burst {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let reserved = reserve_rigid(view, out);
        self.rigid.note(view, &reserved);
        let left = reserved.left;
        let open: Vec<usize> =
            (0..view.programs.len()).filter(|&i| view.programs[i].kind.rigid_procs().is_none()).collect();
        let wants: Vec<u32> = open.iter().map(|&i| view.programs[i].wants()).collect();
        let shares = water_fill(left, &wants);
        let grid = Grid::of(view);
        let mut counts: Vec<u32> = shares.iter().map(|&s| grid.round_down(s)).collect();
        let mut free = left - counts.iter().sum::<u32>();
        for (k, c) in counts.iter_mut().enumerate() {
            if let Some(next) = grid.next_up(*c) {
                if next - *c <= free && next <= wants[k] {
                    free -= next - *c;
                    *c = next;
                }
            }
        }
        for (&i, &c) in open.iter().zip(&counts) {
            out.give(i, c);
            out.allocations[i].block = grid.block(c);
        }
    }
}

impl SimHints for Burst {
    fn update(&mut self, view: &View, out: &mut Decision, appended: usize) -> bool {
        self.rigid.update(view, out, appended)
    }

    fn may_update(&self) -> bool {
        self.rigid.may_update()
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
        decide_on(&machine(), progs)
    }

    /// One quantum of burst on `t` (every CPU managed), placed and checked.
    fn decide_on(t: &Topology, progs: &[Program]) -> (Decision, Vec<crate::CpuSet>) {
        let view = View { now: 0, quantum: 1, topology: t, cpus: t.num_cpus() as u32, programs: progs };
        let mut d = Decision::default();
        d.reset(progs.len());
        Burst::default().decide(&view, &mut d);
        let mut sets = Vec::new();
        Placer::new().place(t, t.cpus(), progs, &d, &mut sets);
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
        let (d, sets) = decide(&crate::policies::testing::programs(&[8, 8, 8]));
        let counts: Vec<u32> = d.allocations.iter().map(|a| a.count).collect();
        assert_eq!(counts, vec![4, 2, 2]);
        assert_eq!(sets[0].to_string(), "0-3", "one whole L3");
        assert!(["4-5", "6-7"].contains(&sets[1].to_string().as_str()), "one whole core: {}", sets[1]);
    }

    /// Each program's count.
    fn counts(d: &Decision) -> Vec<u32> {
        d.allocations.iter().map(|a| a.count).collect()
    }

    #[test]
    fn a_flat_machine_gives_fair_shares_not_one_cpu() {
        // A flat machine has domains of 1 CPU and of the whole machine only: no domain of its own
        // to keep a 4-CPU share in, so it is not rounded down to 1.
        let flat = Topology::flat(8);
        let (d, sets) = decide_on(&flat, &crate::policies::testing::programs(&[4]));
        assert_eq!((counts(&d), sets[0].len()), (vec![4], 4));
        // Max-min fair shares, every CPU used, as equipartition with redistribution gives them.
        let (d, _) = decide_on(&flat, &crate::policies::testing::programs(&[8, 8, 8]));
        assert_eq!(counts(&d), vec![3, 3, 2]);
        let (d, _) = decide_on(&flat, &crate::policies::testing::programs(&[1, 6, 6]));
        assert_eq!(counts(&d), vec![1, 4, 3]);
        assert!(d.allocations.iter().all(|a| a.block == 1), "any CPUs of a flat machine");
    }

    #[test]
    fn shares_above_the_largest_domain_take_whole_domains() {
        // 8 cores × 2 SMT: domains of 1, 2 and 16 CPUs. Shares of 8 take four whole cores each
        // (rounded down to a domain size, they would get one core each and leave 12 CPUs idle).
        let t = crate::sources::synthetic::parse("core:8 pu:2").unwrap();
        let (d, sets) = decide_on(&t, &crate::policies::testing::programs(&[16, 16]));
        assert_eq!(counts(&d), vec![8, 8]);
        assert!(d.allocations.iter().all(|a| a.block == 2), "whole cores");
        assert!(sets.iter().all(|s| s.len() == 8));
        // Fair shares 6, 5, 5 round down to whole cores (6, 4, 4); the 2 CPUs left grow the
        // first program by a core, in arrival order.
        let (d, _) = decide_on(&t, &crate::policies::testing::programs(&[16, 16, 16]));
        assert_eq!(counts(&d), vec![8, 4, 4]);
    }

    #[test]
    fn a_hierarchical_machine_keeps_its_domain_rounding() {
        // 2 packages × 2 NUMA × 8 cores × 2 SMT: domains of 1, 2, 16, 32 and 64 CPUs. Fair
        // shares of 18 round down to a NUMA node, a share of 10 to a core; the 14 CPUs left grow
        // nobody (a package needs 16 more, a NUMA node exceeds the request of 10).
        let t = crate::sources::synthetic::parse("package:2 numa:2 core:8 pu:2").unwrap();
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 64, programs: &[] };
        assert_eq!(domain_sizes(&view), vec![1, 2, 16, 32, 64]);
        let (d, sets) = decide_on(&t, &crate::policies::testing::programs(&[64, 64, 64, 10]));
        assert_eq!(counts(&d), vec![16, 16, 16, 2]);
        assert_eq!(d.allocations.iter().map(|a| a.block).collect::<Vec<_>>(), vec![16, 16, 16, 2]);
        assert!(sets[..3].iter().all(|s| s.len() == 16));
        // A share of 44 rounds down to a package, 20 to a NUMA node; a lone program takes the
        // whole machine.
        let (d, _) = decide_on(&t, &crate::policies::testing::programs(&[64, 20]));
        assert_eq!(counts(&d), vec![32, 16]);
        let (d, _) = decide_on(&t, &crate::policies::testing::programs(&[64]));
        assert_eq!(counts(&d), vec![64]);
    }
}
