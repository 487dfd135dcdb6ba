//! The cluster model: EASY backfilling against a reference written here from the published
//! algorithm, and what sharing nodes does.

use std::collections::VecDeque;

use cpumgr_sim::cluster::{self, Batch, ClusterConfig, ClusterJob, Sharing};
use cpumgr_sim::swf::{self, SwfOptions};
use cpumgr_sim::{CostModel, JobSpec, SpeedupModel};

/// A job as the reference sees it: arrival, processors, run time, estimate (seconds).
#[derive(Debug, Clone, Copy)]
struct RefJob {
    arrival: f64,
    size: u32,
    run: f64,
    estimate: f64,
}

/// EASY backfilling on a machine of `procs` processors as Lifka (1995) and Mu'alem & Feitelson
/// (2001, §2) describe it, written for this test alone: whenever a job arrives or ends, start
/// the first waiting job while it fits; when it does not, find the *shadow time* (walking the
/// running jobs by expected end until enough processors are free for it) and the *extra*
/// processors free then; start the first later job that fits now and either ends by the shadow
/// time or needs no more than the extra processors, and look again from the start. Returns the
/// mean wait and the makespan (first arrival to last end); `backfill` false is plain FCFS.
fn reference(jobs: &[RefJob], procs: u32, backfill: bool) -> (f64, f64) {
    let mut t;
    let mut free = procs;
    let mut next = 0;
    let mut queue: VecDeque<usize> = VecDeque::new();
    // (actual end, expected end, size) of each running job.
    let mut running: Vec<(f64, f64, u32)> = Vec::new();
    let mut wait_sum = 0.0;
    let mut last_end: f64 = 0.0;
    loop {
        let next_end = running.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        let next_arrival = jobs.get(next).map_or(f64::INFINITY, |j| j.arrival);
        t = next_end.min(next_arrival);
        if t == f64::INFINITY {
            break;
        }
        running.retain(|r| {
            if r.0 <= t {
                free += r.2;
                last_end = last_end.max(r.0);
                false
            } else {
                true
            }
        });
        while next < jobs.len() && jobs[next].arrival <= t {
            queue.push_back(next);
            next += 1;
        }
        'schedule: while let Some(&head) = queue.front() {
            let start = |j: usize, free: &mut u32, running: &mut Vec<(f64, f64, u32)>, wait: &mut f64| {
                *free -= jobs[j].size;
                running.push((t + jobs[j].run, t + jobs[j].estimate, jobs[j].size));
                *wait += t - jobs[j].arrival;
            };
            if jobs[head].size <= free {
                queue.pop_front();
                start(head, &mut free, &mut running, &mut wait_sum);
                continue;
            }
            if !backfill {
                break;
            }
            let mut by_expected: Vec<(f64, u32)> = running.iter().map(|r| (r.1.max(t), r.2)).collect();
            by_expected.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
            let mut avail = free;
            let mut shadow = f64::INFINITY;
            let mut extra = 0;
            // Every job ending by the shadow time frees its processors then.
            for (end, size) in by_expected {
                if end > shadow {
                    break;
                }
                avail += size;
                if shadow == f64::INFINITY && avail >= jobs[head].size {
                    shadow = end;
                }
            }
            if shadow < f64::INFINITY {
                extra = avail - jobs[head].size;
            }
            for q in 1..queue.len() {
                let j = queue[q];
                let fits = jobs[j].size <= free;
                if fits && (t + jobs[j].estimate <= shadow || jobs[j].size <= extra) {
                    queue.remove(q);
                    start(j, &mut free, &mut running, &mut wait_sum);
                    continue 'schedule;
                }
            }
            break;
        }
    }
    let first = jobs.first().map_or(0.0, |j| j.arrival);
    (wait_sum / jobs.len() as f64, last_end - first)
}

/// The jobs of the shared SWF trace `name` ([`cpumgr_testenv::shared_trace`]), which the build
/// script found (`has_shared_traces`).
fn trace_jobs(name: &str) -> Vec<ClusterJob> {
    let path = cpumgr_testenv::shared_trace(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = swf::read(&path.display().to_string(), std::io::BufReader::new(file), &SwfOptions::default()).unwrap();
    cluster::jobs_of(&t)
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-12)
}

fn config(nodes: u32, node_cpus: u32, batch: Batch, sharing: Sharing) -> ClusterConfig {
    ClusterConfig { nodes, node_cpus, batch, sharing, cost: CostModel::default() }
}

