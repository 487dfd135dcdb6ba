//! A cluster of `N` nodes of `P` CPUs under a batch scheduler: the question a centre asks of
//! cpumgr — does sharing nodes under it shorten waits and slowdowns on our trace?
//!
//! Jobs (an SWF trace's) arrive, wait in arrival order, and are started by the batch scheduler
//! ([`batch`]: FCFS or EASY backfilling, on the jobs' estimates, their requested run times). With
//! **exclusive** nodes a job of `p` processes takes `⌈p / P⌉` whole nodes and runs for its run
//! time. With **shared** nodes it takes `p` process slots, up to `K` per CPU, and each node's
//! cpumgr policy arbitrates its CPUs among the jobs on it (`nodes.rs`), so that a job runs at the
//! pace its CPUs allow and ends later than alone when it shares.
//!
//! The model is event-driven: at a start or an end the nodes it touches decide again and their
//! jobs' rates and ends follow; between events nothing changes. It therefore takes the policies
//! that decide the same on an unchanged view: space-sharing ones that read no usage figures
//! ([`cpumgr_core::SimHints::reads_usage`]), and `os`; a time-sharing policy (gang, the time-shared DSS
//! variants) needs the quantum-by-quantum engine and is refused. What it leaves out: which CPUs
//! (no placement, no reload cost), the quantum (a node decides at once), a job's phases past
//! its first (SWF jobs have one).
//!
//! At equal times, ends come first, then arrivals, then one pass of the batch scheduler; ends
//! at one time go by job order. Everything is deterministic.

pub mod batch;
mod nodes;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::time::Instant;

use cpumgr_core::policies;
use serde::Serialize;

use crate::cost::CostModel;
use crate::job::JobSpec;
use crate::limits::seconds;
use crate::metrics::BOUNDED_SLOWDOWN_TAU;
use crate::swf::SwfTrace;
pub use batch::Batch;
use batch::{Holding, Waiting};
use nodes::{Pace, SharedNodes};

/// How a cluster's nodes are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sharing {
    /// Whole nodes per job (`exclusive`).
    Exclusive,
    /// Nodes shared by up to `layers` processes per CPU, each arbitrated by this policy
    /// (`name:key=value,...`; `os` for none).
    Shared {
        /// The nodes' policy.
        policy: String,
        /// Processes per CPU at most (Slurm's `OverSubscribe=FORCE:K`).
        layers: u32,
    },
}

impl Sharing {
    /// `exclusive`, or `shared:POLICY`.
    pub fn label(&self) -> String {
        match self {
            Sharing::Exclusive => "exclusive".into(),
            Sharing::Shared { policy, .. } => format!("shared:{policy}"),
        }
    }
}

/// The cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// Nodes.
    pub nodes: u32,
    /// CPUs per node.
    pub node_cpus: u32,
    /// The batch scheduler.
    pub batch: Batch,
    /// How nodes are shared.
    pub sharing: Sharing,
    /// The cost of sharing CPUs (shared nodes).
    pub cost: CostModel,
}

/// A job as the cluster runs it.
#[derive(Debug, Clone)]
pub struct ClusterJob {
    /// The job: its arrival, processes (its request), kind, speedup and synchronisation.
    pub spec: JobSpec,
    /// Its run time alone, seconds.
    pub runtime: f64,
    /// Its requested run time (the batch scheduler's estimate), seconds; `None`: unknown, its
    /// run time is used. A run time past the request is the estimate too (the job ran that long).
    pub requested: Option<f64>,
}

impl ClusterJob {
    /// The batch scheduler's estimate of its run time.
    fn estimate(&self) -> f64 {
        self.requested.map_or(self.runtime, |r| r.max(self.runtime))
    }
}

/// The jobs of an SWF trace as the cluster runs them: each with its run time alone on its request
/// (its work over its speedup there) and its requested run time.
pub fn jobs_of(trace: &SwfTrace) -> Vec<ClusterJob> {
    trace
        .jobs
        .iter()
        .zip(&trace.requested)
        .map(|(spec, &requested)| {
            let phase = &spec.phases[0];
            let runtime = phase.work / phase.speedup.speedup(spec.request as f64);
            ClusterJob { spec: spec.clone(), runtime, requested }
        })
        .collect()
}

