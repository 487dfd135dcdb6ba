//! Property tests of every policy in the catalog: random hierarchical machines of 1–1024 CPUs,
//! random program sets of 0–2000 programs, several quanta with the placer in the loop.
//!
//! Invariants checked for every policy, every quantum:
//! - the placement is valid: no CPU given twice, only managed CPUs, sets as large as counts, and
//!   the running programs' counts never exceed the managed CPUs (except `os`, which by design
//!   oversubscribes and is not placed);
//! - no program gets more than it wants, except PDPA's P_TEST probe;
//! - a rigid program gets all its processes (up to the machine) or nothing, except under SCS,
//!   whose partition rule gives it a share of its processes (it co-schedules with itself);
//! - equal requests under `equipartition` get counts that differ by at most one CPU;
//! - determinism: a second run from the same inputs decides exactly the same.

use proptest::prelude::*;

use super::CATALOG;
use crate::cpuset::CpuSet;
use crate::placer::{validate, Placer};
use crate::policy::{Decision, View};
use crate::program::{Kind, Program, Request, SpeedupReport};
use crate::topology::{CpuInfo, Topology};

/// A machine shape: packages × NUMA per package × L3 per NUMA × cores per L3 × SMT.
fn machine() -> impl Strategy<Value = Topology> {
    (1u32..=4, 1u32..=2, 1u32..=4, 1u32..=32, 1u32..=2)
        .prop_map(|(pk, nu, l3, co, smt)| {
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
        .map(|(i, &(kind, now, min, extra, weight, eff))| {
            let mut p = Program::new(i as u64 + 1, format!("p{i}"), now);
            p.kind = match kind {
                0 => Kind::Malleable,
                1 => Kind::Moldable,
                2 => Kind::Rigid(now),
                _ => Kind::Evolving,
            };
            let min = min.min(now);
            p.request = Request { now, min, max: now + extra };
            p.weight = weight as f64;
            p.arrival = i as u64 * 1_000_000;
            p.speedup = (eff < 0.9).then_some(SpeedupReport { cpus: now, speedup: now as f64 * eff });
            p
        })
        .collect()
}

/// Runs `quanta` quanta of `spec`, checking the invariants; returns every quantum's sets.
fn run(spec: &str, topology: &Topology, mut programs: Vec<Program>, quanta: u32) -> Result<Vec<Vec<CpuSet>>, TestCaseError> {
    let mut policy = super::build(spec).expect("catalog policies build with defaults");
    let managed = topology.cpus().clone();
    let cpus = managed.len() as u32;
    let quantum = 100_000_000;
    for i in 0..programs.len() {
        let view = View { now: 0, quantum, topology, cpus, programs: &programs[..=i] };
        policy.on_arrival(&view, programs[i].id);
    }
    let mut placer = Placer::new();
    let mut decision = Decision::default();
    let mut history = Vec::new();
    for q in 0..quanta {
        let view = View { now: q as u64 * quantum, quantum, topology, cpus, programs: &programs };
        decision.reset(programs.len());
        policy.decide(&view, &mut decision);
        prop_assert_eq!(decision.allocations.len(), programs.len());
        let mut sets = Vec::new();
        if !policy.oversubscribes() {
            placer.place(topology, &managed, &programs, &decision, &mut sets);
            if let Err(e) = validate(&managed, &decision, &sets) {
                return Err(TestCaseError::fail(format!("{spec}, quantum {q}: {e}")));
            }
        }
        for (i, p) in programs.iter().enumerate() {
            let a = decision.allocations[i];
            let count = if a.running { a.count } else { 0 };
            if spec != "pdpa" {
                prop_assert!(count <= p.wants(), "{}: {} got {} > wants {}", spec, p.name, count, p.wants());
            }
            if let (Some(n), false) = (p.kind.rigid_procs(), matches!(spec, "scs" | "os")) {
                prop_assert!(
                    count == 0 || count == n.min(cpus),
                    "{}: rigid {} ({} procs) got {} on {} CPUs",
                    spec,
                    p.name,
                    n,
                    count,
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
        }
        history.push(sets);
    }
    Ok(history)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every policy on machines of up to 1024 CPUs and up to 200 programs, three quanta.
    #[test]
    fn every_policy_keeps_the_invariants(topology in machine(), raw in proptest::collection::vec(program(), 0..200)) {
        let programs = build_programs(&raw);
        for info in CATALOG {
            let first = run(info.name, &topology, programs.clone(), 3)?;
            let second = run(info.name, &topology, programs.clone(), 3)?;
            prop_assert_eq!(first, second, "{} is not deterministic", info.name);
        }
        let redistributed = run("equipartition:redistribute=true", &topology, programs, 3);
        redistributed?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// Every policy with up to 2000 programs (more programs than CPUs on most machines).
    #[test]
    fn every_policy_copes_with_thousands_of_programs(topology in machine(), raw in proptest::collection::vec(program(), 1000..2000)) {
        let programs = build_programs(&raw);
        for info in CATALOG {
            run(info.name, &topology, programs.clone(), 2)?;
        }
    }
}
