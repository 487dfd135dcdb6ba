//! Equipartition (paper 000 §4.1): every program gets `P / N` CPUs, or its request if smaller.
//!
//! As the paper states it, CPUs a program does not request stay unallocated, and when programs
//! outnumber CPUs only the first `P` run (one CPU each). With `redistribute=true` the unrequested
//! CPUs are handed out again among the programs that want more (water-filling), the variant most
//! later systems call equipartition. Rigid programs run whole or wait ([`super::reserve_rigid`]).
//!
//! Good at: fairness between equal programs, no information needed. Bad at: programs that scale
//! differently, since it gives a program that gains nothing from a CPU as many as one that does.

use super::{reserve_rigid, PolicyInfo, Reserved, RigidFirst};
use crate::params::{ParamKind, ParamSpec};
use crate::policy::{Decision, Policy, SimHints, View};
use crate::program::Program;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "equipartition",
    paper: "000 §4.1",
    summary: "each program gets min(P/N, request); leftover CPUs stay idle unless redistribute=true",
    params: PARAMS,
    build: |p| Ok(Box::new(Equipartition { redistribute: p.bool("redistribute")?, rigid: RigidFirst::default() })),
};

const PARAMS: &[ParamSpec] = &[ParamSpec {
    key: "redistribute",
    help: "hand the CPUs a program does not request to the programs that want more",
    kind: ParamKind::Bool { default: false },
}];

/// The equipartition policy.
#[derive(Debug, Clone, Default)]
pub struct Equipartition {
    /// Whether leftover CPUs are handed out again.
    pub redistribute: bool,
    /// Whether its last decision served every program, all rigid, and on how many CPUs: what
    /// [`SimHints::update`] builds on.
    rigid: RigidFirst,
}

impl Policy for Equipartition {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let reserved = reserve_rigid(view, out);
        self.rigid.note(view, &reserved);
        let Reserved { left, open: n, .. } = reserved;
        let open = |p: &&Program| p.kind.rigid_procs().is_none();
        if n == 0 || left == 0 {
            return;
        }
        if self.redistribute {
            let (index, wants): (Vec<usize>, Vec<u32>) =
                view.programs.iter().enumerate().filter(|(_, p)| open(p)).map(|(i, p)| (i, p.wants())).unzip();
            for (i, c) in index.into_iter().zip(water_fill(left, &wants)) {
                out.give(i, c);
            }
            return;
        }
        // The paper's rule: `min(floor(P/N), want)` each; with more programs than CPUs, the first
        // `P` get one. One pass, no allocation: it runs every quantum over every program.
        let share = (left as usize / n).max(1) as u32;
        let mut rest = left;
        for (i, p) in view.programs.iter().enumerate().filter(|(_, p)| open(p)) {
            let c = p.wants().min(share).min(rest);
            rest -= c;
            out.give(i, c);
        }
    }
}

impl SimHints for Equipartition {
    fn update(&mut self, view: &View, out: &mut Decision, appended: usize) -> bool {
        self.rigid.update(view, out, appended)
    }

    fn may_update(&self) -> bool {
        self.rigid.may_update()
    }
}

/// Max-min fair shares: raise every unsatisfied program by the same amount until CPUs or wants
/// run out; the remainder goes one each to the earliest programs, so equal wants differ by at most
/// one CPU.
pub fn water_fill(cpus: u32, wants: &[u32]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| (wants[i], i));
    let mut out = vec![0u32; wants.len()];
    let mut left = cpus;
    let mut level = 0u32;
    for (k, &i) in order.iter().enumerate() {
        let rest = (order.len() - k) as u32;
        let step = (wants[i] - level).min(left / rest);
        level += step;
        left -= step * rest;
        if wants[i] > level {
            break;
        }
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = wants[i].min(level);
    }
    for i in 0..wants.len() {
        if left == 0 {
            break;
        }
        if out[i] < wants[i] {
            out[i] += 1;
            left -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::testing::{decide_once, programs};

    #[test]
    fn paper_rule_leaves_unrequested_cpus_idle() {
        // 8 CPUs, 3 programs: P/N = 2; the program asking 1 gets 1 and 1 CPU stays idle... plus
        // the remainder of the division (8 - 3*2 = 2) is never handed out either.
        let d = decide_once("equipartition", 8, &programs(&[1, 6, 6]));
        assert_eq!(d, vec![1, 2, 2]);
        let d = decide_once("equipartition:redistribute=true", 8, &programs(&[1, 6, 6]));
        assert_eq!(d, vec![1, 4, 3]);
    }

    #[test]
    fn more_programs_than_cpus_runs_the_first_p() {
        let d = decide_once("equipartition", 2, &programs(&[4, 4, 4]));
        assert_eq!(d, vec![1, 1, 0]);
    }

    #[test]
    fn water_fill_is_max_min_fair() {
        assert_eq!(water_fill(10, &[2, 10, 10]), vec![2, 4, 4]);
        assert_eq!(water_fill(10, &[1, 1]), vec![1, 1]);
        assert_eq!(water_fill(7, &[8, 8, 8]), vec![3, 2, 2]);
        assert_eq!(water_fill(0, &[3]), vec![0]);
    }
}
