//! One full quantum (decide + place) for 1024 programs on a 1024-CPU hierarchical machine, for
//! every policy in the catalog. Target: ≤ 1 ms each. Run: `cargo bench -p cpumgr-core --bench decide`.

use cpumgr_core::placer::Placer;
use cpumgr_core::policies::{self, CATALOG};
use cpumgr_core::topology::{CpuInfo, Topology};
use cpumgr_core::{Decision, Kind, Program, SpeedupReport, View};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// 2 packages × 2 NUMA × 8 L3 × 16 cores × 2 SMT = 1024 CPUs.
fn machine() -> Topology {
    let infos: Vec<CpuInfo> = (0..1024u32)
        .map(|cpu| {
            let core = cpu / 2;
            CpuInfo { cpu, package: Some(core / 256), numa: Some(core / 128), l3: Some(core / 16), core: Some(core) }
        })
        .collect();
    Topology::from_cpus(&infos).unwrap()
}

/// 1024 programs with requests 1–8, a tenth of them rigid, all with a speedup report.
fn programs() -> Vec<Program> {
    (0..1024u64)
        .map(|i| {
            let request = (i % 8 + 1) as u32;
            let mut p = Program::new(i + 1, format!("p{i}"), request);
            if i % 10 == 0 {
                p.kind = Kind::Rigid(request);
            }
            p.speedup = SpeedupReport::new(request, request as f64 * 0.8);
            p
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let topology = machine();
    let managed = topology.cpus().clone();
    let progs = programs();
    let mut group = c.benchmark_group("decide+place/1024x1024");
    for info in CATALOG {
        let mut policy = policies::build(info.name).unwrap();
        let view = View { now: 0, quantum: 100_000_000, topology: &topology, cpus: 1024, programs: &progs };
        for p in &progs {
            policy.on_arrival(&view, p.id);
        }
        let mut placer = Placer::new();
        let mut decision = Decision::default();
        let mut sets = Vec::new();
        let mut now = 0;
        group.bench_function(BenchmarkId::from_parameter(info.name), |b| {
            b.iter(|| {
                now += 100_000_000;
                let view = View { now, ..view };
                decision.reset(progs.len());
                policy.decide(&view, &mut decision);
                if !policy.oversubscribes() {
                    placer.place(&topology, &managed, &progs, &decision, &mut sets);
                }
                std::hint::black_box(&sets);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
