//! Property tests of every policy in the catalog: random hierarchical machines of 1–1024 CPUs,
//! random program sets of 0–2000 programs (in three bands: 0–199, 200–999, 1000–2000), several
//! quanta with the placer in the loop and speedup reports that follow the allocation.
//!
//! Invariants checked for every policy, every quantum:
//! - the placement is valid: no CPU given twice, only managed CPUs, sets as large as counts, and
//!   the running programs' counts never exceed the managed CPUs (except `os`, which by design
//!   oversubscribes and is not placed);
//! - no program gets more than it wants, except under PDPA's P_TEST probe (at most two more, and
//!   only while the policy says the program is in P_TEST);
//! - a rigid program gets all its processes (up to the machine) or nothing, except under SCS,
//!   whose own partition rule is checked instead: nothing, or between `processes / mpl` and its
//!   processes, and exactly `processes / mpl` for every running job while any job waits;
//! - equal requests under `equipartition` get counts that differ by at most one CPU;
//! - determinism: a second run from the same inputs decides exactly the same;
//! - a policy that says it does not read usage figures ([`SimHints::reads_usage`]) decides the same
//!   when every program's CPU time and speedup report are scrambled before each quantum;
//! - a [`Policy::refit`] right after a decision decides the same, and refits between quanta
//!   change none of the quanta that follow (a kicked step does not turn the rotation).
//!
//! Besides the defaults, a few policies run with non-default parameters ([`VARIANTS`]).

use proptest::prelude::*;

use super::pdpa::{Pdpa, State};
use super::{scs, CATALOG};
use crate::cpuset::CpuSet;
use crate::params::{Params, PolicySpec};
use crate::placer::{validate, Placer};
use crate::policy::{Decision, Policy, View};
use crate::program::{Kind, Program, ProgramId, Request, SpeedupReport};
use crate::topology::{CpuInfo, Topology};

/// A machine shape: packages × NUMA per package × L3 per NUMA × cores per L3 × SMT.
fn machine() -> impl Strategy<Value = Topology> {
    (1u32..=4, 1u32..=2, 1u32..=4, 1u32..=32, 1u32..=2).prop_map(|(pk, nu, l3, co, smt)| {
        let mut infos = Vec::new();
        'outer: for p in 0..pk {
            for n in 0..nu {
                for l in 0..l3 {
                    for c in 0..co {
                        for _ in 0..smt {
                            let cpu = infos.len() as u32;
                            if cpu >= 1024 {
                                break 'outer;
                            }
                            infos.push(CpuInfo {
                                cpu,
                                package: Some(p),
                                numa: Some(p * nu + n),
                                l3: Some((p * nu + n) * l3 + l),
                                core: Some(((n * l3) + l) * co + c),
                            });
                        }
                    }
                }
            }
        }
        Topology::from_cpus(&infos).expect("generated machines are valid")
    })
}

/// A program: kind, request bounds, weight, and an optional speedup report.
fn program() -> impl Strategy<Value = (u8, u32, u32, u32, u8, f64)> {
    (0u8..4, 1u32..=64, 0u32..=8, 0u32..=64, 1u8..=4, 0.2f64..1.0)
}

fn build_programs(raw: &[(u8, u32, u32, u32, u8, f64)]) -> Vec<Program> {
    raw.iter()
        .enumerate()
        .map(|(i, &(kind, wanted, min, extra, weight, eff))| {
            let mut p = Program::new(i as u64 + 1, format!("p{i}"), wanted);
            p.kind = match kind {
                0 => Kind::Malleable,
                1 => Kind::Moldable,
                2 => Kind::Rigid(wanted),
                _ => Kind::Evolving,
            };
            let min = min.min(wanted);
            p.request = Request { wanted, min, max: wanted + extra };
            p.weight = weight as f64;
            p.arrival = i as u64 * 1_000_000;
            p.speedup = SpeedupReport::new(wanted, wanted as f64 * eff).filter(|_| eff < 0.9);
            p
        })
        .collect()
}

/// Policies with non-default parameters, run beside the catalog's defaults.
const VARIANTS: &[&str] = &[
    "equipartition:redistribute=true",
    "cluster:size=2",
    "sw-dss:k=2",
    "vtq-dss:k=0.5",
    "pdpa:base=2,step=1,min_eff=0.5,tests=1",
    "scs:mpl=2",
];

/// Every spec the properties run: the catalog with its defaults, then [`VARIANTS`].
fn specs() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|i| i.name).chain(VARIANTS.iter().copied())
}

