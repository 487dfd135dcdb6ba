//! Every policy of the papers, one file each, and the catalog that builds them by name.
//!
//! A policy is selected with `name:key=value,...` (see [`crate::params`]). The catalog is the one
//! list of what exists: `cpumgr policies`, the daemon's `policy set`, the simulator and the tests
//! all read it, so a policy added here is everywhere at once.

use crate::params::{ParamError, ParamKind, ParamSpec, Params, PolicySpec};
use crate::policy::{Allocation, Decision, Policy, SimHints, View};

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
pub mod started;
pub mod static_sets;
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
    pub build: fn(&Params) -> Result<Box<dyn SimHints>, ParamError>,
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

/// Builds a policy from `name:key=value,...`, for the live manager.
pub fn build(spec: &str) -> Result<Box<dyn Policy>, ParamError> {
    Ok(build_simulated(spec)?)
}

/// Builds a policy from `name:key=value,...` with the hints the simulator reads ([`SimHints`]).
pub fn build_simulated(spec: &str) -> Result<Box<dyn SimHints>, ParamError> {
    let spec = PolicySpec::parse(spec)?;
    let info = info(&spec.name).ok_or_else(|| ParamError::UnknownPolicy {
        name: spec.name.clone(),
        known: CATALOG.iter().map(|i| i.name).collect::<Vec<_>>().join(", "),
    })?;
    let params = Params::new(info.name, info.params, &spec.values)?;
    (info.build)(&params)
}

/// The admission parameter of the policies that rotate through every admitted program (gang and
/// the time-shared DSS variants): see [`SimHints::preferred_mpl`]. The default, 8, is the largest
/// multiprogramming degree of the papers' time-sharing experiments (paper 003, Table 2).
pub const ADMIT: ParamSpec = ParamSpec {
    key: "admit",
    help: "most programs admitted at once, the rest wait in arrival order (the simulator's long-term scheduler); 0 for every program",
    kind: ParamKind::Int { default: 8, min: 0, max: 1 << 20 },
};

/// An admission limit of `admit` programs, 0 meaning none, as [`SimHints::preferred_mpl`] gives it.
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
            Some(n) => serve_rigid(n, view.cpus, &mut r, a),
            None => r.open += 1,
        }
    }
    r
}

/// [`reserve_rigid`]'s rule for one rigid program of `n` processes on `cpus` managed CPUs.
#[inline(always)]
fn serve_rigid(n: u32, cpus: u32, r: &mut Reserved, a: &mut Allocation) {
    if n.wrapping_sub(1) < r.left {
        a.give(n);
        r.left -= n;
        r.served += 1;
    } else if n > cpus && cpus <= r.left && cpus > 0 {
        a.give(cpus);
        r.left -= cpus;
        r.served += 1;
    }
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

/// What a rigid-first policy ([`reserve_rigid`], then the other programs) remembers of its last
/// decision to bring it up to date ([`SimHints::update`]): whether that decision served every
/// program and every program was rigid, on how many CPUs. Then, with programs gone and others
/// appended, every program still listed is served again (the CPUs left at its turn only grew)
/// with the same count, and the appended ones are served in order from what the others leave,
/// as [`reserve_rigid`] serves them; the other programs' share is empty. A trace of rigid jobs
/// (the Standard Workload Format's) keeps to this case while no job waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RigidFirst {
    /// The managed CPUs of the last decision, if it served every program, all rigid.
    all_served_on: Option<u32>,
}

impl RigidFirst {
    /// Notes the last decision, for `view`, whose [`reserve_rigid`] pass gave `reserved`.
    pub fn note(&mut self, view: &View, reserved: &Reserved) {
        let all = reserved.open == 0 && reserved.served == view.programs.len();
        self.all_served_on = all.then_some(view.cpus);
    }

    /// [`SimHints::may_update`] for a rigid-first policy: its last decision served every program,
    /// all rigid.
    pub fn may_update(&self) -> bool {
        self.all_served_on.is_some()
    }

