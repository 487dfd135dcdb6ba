//! Static partitioning, like processor sets (papers 001 §5 and 002's SSS): the CPUs are split once
//! into `parts` equal partitions; each program, in arrival order, takes a free partition and keeps
//! it (the same CPUs: the placer keeps a program's set) until it ends. Programs without a free
//! partition wait. A program uses at most its request of its partition.
//!
//! Good at: isolation and locality, no stopping. Bad at: idle CPUs when a partition's program
//! needs fewer than the partition, or when fewer programs than partitions run.

use std::collections::{BTreeMap, BTreeSet};

use super::PolicyInfo;
use crate::params::{ParamKind, ParamSpec};
use crate::policy::{Decision, Policy, SimHints, View};
use crate::program::ProgramId;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "static",
    paper: "baseline (001 §5, 002 SSS)",
    summary: "processor sets: CPUs split once into `parts` partitions, one program each until it ends",
    params: &[ParamSpec {
        key: "parts",
        help: "number of partitions (processor sets)",
        kind: ParamKind::Int { default: 2, min: 1, max: 65536 },
    }],
    build: |p| Ok(Box::new(Static { parts: p.u32("parts")?, owner: BTreeMap::new() })),
};

/// The static partitioning policy.
#[derive(Debug, Clone, Default)]
pub struct Static {
    parts: u32,
    /// Partition index → its program.
    owner: BTreeMap<u32, ProgramId>,
}

impl Static {
    /// Size of partition `k` of `cpus` CPUs split into `parts` (the first ones get the remainder).
    fn size(cpus: u32, parts: u32, k: u32) -> u32 {
        cpus / parts + u32::from(k < cpus % parts)
    }
}

impl Policy for Static {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn on_exit(&mut self, id: ProgramId) {
        self.owner.retain(|_, p| *p != id);
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let parts = self.parts.min(view.cpus).max(1);
        self.owner.retain(|k, id| *k < parts && view.index_of(*id).is_some());
        let give = |out: &mut Decision, i: usize, k: u32| {
            let p = &view.programs[i];
            let size = Self::size(view.cpus, parts, k);
            let count = match p.kind.rigid_procs() {
                Some(n) if n.min(view.cpus) > size => 0,
                Some(n) => n.min(view.cpus),
                None => p.wants().min(size),
            };
            out.give(i, count);
        };
        // Owners keep their partitions; then programs without one, in arrival order, take the
        // free partitions, lowest first (a backlog costs nothing once every partition is owned).
        for (&k, id) in &self.owner {
            give(out, view.index_of(*id).expect("retained above"), k);
        }
        if self.owner.len() as u32 >= parts {
            return;
        }
        let owners: BTreeSet<ProgramId> = self.owner.values().copied().collect();
        let mut free = (0..parts).filter(|k| !self.owner.contains_key(k)).collect::<Vec<_>>().into_iter();
        for (i, p) in view.programs.iter().enumerate() {
            if owners.contains(&p.id) {
                continue;
            }
            let Some(k) = free.next() else { break };
            self.owner.insert(k, p.id);
            give(out, i, k);
        }
    }
}

impl SimHints for Static {
    /// One program per partition: the others wait for one in arrival order, which is what a
    /// long-term scheduler admitting `parts` programs does (the programs that own partitions are
    /// always the earliest arrivals still running). In the simulator the backlog then waits in
    /// its queue instead of in every view.
    fn preferred_mpl(&self) -> Option<u32> {
        Some(self.parts)
    }
}

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::running;
    use crate::policies::testing::programs;

    #[test]
    fn partitions_are_fixed_and_kept() {
        let progs = programs(&[8, 1, 8]);
        let r = running("static:parts=2", 8, &progs, 3);
        assert_eq!(r[0], vec![("p1".to_string(), 4), ("p2".to_string(), 1)], "p3 waits for a partition");
        assert_eq!(r[2], r[0], "partitions never change while programs run");
        let r = running("static:parts=3", 8, &programs(&[8, 8, 8]), 1);
        assert_eq!(r[0].iter().map(|x| x.1).collect::<Vec<_>>(), vec![3, 3, 2]);
    }
}