/// What a run does besides deciding each quantum.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Twist {
    /// Nothing.
    None,
    /// The programs' usage figures are replaced with unrelated values before each decision.
    Scramble,
    /// Each decision is followed by a [`Policy::refit`] on the same view, which must agree.
    Refit,
}

/// Runs `quanta` quanta of `spec` (built through the catalog, or as a concrete [`Pdpa`] so its
/// states can be asked), checking the invariants; returns every quantum's sets.
fn run(
    spec: &str,
    topology: &Topology,
    programs: Vec<Program>,
    quanta: u32,
    twist: Twist,
) -> Result<Vec<Vec<CpuSet>>, TestCaseError> {
    let parsed = PolicySpec::parse(spec).expect("test specs parse");
    if parsed.name == "pdpa" {
        let params = Params::new(super::pdpa::INFO.name, super::pdpa::INFO.params, &parsed.values).expect("known keys");
        let mut pdpa = Pdpa::new(&params).expect("valid values");
        return run_policy(
            spec,
            &mut pdpa,
            |p, id| p.state(id) == Some(State::Test),
            topology,
            programs,
            quanta,
            twist,
        );
    }
    let mut policy = super::build(spec).expect("test specs build");
    run_policy(spec, policy.as_mut(), |_, _| false, topology, programs, quanta, twist)
}

/// SCS's `mpl` parameter in `spec`, when `spec` is SCS.
fn scs_mpl(spec: &str) -> Option<u32> {
    let parsed = PolicySpec::parse(spec).ok().filter(|p| p.name == "scs")?;
    let params = Params::new(scs::INFO.name, scs::INFO.params, &parsed.values).ok()?;
    params.u32("mpl").ok()
}

