//! Scale benchmark: generated jobs streamed through the simulator on a large flat machine; prints
//! the wall time, events per second and the peak resident memory, and a progress line every
//! `jobs / 10` finished jobs (to show memory stays flat as jobs finish).
//!
//! `cargo run --release -p cpumgr-sim --example scale -- [JOBS] [CPUS] [POLICY] [MODEL]`
//! (defaults: 1 000 000 jobs, 100 000 CPUs, equipartition, `poisson`). `poisson`: sizes powers of
//! two up to 1 024 CPUs, exponential run times of mean 60 s, load 0.7; `lublin`: the Lublin
//! model's sizes (up to the machine) and run times, whose arrivals for 1 M jobs on 100 000 CPUs
//! pass the simulator's 10⁹ s limit. Figures: docs/EXPERIMENTS.md, Speed.

use std::time::Instant;

use cpumgr_core::{policies, Topology};
use cpumgr_sim::bench::{peak_rss_mib, thread_cpu_seconds};
use cpumgr_sim::generate::{Generator, Model};
use cpumgr_sim::{run, JobRecord, Observer, SimConfig};

/// Prints a progress line every `every` finished jobs.
struct Progress {
    started: Instant,
    every: u64,
    done: u64,
}

impl Observer for Progress {
    fn job(&mut self, _record: &JobRecord) {
        self.done += 1;
        if self.done.is_multiple_of(self.every) {
            println!(
                "  {:>9} jobs finished  {:>8.1} s  peak RSS {:.0} MiB",
                self.done,
                self.started.elapsed().as_secs_f64(),
                peak_rss_mib()
            );
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let jobs: u64 = args.first().map_or(Ok(1_000_000), |s| s.parse())?;
    let cpus: u32 = args.get(1).map_or(Ok(100_000), |s| s.parse())?;
    let policy = args.get(2).map_or("equipartition", String::as_str);
    let model = match args.get(3).map_or("poisson", String::as_str) {
        "poisson" => Model::Poisson,
        "lublin" => Model::Lublin,
        other => return Err(format!("model {other:?}: poisson or lublin").into()),
    };
    let mut g = Generator::new(model, jobs, cpus);
    g.max_size = 1024.min(cpus);
    let t = Topology::flat(cpus);
    println!(
        "scale: {jobs} {model:?} jobs on {cpus} CPUs under {policy}; machine built, peak RSS {:.0} MiB",
        peak_rss_mib()
    );
    let started = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut obs = Progress { started, every: (jobs / 10).max(1), done: 0 };
    let s = run(&t, policy, policies::build_simulated(policy)?, g.iter(), &SimConfig::default(), &mut obs)?;
    let wall = started.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - cpu0;
    println!(
        "scale: {} jobs, {} events in {wall:.2} s wall, {cpu:.2} s CPU on the engine thread = {:.3} M events/s ({:.3} M per engine CPU second), {} quanta skipped, makespan {:.3e} s, utilisation {:.3}, peak RSS {:.0} MiB",
        s.jobs,
        s.events,
        s.events as f64 / wall / 1e6,
        s.events as f64 / cpu / 1e6,
        s.skipped_quanta,
        s.makespan,
        s.utilization,
        peak_rss_mib()
    );
    Ok(())
}
