//! Criterion benchmark of the simulator: a generated workload run quantum by quantum (events per
//! second) and with fast-forward, under equipartition and gang. `cpumgr sim --bench` prints the
//! figures recorded in docs/EXPERIMENTS.md.

use cpumgr_core::{policies, Topology};
use cpumgr_sim::generate::{Generator, Model};
use cpumgr_sim::{run, SimConfig};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let mut g = Generator::new(Model::Poisson, 2_000, 256);
    g.mean_runtime = 5.0;
    g.max_size = 32;
    let jobs: Vec<_> = g.iter().collect();
    let t = Topology::flat(256);
    let mut group = c.benchmark_group("sim");
    for policy in ["equipartition", "gang"] {
        for ff in [false, true] {
            let cfg = SimConfig { fast_forward: ff, ..SimConfig::default() };
            let events = run(&t, policy, policies::build_simulated(policy).unwrap(), jobs.clone(), &cfg, &mut ())
                .unwrap()
                .events;
            group.throughput(Throughput::Elements(events));
            group.bench_function(format!("{policy}/fast_forward={ff}"), |b| {
                b.iter(|| {
                    run(&t, policy, policies::build_simulated(policy).unwrap(), jobs.clone(), &cfg, &mut ()).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