/// The loop behind [`run`]: `probing(policy, id)` says whether `id` may exceed its request now.
fn run_policy<P: Policy + ?Sized>(
    spec: &str,
    policy: &mut P,
    probing: impl Fn(&P, ProgramId) -> bool,
    topology: &Topology,
    mut programs: Vec<Program>,
    quanta: u32,
    twist: Twist,
) -> Result<Vec<Vec<CpuSet>>, TestCaseError> {
    let managed = topology.cpus().clone();
    let cpus = managed.len() as u32;
    let quantum = 100_000_000;
    let mpl = scs_mpl(spec);
    for i in 0..programs.len() {
        let view = View { now: 0, quantum, topology, cpus, programs: &programs[..=i] };
        policy.on_arrival(&view, programs[i].id);
    }
    let mut placer = Placer::new();
    let (mut decision, mut again) = (Decision::default(), Decision::default());
    let mut history = Vec::new();
    for q in 0..quanta {
        if twist == Twist::Scramble {
            for (k, p) in programs.iter_mut().enumerate() {
                let x = (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ q as u64;
                p.cpu_time = x % (1 << 40);
                p.speedup =
                    SpeedupReport::new((x % 64) as u32 + 1, (x % 1000) as f64 / 10.0).filter(|_| !x.is_multiple_of(3));
            }
        }
        let view = View { now: q as u64 * quantum, quantum, topology, cpus, programs: &programs };
        decision.reset(programs.len());
        policy.decide(&view, &mut decision);
        prop_assert_eq!(decision.allocations.len(), programs.len());
        if twist == Twist::Refit {
            again.reset(programs.len());
            policy.refit(&view, &mut again);
            prop_assert!(
                again.allocations == decision.allocations,
                "{}, quantum {}: a refit decides otherwise",
                spec,
                q
            );
        }
        let mut sets = Vec::new();
        if !policy.oversubscribes() {
            placer.place(topology, &managed, &programs, &decision, &mut sets);
            if let Err(e) = validate(&managed, &decision, &sets) {
                return Err(TestCaseError::fail(format!("{spec}, quantum {q}: {e}")));
            }
        }
        let count = |i: usize| {
            let a = decision.allocations[i];
            if a.running {
                a.count
            } else {
                0
            }
        };
        let someone_waits = (0..programs.len()).any(|i| count(i) == 0);
        for (i, p) in programs.iter().enumerate() {
            let (c, wants) = (count(i), p.wants());
            if c > wants {
                prop_assert!(
                    probing(policy, p.id) && c <= wants + 2,
                    "{}: {} got {} > wants {}",
                    spec,
                    p.name,
                    c,
                    wants
                );
            }
            if let Some(mpl) = mpl {
                // SCS's partition rule (paper 002 §3.1), for every job it runs.
                let initial = scs::initial_allocation(wants, mpl, cpus);
                prop_assert!(
                    c == 0 || (initial..=wants.min(cpus)).contains(&c),
                    "{}: {} ({} procs) got {}",
                    spec,
                    p.name,
                    wants,
                    c
                );
                prop_assert!(
                    c == 0 || !someone_waits || c == initial,
                    "{}: {} grew to {} while a job waits",
                    spec,
                    p.name,
                    c
                );
            } else if let (Some(n), false) = (p.kind.rigid_procs(), spec == "os") {
                prop_assert!(
                    c == 0 || c == n.min(cpus),
                    "{}: rigid {} ({} procs) got {} on {} CPUs",
                    spec,
                    p.name,
                    n,
                    c,
                    cpus
                );
            }
        }
        if spec.starts_with("equipartition") {
            for i in 0..programs.len() {
                for j in i + 1..programs.len() {
                    let (a, b) = (&programs[i], &programs[j]);
                    if a.kind.rigid_procs().is_none() && b.kind.rigid_procs().is_none() && a.wants() == b.wants() {
                        let (ca, cb) = (decision.allocations[i].count, decision.allocations[j].count);
                        prop_assert!(ca.abs_diff(cb) <= 1, "{}: equal requests got {} and {}", spec, ca, cb);
                    }
                }
            }
        }
        for (i, p) in programs.iter_mut().enumerate() {
            let a = decision.allocations[i];
            p.running = a.running && a.count > 0;
            if p.running && !sets.is_empty() {
                p.cpus = sets[i].clone();
                p.cpu_time += quantum * a.count as u64;
            }
            // A program that measures its speedup reports it for the CPUs it just ran on, at
            // its own efficiency, as a runtime would (this drives PDPA's search to its probes).
            if let (Some(r), true) = (p.speedup, p.running) {
                p.speedup = SpeedupReport::new(a.count, a.count as f64 * r.efficiency());
            }
        }
        history.push(sets);
    }
    Ok(history)
}

/// Runs every spec twice on the same inputs: the invariants hold and both runs decide the same.
fn check_every_spec(
    topology: &Topology,
    raw: &[(u8, u32, u32, u32, u8, f64)],
    quanta: u32,
) -> Result<(), TestCaseError> {
    let programs = build_programs(raw);
    for spec in specs() {
        let first = run(spec, topology, programs.clone(), quanta, Twist::None)?;
        let second = run(spec, topology, programs.clone(), quanta, Twist::None)?;
        prop_assert_eq!(&first, &second, "{} is not deterministic", spec);
        let refitted = run(spec, topology, programs.clone(), quanta, Twist::Refit)?;
        prop_assert_eq!(&first, &refitted, "{} turns at a refit", spec);
        if !super::build_simulated(spec).expect("test specs build").reads_usage() {
            let blind = run(spec, topology, programs.clone(), quanta, Twist::Scramble)?;
            prop_assert_eq!(&first, &blind, "{} says it does not read usage figures, but decides on them", spec);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every policy on machines of up to 1024 CPUs and up to 199 programs, eight quanta (enough
    /// for PDPA to settle and probe).
    #[test]
    fn every_policy_keeps_the_invariants(topology in machine(), raw in proptest::collection::vec(program(), 0..200)) {
        check_every_spec(&topology, &raw, 8)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Every policy with 200–999 programs: around and past the CPU count of most machines.
    #[test]
    fn every_policy_keeps_the_invariants_with_hundreds_of_programs(topology in machine(), raw in proptest::collection::vec(program(), 200..1000)) {
        check_every_spec(&topology, &raw, 3)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]

    /// Every policy with 1000–2000 programs (more programs than CPUs on most machines).
    #[test]
    fn every_policy_copes_with_thousands_of_programs(topology in machine(), raw in proptest::collection::vec(program(), 1000..=2000)) {
        check_every_spec(&topology, &raw, 2)?;
    }
}

/// PDPA's probe is reached by the property loop (so the P_TEST exemption above is exercised,
/// not vacuous): one efficient program alone on a machine goes over its request.
#[test]
fn the_property_loop_reaches_pdpa_probes() {
    let topology = Topology::flat(32);
    let programs = build_programs(&[(0, 6, 0, 0, 1, 0.85)]);
    let history = run("pdpa", &topology, programs, 8, Twist::None).expect("invariants hold");
    assert!(history.iter().any(|sets| sets[0].len() > 6), "{history:?}");
}
