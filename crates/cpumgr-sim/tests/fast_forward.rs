//! Property: the fast-forward is an optimisation, never a model. On random small workloads
//! (run times of any length, or whole tenths of a second so that ends fall on quantum boundaries,
//! where rounding decides whether the boundary's decision sees the end unless a phase counts as
//! done a rounding's width early; jobs of one phase, or evolving ones of phases that change their
//! request), every policy (`os` too, whose processor sharing steps only when something changed)
//! gives each job the record of a quantum-by-quantum run, and the run the same fragmentation. PDPA
//! says when its searches settled ([`cpumgr_core::SimHints::settled`]): its probe-and-fall-back
//! pattern can repeat three times without being a period to jump over.
//! A lazy run (a space-sharing policy that reads no usage) skips only quiet quanta, so there the
//! records are the quantum-by-quantum run's exactly.

mod common;

use common::Jobs;
use cpumgr_core::Kind;
use cpumgr_core::{policies, sources::synthetic, Topology};
use cpumgr_sim::job::ltomcatv;
use cpumgr_sim::{run, CostModel, JobSpec, SimConfig, SpeedupModel};
use proptest::prelude::*;

const S: f64 = 1e9;

/// How a generated job's parallelism behaves.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Rigid,
    Malleable,
    /// Paper 000's ltomcatv: a serial phase, then a parallel one, twice.
    Evolving,
}

/// One generated job: arrival (s), CPUs, run time (s), and its shape.
fn job() -> impl Strategy<Value = (f64, u32, f64, Shape)> {
    let secs = prop_oneof![0.05..30.0f64, (1u32..300).prop_map(|k| f64::from(k) / 10.0)];
    let shape = prop_oneof![Just(Shape::Rigid), Just(Shape::Malleable), Just(Shape::Evolving)];
    (0.0..40.0f64, 1u32..=8, secs, shape)
}

const POLICIES: &[&str] = &[
    "gang",
    "gang:fill=false",
    "cs",
    "sw-dss",
    "ssw-dss",
    "vtq-dss",
    "vtq-dss:k=1.5",
    "omp-dss",
    "equipartition",
    "pdpa",
    "dss",
    "cluster",
    "llpc",
    "scs",
    "fcfs",
    "burst",
    "static:parts=1",
    "os",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fast_forward_gives_the_quantum_by_quantum_records(
        jobs in prop::collection::vec(job(), 2..9),
        policy in 0..POLICIES.len(),
        resume_ms in prop::sample::select(vec![0.0, 5.0, 60.0]),
        mpl in 0u32..4,
        structured in any::<bool>(),
    ) {
        let t = if structured { synthetic::parse("package:2 core:2 pu:2").unwrap() } else { Topology::flat(8) };
        let mut specs: Vec<JobSpec> = jobs
            .iter()
            .enumerate()
            .map(|(k, &(at, cpus, secs, shape))| {
                let (at, work) = ((at * S) as u64, secs * cpus as f64);
                match shape {
                    Shape::Rigid => JobSpec::rigid(format!("j{k}"), at, cpus, work, SpeedupModel::LINEAR),
                    Shape::Malleable => JobSpec::malleable(format!("j{k}"), at, cpus, work, SpeedupModel::LINEAR),
                    Shape::Evolving => {
                        let mut j = JobSpec::malleable(format!("j{k}"), at, cpus, work, SpeedupModel::LINEAR);
                        j.kind = Kind::Evolving;
                        j.phases = ltomcatv(cpus, 2, secs / 4.0, work / 4.0, &SpeedupModel::LINEAR).into();
                        j
                    }
                }
            })
            .collect();
        specs.sort_by_key(|j| j.arrival);
        let spec = POLICIES[policy];
        let go = |fast_forward: bool| {
            let cost = CostModel { resume_ms, ..CostModel::default() };
            let cfg = SimConfig { cost, mpl, fast_forward, ..SimConfig::default() };
            let mut out = Jobs::default();
            let s = run(&t, spec, policies::build_simulated(spec).unwrap(), specs.clone(), &cfg, &mut out).unwrap();
            out.0.sort_by_key(|j| j.id);
            (s, out.0)
        };
        let ((fast, fj), (exact, ej)) = (go(true), go(false));
        let lazy = {
            let p = policies::build_simulated(spec).unwrap();
            !p.time_sharing() && !p.reads_usage() && !p.oversubscribes()
        };
        if lazy {
            // A lazy run skips only quanta that change nothing: every record is the
            // quantum-by-quantum run's, bit for bit, and each skipped quantum is a step fewer
            // (the machine's busy time is summed over longer spans: equal up to rounding).
            prop_assert_eq!(&fj, &ej, "{}", spec);
            prop_assert!((fast.utilization - exact.utilization).abs() <= 1e-9, "{spec}: utilisation {} vs {}", fast.utilization, exact.utilization);
            prop_assert!(fast.events + fast.skipped_quanta == exact.events, "{spec}: {} + {} skipped vs {}", fast.events, fast.skipped_quanta, exact.events);
        }
        prop_assert!((fast.fragmentation - exact.fragmentation).abs() <= 1e-6, "{spec}: fragmentation {} vs {}", fast.fragmentation, exact.fragmentation);
        for (x, y) in fj.iter().zip(&ej) {
            prop_assert_eq!((x.id, x.moves), (y.id, y.moves), "{}", spec);
            prop_assert!((x.turnaround - y.turnaround).abs() <= 1e-6 * y.turnaround.max(1.0), "{spec}: {x:?} vs {y:?}");
        }
    }
}