    /// [`SimHints::update`] for a rigid-first policy whose decision on rigid programs alone is
    /// [`reserve_rigid`]'s: serves the `appended` programs if the last decision served every
    /// program on as many CPUs and they are all rigid; false (nothing to rely on) otherwise.
    pub fn update(&mut self, view: &View, out: &mut Decision, appended: usize) -> bool {
        if self.all_served_on != Some(view.cpus) {
            return false;
        }
        let old = view.programs.len() - appended;
        debug_assert_eq!(
            out.allocations.len(),
            view.programs.len(),
            "the last decision, with the appended programs reset"
        );
        // The programs listed before were all served: their counts are what they keep.
        let used: u32 = out.allocations[..old].iter().map(|a| a.count).sum();
        let mut r = Reserved { left: view.cpus - used, open: 0, served: old };
        for (p, a) in view.programs[old..].iter().zip(&mut out.allocations[old..]) {
            match p.kind.rigid_procs() {
                Some(n) => serve_rigid(n, view.cpus, &mut r, a),
                // `decide` divides what is left among the programs that are not rigid.
                None => return false,
            }
        }
        self.note(view, &r);
        true
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod testing;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::program::{Kind, Program};
    use crate::topology::{CpuInfo, Topology};

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

    /// The rigid-first policies that bring their decisions up to date ([`RigidFirst`]).
    const UPDATING: [&str; 4] = ["equipartition", "equipartition:redistribute=true", "cluster", "burst"];

    /// One quantum's change to the program list: the positions that leave (taken modulo the
    /// list's length), then the programs that arrive, each `Some(processes)` for a rigid one and
    /// `None` for a malleable one; and whether one CPU fewer is managed in that quantum.
    type Step = (Vec<usize>, Vec<Option<u32>>, bool);

    fn steps(cpus: u32) -> impl Strategy<Value = Vec<Step>> {
        let arrival = prop_oneof![8 => (0..=cpus + 2).prop_map(Some), 1 => Just(None)];
        let fewer = prop_oneof![5 => Just(false), 1 => Just(true)];
        prop::collection::vec(
            (prop::collection::vec(0usize..64, 0..4), prop::collection::vec(arrival, 0..6), fewer),
            1..24,
        )
    }

    /// Runs `steps` under `spec` on `topology`, bringing the decision up to date where the policy
    /// can and deciding afresh where it cannot, and checks each decision against a fresh one of
    /// another instance; returns how many quanta were brought up to date.
    fn follow(spec: &str, topology: &Topology, cpus: u32, steps: &[Step]) -> usize {
        let (mut updating, mut fresh) = (build_simulated(spec).unwrap(), build(spec).unwrap());
        let (mut programs, mut out, mut next_id) = (Vec::<Program>::new(), Decision::default(), 0u64);
        let mut updated = 0;
        for (k, (leave, arrive, fewer)) in steps.iter().enumerate() {
            let mut gone: Vec<usize> =
                leave.iter().filter(|_| !programs.is_empty()).map(|&g| g % programs.len()).collect();
            gone.sort_unstable();
            gone.dedup();
            for &g in gone.iter().rev() {
                programs.remove(g);
                out.allocations.remove(g);
            }
            for &procs in arrive {
                let kind = procs.map_or(Kind::Malleable, Kind::Rigid);
                programs.push(Program { kind, ..Program::new(next_id, "p", procs.unwrap_or(cpus).max(1)) });
                next_id += 1;
            }
            let cpus = if *fewer { cpus.saturating_sub(1) } else { cpus };
            let view = View { now: 0, quantum: 1, topology, cpus, programs: &programs };
            out.allocations.resize(programs.len(), Allocation::default());
            let may = updating.may_update();
            if k > 0 && updating.update(&view, &mut out, arrive.len()) {
                assert!(may, "{spec}, quantum {k}: brought up to date after saying it may not");
                updated += 1;
            } else {
                out.reset(programs.len());
                updating.decide(&view, &mut out);
            }
            let mut want = Decision::default();
            want.reset(programs.len());
            fresh.decide(&view, &mut want);
            assert_eq!(out, want, "{spec}, quantum {k}: brought up to date, against decided afresh");
        }
        updated
    }

    #[test]
    fn a_decision_brought_up_to_date_is_the_fresh_one() {
        // On 8 CPUs: rigid jobs that fit are served by the update (quanta 1, 2 and 5), and so is
        // one that must wait (3); a departure that lets the waiting job in (4), a CPU fewer to
        // manage (6), a decision that left a job waiting (7) and a malleable newcomer (8) each
        // need a fresh decision.
        let rigid = |n: &[u32]| n.iter().map(|&p| Some(p)).collect::<Vec<_>>();
        let steps: Vec<Step> = vec![
            (vec![], rigid(&[2, 3]), false),
            (vec![0], rigid(&[1]), false),
            (vec![], rigid(&[4]), false),
            (vec![], rigid(&[2]), false),
            (vec![0], vec![], false),
            (vec![], rigid(&[1]), false),
            (vec![], vec![], true),
            (vec![], vec![None], false),
            (vec![2], rigid(&[1]), false),
        ];
        for spec in UPDATING {
            assert_eq!(follow(spec, &Topology::flat(8), 8, &steps), 4, "{spec}");
        }
    }

    proptest! {
        #[test]
        fn updated_decisions_match_fresh_ones((cpus, steps) in (1u32..=24).prop_flat_map(|c| (Just(c), steps(c)))) {
            // A flat machine, and one of two-thread cores in fours under an L3 (burst rounds to
            // its domains).
            let infos: Vec<CpuInfo> = (0..cpus)
                .map(|cpu| CpuInfo { cpu, package: Some(0), numa: Some(0), l3: Some(cpu / 8), core: Some(cpu / 2) })
                .collect();
            for topology in [Topology::flat(cpus), Topology::from_cpus(&infos).unwrap()] {
                for spec in UPDATING {
                    follow(spec, &topology, cpus, &steps);
                }
            }
        }
    }
}
