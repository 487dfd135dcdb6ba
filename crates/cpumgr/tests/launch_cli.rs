//! `cpumgr launch` end to end: the test kernels built with make, a small workload of real OpenMP
//! programs run under a baseline and under a policy (through a private manager), the JSON shape
//! of the issue, and the HTML report whose numbers match the JSON.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn launch_compares_a_baseline_and_a_policy_on_real_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("kernels");
    let make = Command::new("make").arg("-s").arg("-C").arg(repo().join("kernels")).arg(format!("OUT={}", bin.display())).status().unwrap();
    assert!(make.success(), "the kernels build with make and gcc -fopenmp");
    let workload = dir.path().join("w.toml");
    std::fs::write(
        &workload,
        "name = \"small\"\n[[job]]\nname = \"stencil\"\ncommand = [\"{kernels}/stencil\", \"-iters\", \"400\"]\nenv = { OMP_NUM_THREADS = \"{cpus}\" }\nrepeat = 2\n\
         [[job]]\nname = \"mc\"\ncommand = [\"{kernels}/montecarlo\", \"-n\", \"2000000\"]\nenv = { OMP_NUM_THREADS = \"{cpus}\" }\nat = 0.1\n",
    )
    .unwrap();
    let report = dir.path().join("r.html");
    let out = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os", "--policy", "gang", "--json", "--kernels"])
        .arg(&bin)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["config"].as_str().unwrap()).collect::<Vec<_>>(), vec!["os", "gang"]);
    let html = std::fs::read_to_string(&report).unwrap();
    for r in runs {
        let jobs = r["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 3);
        assert!(jobs.iter().all(|j| j["outcome"] == "ok" && j["turnaround"].as_f64().unwrap() > 0.0 && j["slowdown"].is_f64()), "{r}");
        assert!(r["makespan"].as_f64().unwrap() > 0.0);
        // The report's table shows the JSON's makespan, to two decimals.
        let cell = format!("<td>{:.2}</td>", r["makespan"].as_f64().unwrap());
        assert!(html.contains(&cell), "report lacks {cell}");
    }
    assert_eq!(html.matches("<svg class=\"gantt\"").count(), 2, "a Gantt chart per configuration");
}
