//! Scale benchmark: generated Lublin jobs (up to 1 024 CPUs each) streamed through the simulator
//! on a large flat machine; prints the wall time, events per second and the peak resident memory,
//! and a progress line every `jobs / 10` finished jobs (to show memory stays flat as jobs finish).
//!
//! `cargo run --release -p cpumgr-sim --example scale -- [JOBS] [CPUS] [POLICY]`
//! (defaults: 1 000 000 jobs, 100 000 CPUs, equipartition). Figures: docs/EXPERIMENTS.md, Speed.

use std::time::Instant;

use cpumgr_core::{policies, Topology};
use cpumgr_sim::generate::{Generator, Model};
use cpumgr_sim::{run, JobRecord, Observer, SimConfig};

/// Peak resident set size of this process, in MiB (Linux `VmHWM`).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Prints a progress line every `every` finished jobs.
struct Progress {
    started: Instant,
    every: u64,
    done: u64,
}

impl Observer for Progress {
    fn job(&mut self, _record: &JobRecord) {
        self.done += 1;
        if self.done % self.every == 0 {
            println!("  {:>9} jobs finished  {:>8.1} s  peak RSS {:.0} MiB", self.done, self.started.elapsed().as_secs_f64(), peak_rss_mib());
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let jobs: u64 = args.first().map_or(Ok(1_000_000), |s| s.parse())?;
    let cpus: u32 = args.get(1).map_or(Ok(100_000), |s| s.parse())?;
    let policy = args.get(2).map_or("equipartition", String::as_str);
    let mut g = Generator::new(Model::Lublin, jobs, cpus);
    g.max_size = 1024.min(cpus);
    let t = Topology::flat(cpus);
    println!("scale: {jobs} Lublin jobs on {cpus} CPUs under {policy}; machine built, peak RSS {:.0} MiB", peak_rss_mib());
    let started = Instant::now();
    let mut obs = Progress { started, every: (jobs / 10).max(1), done: 0 };
    let s = run(&t, policy, policies::build(policy)?, g.iter(), &SimConfig::default(), &mut obs)?;
    let wall = started.elapsed().as_secs_f64();
    println!(
        "scale: {} jobs, {} events in {wall:.1} s = {:.3} M events/s, {} quanta skipped, makespan {:.3e} s, utilisation {:.3}, peak RSS {:.0} MiB",
        s.jobs,
        s.events,
        s.events as f64 / wall / 1e6,
        s.skipped_quanta,
        s.makespan,
        s.utilization,
        peak_rss_mib()
    );
    Ok(())
}
