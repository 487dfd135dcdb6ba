//! The simulator's entry point: a policy and jobs in, the run's figures out.

use std::time::Instant;

use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{Nanos, SimHints, Topology};

use crate::config::SimConfig;
use crate::error::SimError;
use crate::feed::{self, Feed};
use crate::job::JobSpec;
use crate::metrics::RunSummary;
use crate::observer::Observer;

const NS: f64 = 1e9;

/// Runs `jobs` (in arrival order; a job listed before an earlier arrival arrives when it is
/// reached) under `policy` on the `topology`'s CPUs, streaming trace events and finished jobs to
/// `obs`, and returns the run's figures. `spec` names the policy in the results.
/// The jobs are produced ahead, on a thread of their own (`feed.rs`).
pub fn run(
    topology: &Topology,
    spec: &str,
    policy: Box<dyn SimHints>,
    jobs: impl IntoIterator<Item = JobSpec, IntoIter: Send>,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
) -> Result<RunSummary, SimError> {
    let started = Instant::now();
    let cpus = topology.cpus().len() as u32;
    feed::ahead(jobs.into_iter(), cpus, &cfg.cost, |jobs| dispatch(topology, spec, policy, jobs, cfg, obs, started))
}

/// [`run`], on the jobs from the feed: the quantum and the admission limit (the run's, else the
/// policy's hints), the trace's start, and the engine that models the policy: processor sharing
/// for one that oversubscribes (`os`, `sharing.rs`), the managed engine (`engine/`) for the others.
fn dispatch(
    topology: &Topology,
    spec: &str,
    policy: Box<dyn SimHints>,
    pending: Feed,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
    started: Instant,
) -> Result<RunSummary, SimError> {
    let max_quantum = (crate::limits::MAX_QUANTUM_SECONDS * NS) as Nanos;
    let quantum = cfg.quantum.or(policy.preferred_quantum()).unwrap_or(100_000_000).clamp(1, max_quantum);
    let managed = topology.cpus().clone();
    let mpl = if cfg.mpl > 0 { cfg.mpl } else { policy.preferred_mpl().unwrap_or(0) };
    if obs.wants_events() {
        let kind = EventKind::Start { source: "sim".into(), cpus: managed.clone(), policy: spec.to_string(), quantum };
        obs.event(&Event { t: 0, program: None, kind });
    }
    if policy.oversubscribes() {
        return crate::sharing::run(managed, spec, quantum, pending, &SimConfig { mpl, ..cfg.clone() }, obs, started);
    }
    crate::engine::run(topology, managed, spec, policy, quantum, mpl, pending, cfg, obs, started)
}
