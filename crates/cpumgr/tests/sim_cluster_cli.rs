//! `cpumgr sim --nodes`: an SWF trace on a cluster under a batch scheduler, as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

fn cpumgr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpumgr")).args(args).output().expect("cpumgr runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A trace of `(submit s, run s, processors, requested s)` jobs with a MaxProcs header.
fn trace(dir: &Path, max_procs: u32, jobs: &[(u32, u32, u32, u32)]) -> String {
    let mut text = format!("; MaxProcs: {max_procs}\n");
    for (k, (submit, run, procs, req)) in jobs.iter().enumerate() {
        text += &format!("{} {submit} -1 {run} {procs} -1 -1 {procs} {req} -1 1 -1 -1 -1 -1 -1 -1 -1\n", k + 1);
    }
    let path = dir.join("cluster.swf");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn every_batch_scheduler_and_node_use_is_a_row() {
    // 2 nodes of 2 CPUs (from MaxProcs 4 over --nodes 2): a 1-node job, a 2-node one behind it and
    // a short serial one that EASY backfills.
    let dir = tempfile::tempdir().unwrap();
    let f = trace(dir.path(), 4, &[(0, 100, 2, 100), (1, 100, 4, 100), (2, 10, 1, 10)]);
    let o = cpumgr(&["sim", "--swf", &f, "--nodes", "2", "--batch", "fcfs,easy", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["nodes"].as_u64(), v["node_cpus"].as_u64(), v["oversubscribe"].as_u64()),
        (Some(2), Some(2), Some(2))
    );
    assert_eq!(v["left_out"]["bad_lines"].as_u64(), Some(0), "the cluster's JSON says what the trace left out");
    let labels: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "fcfs/exclusive",
            "fcfs/shared:os",
            "fcfs/shared:equipartition",
            "easy/exclusive",
            "easy/shared:os",
            "easy/shared:equipartition"
        ]
    );
    let wait = |k: usize| v["results"][k]["mean_wait"].as_f64().unwrap();
    assert!(wait(3) < wait(0), "EASY backfills the serial job: {} against FCFS's {}", wait(3), wait(0));
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["jobs"], 3);
        for field in ["makespan", "mean_wait", "mean_turnaround", "mean_bounded_slowdown", "utilization"] {
            assert!(r[field].as_f64().is_some(), "{field} in {r}");
        }
    }
    // The table and CSV have a row per run.
    let o = cpumgr(&["sim", "--swf", &f, "--nodes", "2", "--csv"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 4, "a header and three rows");
}

#[test]
fn what_the_cluster_cannot_run_is_said_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let f = trace(dir.path(), 4, &[(0, 100, 4, 100)]);
    let cases: [(&[&str], &str); 4] = [
        (&["--nodes", "3"], "the machine's 4 CPUs do not split into 3 nodes: give --node-cpus"),
        (&["--nodes", "2", "--policy", "gang"], "policy gang: it time-shares"),
        (&["--nodes", "2", "--batch", "sjf"], "--batch \"sjf\": fcfs or easy"),
        (&["--nodes", "1", "--node-cpus", "2"], "larger than the machine (2 CPUs"),
    ];
    for (args, says) in cases {
        let o = cpumgr(&[&["sim", "--swf", &f][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // A cluster takes its jobs from a trace.
    let o = cpumgr(&["sim", "--preset", "scs-mpl", "--nodes", "2"]);
    assert!(!o.status.success() && stderr(&o).contains("--swf"), "{}", stderr(&o));
}

#[test]
#[cfg_attr(not(has_shared_traces), ignore = "needs the shared SWF traces (shared/data/swf/ beside the workspace)")]
fn the_hpc2n_cluster_runs_on_its_120_nodes_of_2_cpus() {
    let hpc2n = cpumgr_testenv::shared_trace("hpc2n-first3170.swf");
    let o = cpumgr(&["sim", "--swf", hpc2n.to_str().unwrap(), "--nodes", "120", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["node_cpus"], 2, "MaxProcs 240 over 120 nodes");
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["jobs"] == 3145));
}

#[test]
fn a_bad_line_is_named_with_the_skip_hint_and_batch_needs_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.swf");
    std::fs::write(&f, "; MaxProcs: 4\n1 0 -1 10 1\n").unwrap();
    let o = cpumgr(&["sim", "--swf", f.to_str().unwrap(), "--nodes", "2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--skip-bad"), "{}", stderr(&o));
    let o = cpumgr(&["sim", "--preset", "nanos-cpuset32", "--batch", "fcfs"]);
    assert!(!o.status.success(), "--batch without --nodes is refused");
}
