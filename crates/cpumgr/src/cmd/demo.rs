//! `cpumgr demo`: the main job in one command. Builds the test kernels (their sources are inside
//! this binary), runs the built-in mixed workload (`workloads/demo.toml`) under every baseline
//! (plain OS, processor sets, passive and dynamic OpenMP) and under cpumgr policies with the
//! OpenMP adapter preloaded, prints the comparison, and writes `cpumgr-demo.html`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use clap::Parser;

use super::launch::{launch, Args as LaunchArgs};

/// The kernels' sources and Makefile, compiled into the binary so the demo runs anywhere.
const KERNEL_SOURCES: &[(&str, &str)] = &[
    ("Makefile", include_str!("../../../../kernels/Makefile")),
    ("common.h", include_str!("../../../../kernels/common.h")),
    ("common.c", include_str!("../../../../kernels/common.c")),
    ("stencil.c", include_str!("../../../../kernels/stencil.c")),
    ("montecarlo.c", include_str!("../../../../kernels/montecarlo.c")),
    ("spmv.c", include_str!("../../../../kernels/spmv.c")),
    ("apsi.c", include_str!("../../../../kernels/apsi.c")),
    ("epd.c", include_str!("../../../../kernels/epd.c")),
    ("ltomcatv.c", include_str!("../../../../kernels/ltomcatv.c")),
    ("pipeline.c", include_str!("../../../../kernels/pipeline.c")),
    ("rigid.c", include_str!("../../../../kernels/rigid.c")),
    ("epcc.c", include_str!("../../../../kernels/epcc.c")),
    ("cycle.c", include_str!("../../../../kernels/cycle.c")),
];

/// The demo's workload.
const WORKLOAD: &str = include_str!("../../../../workloads/demo.toml");

/// Arguments of `cpumgr demo`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Times to run each configuration (alternating).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Policies to compare with the baselines.
    #[arg(long, default_value = "equipartition:redistribute=true,pdpa")]
    policy: String,
    /// Baselines.
    #[arg(long, default_value = "os,static,passive,dynamic")]
    baseline: String,
    /// Where to write the report.
    #[arg(long, default_value = "cpumgr-demo.html")]
    report: PathBuf,
    /// C compiler with OpenMP for the kernels.
    #[arg(long, env = "CC", default_value = "gcc")]
    cc: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Policy runs leave unmanaged processes the CPUs they use (`cpumgr launch --yield-outside`).
    #[arg(long)]
    yield_outside: bool,
}

/// Writes the kernels' sources to `dir/src` and builds them into `dir/bin`.
pub fn build_kernels(dir: &Path, cc: &str) -> anyhow::Result<PathBuf> {
    let src = dir.join("src");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&src)?;
    for (name, text) in KERNEL_SOURCES {
        std::fs::write(src.join(name), text)?;
    }
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&src)
        .arg(format!("CC={cc}"))
        .arg(format!("OUT={}", bin.display()))
        .output()
        .context("running make (install make and a C compiler with OpenMP, e.g. gcc)")?;
    if !out.status.success() {
        bail!("building the kernels failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(bin)
}

/// Runs the demo.
pub fn run(args: Args) -> anyhow::Result<()> {
    let work = tempfile::Builder::new().prefix("cpumgr-demo-").tempdir()?;
    if !args.json {
        eprintln!("building the test kernels with {} ...", args.cc);
    }
    let kernels = build_kernels(work.path(), &args.cc)?;
    let launch_args = LaunchArgs {
        workload: PathBuf::from("workloads/demo.toml"),
        policy: vec![args.policy],
        baseline: args.baseline.split(',').map(String::from).collect(),
        quantum: "100ms".into(),
        repeat: args.repeat,
        cpus: None,
        kernels,
        report: Some(args.report),
        trace: None,
        json: args.json,
        no_omp: false,
        yield_outside: args.yield_outside,
    };
    launch(&launch_args, WORKLOAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_carries_every_file_of_kernels() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
        let mut on_disk: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        let mut carried: Vec<String> = KERNEL_SOURCES.iter().map(|(n, _)| n.to_string()).collect();
        on_disk.sort();
        carried.sort();
        assert_eq!(carried, on_disk, "KERNEL_SOURCES must list every file the kernels' Makefile may need");
    }
}
