//! `cpumgr sim --swf TRACE --nodes N`: the trace on a cluster of `N` nodes under a batch scheduler
//! (FCFS, EASY backfilling), with whole nodes per job or nodes shared under cpumgr policies, in
//! one table (`cpumgr_sim::cluster`).

use std::thread;

use cpumgr_sim::cluster::{self, Batch, ClusterConfig, ClusterJob, ClusterSummary, Sharing};
use cpumgr_sim::CostModel;
use serde_json::json;

use super::{config_cost, csv, emit, Args};
use crate::input::InputError;

/// What the nodes run when `--policy` is not given: whole nodes, and nodes shared with no
/// manager and under equipartition.
const DEFAULT_RUNS: [&str; 3] = ["exclusive", "os", "equipartition"];

/// Runs `--nodes`.
pub(super) fn run(args: &Args, nodes: u32) -> anyhow::Result<()> {
    let path = args.swf.as_ref().expect("clap requires --swf with --nodes");
    if nodes == 0 {
        return Err(InputError::new("--nodes: a cluster has at least one node"));
    }
    let cpus = match (args.node_cpus, args.cpus) {
        (Some(0), _) => return Err(InputError::new("--node-cpus: a node has at least one CPU")),
        (Some(p), _) => {
            Some(nodes.checked_mul(p).ok_or_else(|| InputError::new("--nodes × --node-cpus: too many CPUs"))?)
        }
        (None, c) => c,
    };
    let (name, t) = super::read_swf(args, path, cpus)?;
    let node_cpus = match args.node_cpus {
        Some(p) => p,
        None if t.cpus % nodes == 0 => t.cpus / nodes,
        None => {
            return Err(InputError::new(format!(
                "{name}: the machine's {} CPUs do not split into {nodes} nodes: give --node-cpus",
                t.cpus
            )))
        }
    };
    let batches = args
        .batch
        .split(',')
        .map(|b| Batch::parse(b.trim()).ok_or_else(|| InputError::new(format!("--batch {b:?}: fcfs or easy"))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let specs: Vec<String> = if args.policy.is_empty() {
        DEFAULT_RUNS.iter().map(|s| s.to_string()).collect()
    } else {
        super::split_policies(&args.policy)
    };
    let sharings: Vec<Sharing> = specs
        .iter()
        .map(|s| match s.as_str() {
            "exclusive" => Sharing::Exclusive,
            policy => Sharing::Shared { policy: policy.to_string(), layers: args.oversubscribe },
        })
        .collect();
    let cost = config_cost(args, CostModel::default())?;
    let jobs = cluster::jobs_of(&t);
    let configs: Vec<ClusterConfig> = batches
        .iter()
        .flat_map(|&batch| {
            sharings.iter().map(move |sharing| ClusterConfig {
                nodes,
                node_cpus,
                batch,
                sharing: sharing.clone(),
                cost,
            })
        })
        .collect();
    let results = run_all(&configs, &jobs)?;
    let left_out = super::LeftOut::of(t.omitted, t.skipped);
    print(args, &name, nodes, node_cpus, &left_out, &results)
}

/// Runs every configuration on the jobs, each on a thread of its own (they are independent and
/// deterministic), and returns their figures in order, or the first error in that order.
fn run_all(configs: &[ClusterConfig], jobs: &[ClusterJob]) -> anyhow::Result<Vec<ClusterSummary>> {
    let done: Vec<_> = thread::scope(|scope| {
        let handles: Vec<_> = configs.iter().map(|c| scope.spawn(move || cluster::run(c, jobs))).collect();
        handles.into_iter().map(|h| h.join().expect("a cluster run does not panic")).collect()
    });
    done.into_iter().map(|r| r.map_err(|e| InputError::new(e.to_string()))).collect()
}

fn print(
    args: &Args,
    name: &str,
    nodes: u32,
    node_cpus: u32,
    left_out: &super::LeftOut,
    results: &[ClusterSummary],
) -> anyhow::Result<()> {
    if args.json {
        let out = json!({
            "workload": name,
            "nodes": nodes,
            "node_cpus": node_cpus,
            "oversubscribe": args.oversubscribe,
            "left_out": left_out,
            "results": results,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let columns =
        ["run", "makespan s", "mean wait s", "mean turnaround s", "mean bsld", "util", "jobs", "events", "wall s"];
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|s| {
            vec![
                s.label.clone(),
                format!("{:.0}", s.makespan),
                format!("{:.0}", s.mean_wait),
                format!("{:.0}", s.mean_turnaround),
                format!("{:.2}", s.mean_bounded_slowdown),
                format!("{:.3}", s.utilization),
                s.jobs.to_string(),
                s.events.to_string(),
                format!("{:.3}", s.wall_seconds),
            ]
        })
        .collect();
    if args.csv {
        return csv::print(&columns, &rows);
    }
    outln!(
        "workload {name} on {nodes} nodes of {node_cpus} CPUs (shared nodes: up to {} processes per CPU)",
        args.oversubscribe
    );
    for l in super::aligned(&columns, rows) {
        outln!("{l}");
    }
    Ok(())
}