#[test]
#[cfg_attr(not(has_shared_traces), ignore = "needs the shared SWF traces (shared/data/swf/ beside the workspace)")]
fn easy_and_fcfs_agree_with_the_published_algorithm_on_the_lublin_trace() {
    let jobs = trace_jobs("lublin_256.swf");
    let refs: Vec<RefJob> = jobs
        .iter()
        .map(|j| RefJob {
            arrival: j.spec.arrival as f64 / 1e9,
            size: j.spec.request,
            run: j.runtime,
            estimate: j.requested.map_or(j.runtime, |r| r.max(j.runtime)),
        })
        .collect();
    agree_with_the_reference(&jobs, &refs, 256, 1);
}

#[test]
#[cfg_attr(not(has_shared_traces), ignore = "needs the shared SWF traces (shared/data/swf/ beside the workspace)")]
fn easy_agrees_with_the_published_algorithm_on_hpc2n_whole_nodes_and_requested_times() {
    // 120 nodes of 2 CPUs, whole nodes per job: the reference sees nodes as its processors. The
    // requested run times are estimates here, some short of the run (the estimate is then the
    // run), most far above it.
    let jobs = trace_jobs("hpc2n-first3170.swf");
    let refs: Vec<RefJob> = jobs
        .iter()
        .map(|j| RefJob {
            arrival: j.spec.arrival as f64 / 1e9,
            size: j.spec.request.div_ceil(2),
            run: j.runtime,
            estimate: j.requested.map_or(j.runtime, |r| r.max(j.runtime)),
        })
        .collect();
    assert!(refs.iter().filter(|r| r.estimate > r.run).count() > jobs.len() / 2, "estimates differ from runs");
    agree_with_the_reference(&jobs, &refs, 120, 2);
}

/// Runs `jobs` on `nodes` whole nodes of `node_cpus` CPUs under EASY and FCFS and checks mean
/// wait and makespan against the reference on `refs` within 0.1%.
fn agree_with_the_reference(jobs: &[ClusterJob], refs: &[RefJob], nodes: u32, node_cpus: u32) {
    for (batch, backfill) in [(Batch::Easy, true), (Batch::Fcfs, false)] {
        let got = cluster::run(&config(nodes, node_cpus, batch, Sharing::Exclusive), jobs).unwrap();
        let (wait, makespan) = reference(refs, nodes, backfill);
        eprintln!(
            "{batch:?}: mean wait {:.3} s (reference {wait:.3} s), makespan {:.3} s (reference {makespan:.3} s)",
            got.mean_wait, got.makespan
        );
        assert!(
            relative(got.mean_wait, wait) <= 1e-3 && relative(got.makespan, makespan) <= 1e-3,
            "{batch:?}: mean wait {} against the reference's {wait}, makespan {} against {makespan}",
            got.mean_wait,
            got.makespan
        );
    }
}

/// Jobs of `(arrival s, processes, run s, requested s)`, rigid with linear speedup.
fn rigid(jobs: &[(u64, u32, f64, f64)]) -> Vec<ClusterJob> {
    jobs.iter()
        .enumerate()
        .map(|(k, &(arrival, procs, run, requested))| ClusterJob {
            spec: JobSpec::rigid(
                format!("j{k}"),
                arrival * 1_000_000_000,
                procs,
                run * procs as f64,
                SpeedupModel::LINEAR,
            ),
            runtime: run,
            requested: Some(requested),
        })
        .collect()
}

#[test]
fn easy_backfills_a_short_job_into_the_hole_fcfs_leaves() {
    // 4 nodes of 1 CPU: a 2-node job runs 100 s; a 4-node job waits for it; a 1-node job of
    // 50 s fits the two free nodes and ends before the reservation: EASY starts it at once, FCFS
    // keeps it behind the wide one (starting at 100 + 100 s).
    let jobs = rigid(&[(0, 2, 100.0, 100.0), (1, 4, 100.0, 100.0), (2, 1, 50.0, 50.0)]);
    let easy = cluster::run(&config(4, 1, Batch::Easy, Sharing::Exclusive), &jobs).unwrap();
    let fcfs = cluster::run(&config(4, 1, Batch::Fcfs, Sharing::Exclusive), &jobs).unwrap();
    assert_eq!(easy.mean_wait, (0.0 + 99.0 + 0.0) / 3.0);
    assert_eq!(fcfs.mean_wait, (0.0 + 99.0 + 198.0) / 3.0);
    assert_eq!((easy.makespan, fcfs.makespan), (200.0, 250.0));
}

