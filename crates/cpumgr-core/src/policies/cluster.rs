//! Processor Clustering (paper 000 §4.2): CPUs are handed out in clusters of four (parameter
//! `size`), in rounds: every program first gets one cluster, then, while CPUs last, another, and
//! so on until requests are met; when fewer than a cluster's worth remain, programs get two or one
//! to keep every CPU busy. Clusters are placed on topology-aligned blocks (neighbouring CPUs that
//! share caches and memory), which is the point of the policy.
//!
//! Good at: locality on NUMA machines, and programs whose requests are multiples of four. Bad at:
//! many small programs (a program asking for 3 still takes a whole round's turn), and it ignores
//! how well programs use their CPUs.

use super::{reserve_rigid, PolicyInfo, RigidFirst};
use crate::params::{ParamKind, ParamSpec};
use crate::policy::{Decision, Policy, SimHints, View};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "cluster",
    paper: "000 §4.2",
    summary: "CPUs in topology-aligned clusters of `size` (4), round by round, then 2/1 to fill",
    params: &[ParamSpec {
        key: "size",
        help: "CPUs per cluster",
        kind: ParamKind::Int { default: 4, min: 1, max: 1024 },
    }],
    build: |p| Ok(Box::new(Cluster { size: p.u32("size")?, rigid: RigidFirst::default() })),
};

/// The processor clustering policy.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// CPUs per cluster.
    pub size: u32,
    /// Whether its last decision served every program, all rigid, and on how many CPUs: what
    /// [`SimHints::update`] builds on.
    rigid: RigidFirst,
}

impl Policy for Cluster {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let reserved = reserve_rigid(view, out);
        self.rigid.note(view, &reserved);
        let mut left = reserved.left;
        let mut open: Vec<usize> =
            (0..view.programs.len()).filter(|&i| view.programs[i].kind.rigid_procs().is_none()).collect();
        let mut counts = vec![0u32; view.programs.len()];
        // Whole clusters, round by round; when fewer than a chunk remain, halve the chunk (two,
        // then one) so every CPU is used.
        let mut chunk = self.size;
        loop {
            let mut gave = false;
            for &i in &open {
                while chunk > left {
                    chunk /= 2;
                }
                if chunk == 0 {
                    break;
                }
                let c = chunk.min(view.programs[i].wants() - counts[i]);
                counts[i] += c;
                left -= c;
                gave |= c > 0;
            }
            open.retain(|&i| counts[i] < view.programs[i].wants());
            if !gave || open.is_empty() || left == 0 {
                break;
            }
        }
        for (i, &c) in counts.iter().enumerate() {
            if c > 0 {
                out.give(i, c);
                out.allocations[i].block = self.size.min(c);
            }
        }
    }
}

impl SimHints for Cluster {
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
    use crate::policies::testing::{decide_once, programs};
    use crate::topology::Topology;

    #[test]
    fn clusters_of_four_round_by_round_then_two_and_one() {
        // 16 CPUs, requests 8, 8, 8: round 1 gives 4 each (12), 4 left: round 2 gives p1 its
        // second cluster; nothing is left.
        assert_eq!(decide_once("cluster", 16, &programs(&[8, 8, 8])), vec![8, 4, 4]);
        // 10 CPUs, requests 8, 8: 4 + 4, then 2 left: p1 gets 2 to keep every CPU busy.
        assert_eq!(decide_once("cluster", 10, &programs(&[8, 8])), vec![6, 4]);
        // 7 CPUs, three programs asking 4: 4, then 3 left: 2, then 1.
        assert_eq!(decide_once("cluster", 7, &programs(&[4, 4, 4])), vec![4, 2, 1]);
        // Small requests are met whole.
        assert_eq!(decide_once("cluster", 16, &programs(&[3, 1])), vec![3, 1]);
        // More programs than clusters: the later ones wait for the next quantum.
        assert_eq!(decide_once("cluster", 8, &programs(&[4, 4, 4])), vec![4, 4, 0]);
    }

    #[test]
    fn clusters_land_on_aligned_blocks() {
        let t = Topology::flat(16);
        let progs = programs(&[4, 4, 4]);
        let mut policy = crate::policies::build("cluster").unwrap();
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 16, programs: &progs };
        let mut d = Decision::default();
        d.reset(3);
        policy.decide(&view, &mut d);
        let mut sets = Vec::new();
        Placer::new().place(&t, t.cpus(), &progs, &d, &mut sets);
        validate(t.cpus(), &d, &sets).unwrap();
        for s in &sets {
            let first = s.first().unwrap();
            assert_eq!(first % 4, 0, "{s} starts on a cluster boundary");
            assert_eq!(s.last().unwrap(), first + 3, "{s} is one block");
        }
    }
}
