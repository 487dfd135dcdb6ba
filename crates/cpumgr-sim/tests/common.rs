//! Helpers shared by the integration tests.

#![allow(dead_code)]

use cpumgr_core::{policies, Topology};
use cpumgr_sim::{presets, run, JobRecord, Observer, RunSummary, SimConfig, Workload};

/// Collects every finished job.
#[derive(Default)]
pub struct Jobs(pub Vec<JobRecord>);

impl Observer for Jobs {
    fn job(&mut self, r: &JobRecord) {
        self.0.push(r.clone());
    }
}

/// Runs `w` under `policy` on a flat machine of the workload's size.
pub fn run_workload(w: &Workload, policy: &str, cfg: &SimConfig) -> (RunSummary, Vec<JobRecord>) {
    let t = Topology::flat(w.cpus.expect("sized workload"));
    let mut cfg = cfg.clone();
    cfg.mpl = w.mpl;
    cfg.quantum = cfg.quantum.or(w.quantum);
    let mut jobs = Jobs::default();
    let s = run(&t, policy, policies::build_simulated(policy).unwrap(), w.jobs(), &cfg, &mut jobs)
        .unwrap_or_else(|e| panic!("{policy}: {e}"));
    (s, jobs.0)
}

/// Runs preset `name` under `policy` with the default configuration and the preset's own cost
/// model where it names one (as `cpumgr sim --preset` does).
pub fn run_preset(name: &str, policy: &str) -> (RunSummary, Vec<JobRecord>) {
    let w = presets::build(name).unwrap();
    let cfg = SimConfig { cost: w.cost.unwrap_or_default(), ..SimConfig::default() };
    run_workload(&w, policy, &cfg)
}

/// Mean of `f` over the jobs of class `class`.
pub fn class_mean(jobs: &[JobRecord], class: &str, f: impl Fn(&JobRecord) -> f64) -> f64 {
    let xs: Vec<f64> = jobs.iter().filter(|j| &*j.class == class).map(f).collect();
    assert!(!xs.is_empty(), "no jobs of class {class}");
    xs.iter().sum::<f64>() / xs.len() as f64
}
