//! Every workload shipped in `workloads/` parses, on a small machine and a large one, runs only
//! the project's kernels (each command names a kernel whose source is in `kernels/`), and says in
//! its header what it reproduces and the command that runs it.

use std::path::{Path, PathBuf};

use cpumgr_launch::{Expand, Workload};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_shipped_workload_parses_and_runs_real_kernels() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("workloads"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        // The shared-server workload runs make, Python and oneTBB besides a kernel:
        // tests/server_workload.rs checks it.
        .filter(|p| !p.ends_with("server.toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "the demo's and the papers' workloads: {files:?}");
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("cpumgr "), "{}: the header names the command that runs it", file.display());
        for cpus in [2, 64] {
            let w = Workload::parse(file, &text, &Expand { cpus, kernels: PathBuf::from("/k") })
                .unwrap_or_else(|e| panic!("{e}"));
            for job in &w.jobs {
                let kernel = job.command[0]
                    .strip_prefix("/k/")
                    .unwrap_or_else(|| panic!("{}: job {} runs a kernel", file.display(), job.name));
                assert!(
                    repo().join("kernels").join(format!("{kernel}.c")).is_file(),
                    "{}: no kernel {kernel}",
                    file.display()
                );
                assert!(
                    job.request >= 1 && job.request <= cpus,
                    "{}: {} asks for {}",
                    file.display(),
                    job.name,
                    job.request
                );
            }
        }
    }
}
