use cpumgr_core::{policies, Topology};
use cpumgr_sim::generate::{Generator, Model};
use cpumgr_sim::{run, SimConfig};
fn main() {
    let reps: usize = std::env::args().nth(1).map_or(20, |s| s.parse().unwrap());
    let policy = std::env::args().nth(2).unwrap_or("equipartition".into());
    let mut g = Generator::new(Model::Poisson, 20_000, 1024);
    g.mean_runtime = 2.0;
    g.max_size = 16;
    g.load = 0.8;
    let t = Topology::flat(1024);
    let cfg = SimConfig { fast_forward: false, ..SimConfig::default() };
    let c0 = cpumgr_sim::bench::cpu_seconds();
    let mut ev = 0;
    for _ in 0..reps {
        let s = run(&t, &policy, policies::build(&policy).unwrap(), g.iter(), &cfg, &mut ()).unwrap();
        ev += s.events;
    }
    let c = cpumgr_sim::bench::cpu_seconds() - c0;
    println!("{ev} events {c:.3} s CPU {:.2} M/s", ev as f64 / c / 1e6);
}