/// Why a cluster run cannot go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The nodes' policy is unknown, badly written, or one the event-driven model cannot run.
    #[error("policy {spec}: {message}")]
    Policy {
        /// The policy.
        spec: String,
        /// What is wrong.
        message: String,
    },
    /// A job needs more than the cluster has.
    #[error("job {name:?}: {message}")]
    Job {
        /// The job.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// Jobs were left that no node let progress, with nothing left to happen.
    #[error("{running} running jobs got no CPU on some node and {waiting} waited behind them, with nothing left to happen: the nodes' policy deadlocked jobs spread over several nodes (each holds CPUs another waits for: a policy that never preempts)")]
    Stalled {
        /// Jobs started that could not progress.
        running: usize,
        /// Jobs waiting.
        waiting: usize,
    },
    /// Zero nodes, CPUs or processes per CPU.
    #[error("the cluster needs at least one node, one CPU per node and one process per CPU")]
    Empty,
}

/// A cluster run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSummary {
    /// `easy/exclusive`, `fcfs/shared:equipartition`, ...
    pub label: String,
    /// The batch scheduler.
    pub batch: Batch,
    /// How nodes were shared ([`Sharing::label`]).
    pub nodes: String,
    /// Jobs run.
    pub jobs: usize,
    /// First arrival to last end, seconds.
    pub makespan: f64,
    /// Mean time from arrival to start, seconds.
    pub mean_wait: f64,
    /// Mean time from arrival to end, seconds.
    pub mean_turnaround: f64,
    /// Mean of `max(1, turnaround / max(run time alone, 10 s))`.
    pub mean_bounded_slowdown: f64,
    /// CPU-seconds of work (processes × run time alone) over the cluster's CPUs × makespan.
    pub utilization: f64,
    /// Starts, ends and arrivals handled.
    pub events: u64,
    /// Wall-clock seconds the run took.
    pub wall_seconds: f64,
}

/// A running job.
struct Running {
    job: usize,
    /// Units it holds (nodes, or process slots).
    units: u32,
    /// When it started, seconds.
    start: f64,
    /// Its shared nodes' parts, in node order: node, processes, pace.
    parts: Vec<(usize, u32, f64)>,
    /// Seconds of work alone left at `at`.
    left: f64,
    /// Work alone per second now.
    rate: f64,
    at: f64,
}

