//! Shared nodes: where a job's processes go, and what each node's policy gives them.
//!
//! A node has `P` CPUs and takes up to `K × P` processes (Slurm's `OverSubscribe=FORCE:K`). A
//! job's processes fill free CPUs first, node by node in index order, and only then the second
//! slot of each CPU, and so on: the nodes are oversubscribed only when no free CPU is left. Each
//! node runs its own instance of a cpumgr policy on the parts of jobs it holds, in job order, as
//! the node's manager would: at every start or end on the node it decides again. A part of `n`
//! processes given `c` CPUs progresses at the cost model's rate for `c` CPUs and its threads
//! ([`CostModel::rate`]) over its rate alone on `n` (`os`: every thread on every CPU, each holding
//! `min(1, P / T)` of one). A job spread over nodes goes at the pace of its slowest part (its
//! processes synchronise).

use cpumgr_core::policy::SimHints;
use cpumgr_core::{Decision, Kind, Program, ProgramId, Request, Topology, View};

use super::ClusterJob;
use crate::cost::CostModel;
use crate::job::JobSpec;

/// One node.
struct Node {
    /// Processes placed on it.
    used: u32,
    /// The parts of jobs on it, in job order: the job, its processes here, and the CPUs the
    /// node's last decision gave it (what its program shows as running and its threads).
    parts: Vec<(usize, u32, u32)>,
    /// Its policy (none for `os`, which the node does not consult: every thread runs).
    policy: Option<Box<dyn SimHints>>,
}

/// The shared nodes of a cluster.
pub(crate) struct SharedNodes {
    nodes: Vec<Node>,
    /// CPUs per node.
    cpus: u32,
    /// Processes per CPU at most.
    layers: u32,
    /// Every thread runs on every CPU of its node (`os`).
    oversubscribes: bool,
    topology: Topology,
    /// Scratch: a node's view and decision.
    programs: Vec<Program>,
    decision: Decision,
}

/// The pace of each part of a job, as one node's decision gives it.
pub(crate) struct Pace {
    /// The job.
    pub job: usize,
    /// The node.
    pub node: usize,
    /// Its rate over its rate alone (0 to 1).
    pub pace: f64,
}

impl SharedNodes {
    /// `nodes` nodes of `cpus` CPUs taking `layers` processes per CPU, each arbitrated by what
    /// `policy` builds (`None`: the unmanaged `os`).
    pub fn new(nodes: u32, cpus: u32, layers: u32, mut policy: Option<impl FnMut() -> Box<dyn SimHints>>) -> Self {
        let oversubscribes = policy.is_none();
        SharedNodes {
            nodes: (0..nodes)
                .map(|_| Node { used: 0, parts: Vec::new(), policy: policy.as_mut().map(|build| build()) })
                .collect(),
            cpus,
            layers,
            oversubscribes,
            topology: Topology::flat(cpus),
            programs: Vec::new(),
            decision: Decision::default(),
        }
    }

    /// Processes the nodes take in all.
    pub fn capacity(&self) -> u32 {
        self.nodes.len() as u32 * self.cpus * self.layers
    }

    /// Places job `job`'s `procs` processes (free CPUs first, see the module documentation);
    /// returns its parts, node and processes, in node order. The caller has checked that they
    /// fit.
    pub fn place(&mut self, job: usize, mut procs: u32) -> Vec<(usize, u32)> {
        let mut parts = Vec::new();
        for layer in 1..=self.layers {
            for (k, node) in self.nodes.iter_mut().enumerate() {
                if procs == 0 {
                    return merged(parts);
                }
                let room = (layer * self.cpus).saturating_sub(node.used);
                let here = room.min(procs);
                if here == 0 {
                    continue;
                }
                node.used += here;
                procs -= here;
                // One part per job and node, whatever the layers it fills there.
                let at = node.parts.partition_point(|&(j, _, _)| j < job);
                match node.parts.get_mut(at) {
                    Some((j, p, _)) if *j == job => *p += here,
                    _ => node.parts.insert(at, (job, here, 0)),
                }
                parts.push((k, here));
            }
        }
        debug_assert_eq!(procs, 0, "the caller checked that the job fits");
        merged(parts)
    }

    /// Takes job `job`'s parts (node, processes) off their nodes.
    pub fn remove(&mut self, job: usize, parts: impl IntoIterator<Item = (usize, u32)>) {
        for (k, procs) in parts {
            let node = &mut self.nodes[k];
            node.used -= procs;
            node.parts.retain(|&(j, _, _)| j != job);
            if let Some(policy) = node.policy.as_mut() {
                policy.on_exit(ProgramId(job as u64));
            }
        }
    }

    /// Decides node `k` again after the jobs `arrived` joined it (indices into `jobs`), appending
    /// the pace of every part on it to `out`.
    pub fn decide(&mut self, k: usize, arrived: &[usize], jobs: &[ClusterJob], cost: &CostModel, out: &mut Vec<Pace>) {
        let node = &mut self.nodes[k];
        if self.oversubscribes {
            let threads: u32 = node.parts.iter().map(|&(_, n, _)| n).sum();
            let share = (self.cpus as f64 / threads.max(1) as f64).min(1.0);
            for &(job, n, _) in &node.parts {
                let pace = pace(cost, &jobs[job].spec, n, n as f64 * share, n, true);
                out.push(Pace { job, node: k, pace });
            }
            return;
        }
        self.programs.clear();
        for &(job, n, granted) in &node.parts {
            let spec = &jobs[job].spec;
            let kind = match spec.kind {
                Kind::Rigid(_) => Kind::Rigid(n),
                other => other,
            };
            self.programs.push(Program {
                kind,
                request: Request { wanted: n, min: if matches!(kind, Kind::Rigid(_)) { n } else { 1 }, max: n },
                weight: spec.weight,
                arrival: spec.arrival,
                threads: kind.rigid_procs().or((granted > 0).then_some(granted)),
                running: granted > 0,
                ..Program::new(job as u64, spec.name.clone(), n)
            });
        }
        let view = View { now: 0, quantum: 1, topology: &self.topology, cpus: self.cpus, programs: &self.programs };
        let policy = node.policy.as_mut().expect("a managed node has its policy");
        for &job in arrived {
            policy.on_arrival(&view, ProgramId(job as u64));
        }
        self.decision.reset(self.programs.len());
        policy.decide(&view, &mut self.decision);
        for ((p, (job, n, granted)), a) in self.programs.iter().zip(&mut node.parts).zip(&self.decision.allocations) {
            let (job, n, held) = (*job, *n, a.granted());
            *granted = held;
            let threads = p.kind.rigid_procs().unwrap_or(held);
            let pace = pace(cost, &jobs[job].spec, n, held as f64, threads, false);
            out.push(Pace { job, node: k, pace });
        }
    }
}

/// `parts` (node, processes) in node order, one per node.
fn merged(mut parts: Vec<(usize, u32)>) -> Vec<(usize, u32)> {
    parts.sort_by_key(|&(node, _)| node);
    parts.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    parts
}

/// The rate of `spec`'s part of `n` processes holding `cpus` CPUs with `threads` threads, over
/// its rate on `n` CPUs alone.
fn pace(cost: &CostModel, spec: &JobSpec, n: u32, cpus: f64, threads: u32, shared: bool) -> f64 {
    let speedup = &spec.phases[0].speedup;
    let alone = cost.rate(speedup, n as f64, n as f64, n as f64, spec.sync, false);
    if alone <= 0.0 {
        return 1.0;
    }
    (cost.rate(speedup, n as f64, cpus, threads as f64, spec.sync, shared) / alone).min(1.0)
}
