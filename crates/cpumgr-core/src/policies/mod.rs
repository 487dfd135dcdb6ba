//! Every policy of the papers, one file each, and the catalog that builds them by name.
//!
//! A policy is selected with `name:key=value,...` (see [`crate::params`]). The catalog is the one
//! list of what exists: `cpumgr policies`, the daemon's `policy set`, the simulator and the tests
//! all read it, so a policy added here is everywhere at once.

use crate::params::{ParamError, ParamKind, ParamSpec, Params, PolicySpec};
use crate::policy::{Decision, Policy, View};

pub mod burst;
pub mod cluster;
pub mod cs;
pub mod dss;
pub mod equipartition;
pub mod fcfs;
pub mod gang;
pub mod llpc;
pub mod omp_dss;
pub mod os;
pub mod pdpa;
pub mod scs;
pub mod sliding;
pub mod ssw_dss;
pub mod static_sets;
pub mod started;
pub mod sw_dss;
pub mod vtq_dss;
pub mod window;

/// How to build one policy, and what to say about it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInfo {
    /// The name it is selected by.
    pub name: &'static str,
    /// Which paper and section specify it.
    pub paper: &'static str,
    /// The rule, in one sentence.
    pub summary: &'static str,
    /// Its parameters.
    pub params: &'static [ParamSpec],
    /// Builds it from checked parameters.
    pub build: fn(&Params) -> Result<Box<dyn Policy>, ParamError>,
}

/// Every registered policy, in the order `cpumgr policies` lists them.
pub const CATALOG: &[PolicyInfo] = &[
    equipartition::INFO,
    cluster::INFO,
    dss::INFO,
    sw_dss::INFO,
    ssw_dss::INFO,
    vtq_dss::INFO,
    pdpa::INFO,
    omp_dss::INFO,
    llpc::INFO,
    scs::INFO,
    cs::INFO,
    gang::INFO,
    burst::INFO,
    static_sets::INFO,
    fcfs::INFO,
    os::INFO,
];

/// The entry for a policy name.
pub fn info(name: &str) -> Option<&'static PolicyInfo> {
    CATALOG.iter().find(|i| i.name == name)
}

/// Builds a policy from `name:key=value,...`.
pub fn build(spec: &str) -> Result<Box<dyn Policy>, ParamError> {
    let spec = PolicySpec::parse(spec)?;
    let info = info(&spec.name).ok_or_else(|| ParamError::UnknownPolicy {
        name: spec.name.clone(),
        known: CATALOG.iter().map(|i| i.name).collect::<Vec<_>>().join(", "),
    })?;
    let params = Params::new(info.name, info.params, &spec.values)?;
    (info.build)(&params)
}

/// The admission parameter of the policies that rotate through every admitted program (gang and
/// the time-shared DSS variants): see [`Policy::preferred_mpl`]. The default, 8, is the largest
/// multiprogramming degree of the papers' time-sharing experiments (paper 003, Table 2).
pub const ADMIT: ParamSpec = ParamSpec {
    key: "admit",
    help: "most programs admitted at once, the rest wait in arrival order (the simulator's long-term scheduler); 0 for every program",
    kind: ParamKind::Int { default: 8, min: 0, max: 1 << 20 },
};

/// An admission limit of `admit` programs, 0 meaning none, as [`Policy::preferred_mpl`] gives it.
pub fn admission(admit: u32) -> Option<u32> {
    (admit > 0).then_some(admit)
}

/// Serves rigid programs first, in arrival order, with all their processes or nothing: a rigid job
/// squeezed onto fewer CPUs than it has processes spins away its time slices (DESIGN.md, "never
/// squeeze a spinning team"), so space-sharing policies run it whole or let it wait. A rigid job
/// wider than the managed CPUs runs on all of them (it time-shares with itself, paper 002) when it
/// is the first to arrive. Returns the CPUs left for the other programs, how many they are and
/// how many rigid programs run (counted in the same pass: this runs every quantum over every
/// program).
pub fn reserve_rigid(view: &View, out: &mut Decision) -> Reserved {
    let mut r = Reserved { left: view.cpus, open: 0, served: 0 };
    // Beside the allocations, which are as many (the decision was reset for this view): no index
    // to check per program.
    debug_assert_eq!(out.allocations.len(), view.programs.len(), "the decision was reset for the view");
    // A rigid program needs `min(procs, cpus)` CPUs and runs if that many (and at least one)
    // are left. As `left <= cpus`, a program with 1 to `left` processes (the usual case, one
    // comparison) needs them all, and one wider than `left` runs only if it is wider than the
    // machine and the whole machine is left.
    for (p, a) in view.programs.iter().zip(&mut out.allocations) {
        match p.kind.rigid_procs() {
            Some(n) if n.wrapping_sub(1) < r.left => {
                a.give(n);
                r.left -= n;
                r.served += 1;
            }
            Some(n) if n > view.cpus && view.cpus <= r.left && view.cpus > 0 => {
                a.give(view.cpus);
                r.left -= view.cpus;
                r.served += 1;
            }
            Some(_) => {}
            None => r.open += 1,
        }
    }
    r
}

/// What [`reserve_rigid`] leaves to the programs that are not rigid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// CPUs not given to rigid programs.
    pub left: u32,
    /// Programs that are not rigid.
    pub open: usize,
    /// Rigid programs given their processes (the others wait).
    pub served: usize,
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Kind, Program};
    use crate::topology::Topology;

    #[test]
    fn rigid_programs_run_whole_in_arrival_order() {
        // Every list of up to four programs of 0 to 5 processes (5 meaning an open program) on
        // machines of 0 to 4 CPUs, against the rule as written: each rigid program in turn gets
        // `min(procs, cpus)` CPUs if that many, and at least one, are left.
        for cpus in 0..=4u32 {
            let topology = Topology::flat(cpus.max(1));
            for code in 0..6u32.pow(4) {
                let programs: Vec<Program> = (0..4)
                    .map(|k| {
                        let procs = code / 6u32.pow(k) % 6;
                        let kind = if procs == 5 { Kind::Malleable } else { Kind::Rigid(procs) };
                        Program { kind, ..Program::new(u64::from(k), "p", procs.max(1)) }
                    })
                    .collect();
                let view = View { now: 0, quantum: 1, topology: &topology, cpus, programs: &programs };
                let mut out = Decision::default();
                out.reset(programs.len());
                let r = reserve_rigid(&view, &mut out);
                let mut left = cpus;
                let (mut open, mut served) = (0, 0);
                for (p, a) in programs.iter().zip(&out.allocations) {
                    let want = match p.kind.rigid_procs() {
                        Some(n) if n.min(cpus) <= left && n.min(cpus) > 0 => {
                            left -= n.min(cpus);
                            served += 1;
                            n.min(cpus)
                        }
                        Some(_) => 0,
                        None => {
                            open += 1;
                            0
                        }
                    };
                    assert_eq!((a.count, a.running), (want, want > 0), "{code} on {cpus} CPUs");
                }
                assert_eq!(r, Reserved { left, open, served }, "{code} on {cpus} CPUs");
            }
        }
    }
}