/// Runs `jobs` (in arrival order) on the cluster `cfg` and returns its figures.
pub fn run(cfg: &ClusterConfig, jobs: &[ClusterJob]) -> Result<ClusterSummary, ClusterError> {
    let started = Instant::now();
    if cfg.nodes == 0 || cfg.node_cpus == 0 || matches!(cfg.sharing, Sharing::Shared { layers: 0, .. }) {
        return Err(ClusterError::Empty);
    }
    let mut shared = match &cfg.sharing {
        Sharing::Exclusive => None,
        Sharing::Shared { policy, layers } => Some(shared_nodes(cfg, policy, *layers)?),
    };
    let capacity = shared.as_ref().map_or(cfg.nodes, SharedNodes::capacity);
    let need = |j: &ClusterJob| match shared {
        None => j.spec.request.div_ceil(cfg.node_cpus),
        Some(_) => j.spec.request,
    };
    let needs: Vec<u32> = jobs.iter().map(need).collect();
    if let Some((j, _)) = jobs.iter().zip(&needs).find(|(_, &n)| n > capacity || n == 0) {
        let message = format!(
            "{} processes do not fit {} nodes of {} CPUs{}",
            j.spec.request,
            cfg.nodes,
            cfg.node_cpus,
            if shared.is_some() { " with their slots" } else { "" }
        );
        return Err(ClusterError::Job { name: j.spec.name.to_string(), message });
    }
    let mut free = capacity;
    let mut next = 0;
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut running: Vec<Running> = Vec::new();
    // Per job, its place in `running` and when it ends (NaN: not running; infinite: no progress
    // now). Ends are queued by (time, job); an entry whose time is no longer its job's end is
    // dropped when it reaches the top.
    let mut index_of = vec![usize::MAX; jobs.len()];
    let mut end_of = vec![f64::NAN; jobs.len()];
    let mut ends: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    // The running jobs by expected end (start + estimate), for EASY's reservation.
    let mut expected: BTreeSet<(Time, usize)> = BTreeSet::new();
    let (mut waits, mut turnarounds, mut bounded, mut work) = (0.0, 0.0, 0.0, 0.0);
    let (mut first, mut last, mut events) = (f64::INFINITY, 0.0f64, 0u64);
    let (mut scratch, mut picked, mut paces, mut joined, mut touched, mut arrived, mut changed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let waiting = |j: usize| Waiting { need: needs[j], estimate: jobs[j].estimate() };
    loop {
        let arrival = jobs.get(next).map(|j| seconds(j.spec.arrival));
        let end = loop {
            match ends.peek() {
                Some(&Reverse((Time(t), job))) if end_of[job] != t => {
                    ends.pop();
                }
                Some(&Reverse((Time(t), _))) => break Some(t),
                None => break None,
            }
        };
        let now = match (arrival, end) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(e)) => e,
            (Some(a), Some(e)) => a.min(e),
        };
        // Ends at `now`, in job order.
        touched.clear();
        while let Some(&Reverse((Time(t), job))) = ends.peek() {
            if t > now {
                break;
            }
            ends.pop();
            if end_of[job] != t {
                continue;
            }
            let k = index_of[job];
            let r = running.swap_remove(k);
            if let Some(moved) = running.get(k) {
                index_of[moved.job] = k;
            }
            (index_of[job], end_of[job]) = (usize::MAX, f64::NAN);
            expected.remove(&(Time(r.start + jobs[job].estimate()), job));
            events += 1;
            free += r.units;
            let j = &jobs[job];
            let turnaround = now - seconds(j.spec.arrival);
            waits += r.start - seconds(j.spec.arrival);
            turnarounds += turnaround;
            bounded += (turnaround / j.runtime.max(BOUNDED_SLOWDOWN_TAU)).max(1.0);
            work += j.spec.request as f64 * j.runtime;
            last = last.max(now);
            if let Some(s) = shared.as_mut() {
                s.remove(job, r.parts.iter().map(|&(n, p, _)| (n, p)));
                touched.extend(r.parts.iter().map(|&(n, _, _)| n));
            }
        }
        while next < jobs.len() && seconds(jobs[next].spec.arrival) <= now {
            first = first.min(seconds(jobs[next].spec.arrival));
            queue.push_back(next);
            next += 1;
            events += 1;
        }
        let holding = expected.iter().map(|&(Time(expected_end), j)| Holding { expected_end, units: needs[j] });
        batch::pick(cfg.batch, now, free, queue.make_contiguous(), waiting, holding, &mut scratch, &mut picked);
        arrived.clear();
        for &k in &picked {
            let job = queue[k];
            free -= needs[job];
            events += 1;
            let parts = match shared.as_mut() {
                Some(s) => {
                    let parts = s.place(job, jobs[job].spec.request);
                    touched.extend(parts.iter().map(|&(n, _)| n));
                    arrived.extend(parts.iter().map(|&(n, _)| (n, job)));
                    parts.into_iter().map(|(n, p)| (n, p, 1.0)).collect()
                }
                None => Vec::new(),
            };
            let runtime = jobs[job].runtime;
            index_of[job] = running.len();
            expected.insert((Time(now + jobs[job].estimate()), job));
            running.push(Running { job, units: needs[job], start: now, parts, left: runtime, rate: 1.0, at: now });
            if shared.is_none() {
                end_of[job] = now + runtime;
                ends.push(Reverse((Time(now + runtime), job)));
            }
        }
        remove_picked(&mut queue, &picked);
        if let Some(s) = shared.as_mut() {
            touched.sort_unstable();
            touched.dedup();
            paces.clear();
            for &n in &touched {
                joined.clear();
                joined.extend(arrived.iter().filter(|&&(m, _)| m == n).map(|&(_, j)| j));
                s.decide(n, &joined, jobs, &cfg.cost, &mut paces);
            }
            repace(&mut running, &index_of, &mut end_of, &paces, now, &mut ends, &mut changed);
        }
    }
    if !running.is_empty() || !queue.is_empty() {
        // A policy that serves a node's parts in job order (equipartition, DSS, os) always runs
        // the oldest job everywhere; one that never preempts (fcfs) can leave two jobs spread
        // over nodes each waiting for CPUs the other holds.
        return Err(ClusterError::Stalled { running: running.len(), waiting: queue.len() });
    }
    let n = jobs.len().max(1) as f64;
    let makespan = if jobs.is_empty() { 0.0 } else { last - first };
    let cpus = cfg.nodes as f64 * cfg.node_cpus as f64;
    Ok(ClusterSummary {
        label: format!("{}/{}", cfg.batch.name(), cfg.sharing.label()),
        batch: cfg.batch,
        nodes: cfg.sharing.label(),
        jobs: jobs.len(),
        makespan,
        mean_wait: waits / n,
        mean_turnaround: turnarounds / n,
        mean_bounded_slowdown: bounded / n,
        utilization: if makespan > 0.0 { work / (cpus * makespan) } else { 0.0 },
        events,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The shared nodes of `cfg` under `spec`, refusing a policy the event-driven model cannot run.
fn shared_nodes(cfg: &ClusterConfig, spec: &str, layers: u32) -> Result<SharedNodes, ClusterError> {
    let bad = |message: String| ClusterError::Policy { spec: spec.to_string(), message };
    let probe = policies::build_simulated(spec).map_err(|e| bad(e.to_string()))?;
    if probe.oversubscribes() {
        return Ok(SharedNodes::new(cfg.nodes, cfg.node_cpus, layers, None::<fn() -> _>));
    }
    if probe.time_sharing() || probe.reads_usage() {
        let why = if probe.time_sharing() { "time-shares" } else { "reads usage figures" };
        return Err(bad(format!(
            "it {why}, which the cluster's event-driven nodes do not model (they decide at starts and ends only): use a space-sharing policy or os"
        )));
    }
    let build = || policies::build_simulated(spec).expect("built once already");
    Ok(SharedNodes::new(cfg.nodes, cfg.node_cpus, layers, Some(build)))
}

/// Takes the jobs at the increasing positions `picked` out of `queue`: the front ones at once
/// (FCFS and EASY start the first jobs waiting), the others in one pass.
fn remove_picked(queue: &mut VecDeque<usize>, picked: &[usize]) {
    let front = picked.iter().enumerate().take_while(|&(k, &p)| k == p).count();
    queue.drain(..front);
    let rest = &picked[front..];
    if !rest.is_empty() {
        let (mut k, mut next) = (0, 0);
        queue.retain(|_| {
            let keep = rest.get(next).is_none_or(|&p| p - front != k);
            next += usize::from(!keep);
            k += 1;
            keep
        });
    }
}

/// Sets the new pace of each part in `paces`, and the rate (its slowest part's) and end of each
/// job they belong to, at `now`. `changed` is scratch space (the places in `running` of those
/// jobs), kept by the caller between events.
fn repace(
    running: &mut [Running],
    index_of: &[usize],
    end_of: &mut [f64],
    paces: &[Pace],
    now: f64,
    ends: &mut BinaryHeap<Reverse<(Time, usize)>>,
    changed: &mut Vec<usize>,
) {
    changed.clear();
    for p in paces {
        let k = index_of[p.job];
        let parts = &mut running[k].parts;
        if let Ok(at) = parts.binary_search_by_key(&p.node, |&(n, _, _)| n) {
            parts[at].2 = p.pace;
        }
        changed.push(k);
    }
    changed.sort_unstable();
    changed.dedup();
    for &k in changed.iter() {
        let r = &mut running[k];
        r.left = (r.left - r.rate * (now - r.at)).max(0.0);
        r.at = now;
        r.rate = r.parts.iter().map(|p| p.2).fold(1.0, f64::min);
        let end = if r.rate > 0.0 { now + r.left / r.rate } else { f64::INFINITY };
        end_of[r.job] = end;
        // The entry of its former end no longer applies (its time is not the job's end).
        if end.is_finite() {
            ends.push(Reverse((Time(end), r.job)));
        }
    }
}

/// A time in seconds, ordered totally (never NaN here).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Time(f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