#[test]
fn exclusive_nodes_leave_a_serial_jobs_other_cpu_idle_and_shared_ones_use_it() {
    // 2 nodes of 2 CPUs, four serial jobs of 100 s at once: whole nodes run two at a time
    // (makespan 200 s); shared nodes run all four on the four CPUs (100 s), under any policy.
    let jobs = rigid(&[(0, 1, 100.0, 100.0); 4]);
    let exclusive = cluster::run(&config(2, 2, Batch::Easy, Sharing::Exclusive), &jobs).unwrap();
    assert_eq!(exclusive.makespan, 200.0);
    for policy in ["os", "equipartition"] {
        let shared = Sharing::Shared { policy: policy.into(), layers: 2 };
        let s = cluster::run(&config(2, 2, Batch::Easy, shared), &jobs).unwrap();
        assert_eq!((s.makespan, s.mean_wait), (100.0, 0.0), "{policy}");
    }
}

#[test]
fn oversubscribed_nodes_slow_their_jobs_by_the_cost_model_and_a_policy_serves_them_in_turn() {
    // 1 node of 2 CPUs taking 2 processes per CPU: two rigid 2-process jobs of 100 s at once.
    // Under os both run on the two CPUs, each at the cost model's pace for half of them: they
    // end together, later than 200 s (the oversubscription costs); equipartition runs the first
    // whole (100 s), then the second (200 s): nothing is lost.
    let jobs = rigid(&[(0, 2, 100.0, 100.0), (0, 2, 100.0, 100.0)]);
    let cost = CostModel::default();
    let half = cost.rate(&SpeedupModel::LINEAR, 2.0, 1.0, 2.0, 0.5, true) / 2.0;
    let os = Sharing::Shared { policy: "os".into(), layers: 2 };
    let s = cluster::run(&config(1, 2, Batch::Fcfs, os), &jobs).unwrap();
    assert!((s.makespan - 100.0 / half).abs() < 1e-6 && s.makespan > 200.0, "{s:?}");
    let eq = Sharing::Shared { policy: "equipartition".into(), layers: 2 };
    let s = cluster::run(&config(1, 2, Batch::Fcfs, eq), &jobs).unwrap();
    assert_eq!((s.makespan, s.mean_turnaround), (200.0, 150.0));
}

#[test]
fn time_sharing_policies_and_jobs_too_wide_are_refused_by_name() {
    let jobs = rigid(&[(0, 3, 1.0, 1.0)]);
    let gang = Sharing::Shared { policy: "gang".into(), layers: 2 };
    let e = cluster::run(&config(1, 2, Batch::Easy, gang), &jobs).unwrap_err().to_string();
    assert!(e.contains("policy gang") && e.contains("time-shares"), "{e}");
    let e = cluster::run(&config(1, 2, Batch::Easy, Sharing::Exclusive), &jobs).unwrap_err().to_string();
    assert!(e.contains("\"j0\"") && e.contains("3 processes do not fit 1 nodes of 2 CPUs"), "{e}");
}

#[test]
#[cfg_attr(not(has_shared_traces), ignore = "needs the shared SWF traces (shared/data/swf/ beside the workspace)")]
fn a_node_policy_that_never_preempts_deadlocks_jobs_spread_over_nodes_and_says_so() {
    // Under EASY a later job starts first; on a node where both wait, fcfs starts the earlier
    // one when CPUs free up: each then holds CPUs the other waits for on another node.
    let jobs = trace_jobs("hpc2n-first3170.swf");
    let fcfs = Sharing::Shared { policy: "fcfs".into(), layers: 2 };
    let e = cluster::run(&config(120, 2, Batch::Easy, fcfs), &jobs).unwrap_err().to_string();
    assert!(e.contains("running jobs got no CPU on some node") && e.contains("deadlocked"), "{e}");
    // Equipartition serves every node's parts in job order: the oldest job always runs.
    let eq = Sharing::Shared { policy: "equipartition".into(), layers: 2 };
    assert_eq!(cluster::run(&config(120, 2, Batch::Easy, eq), &jobs).unwrap().jobs, jobs.len());
}
