//! The test kernels this binary carries: their C sources and Makefile are compiled in, so that
//! `cpumgr demo` and `cpumgr launch` (for workloads that name `{kernels}`) can build them on any
//! machine with make and a C compiler with OpenMP, from any directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The kernels' sources and Makefile (`kernels/` in the repository), as this binary carries them.
const SOURCES: &[(&str, &str)] = &[
    ("Makefile", include_str!("../../../kernels/Makefile")),
    ("common.h", include_str!("../../../kernels/common.h")),
    ("common.c", include_str!("../../../kernels/common.c")),
    ("stencil.c", include_str!("../../../kernels/stencil.c")),
    ("montecarlo.c", include_str!("../../../kernels/montecarlo.c")),
    ("spmv.c", include_str!("../../../kernels/spmv.c")),
    ("apsi.c", include_str!("../../../kernels/apsi.c")),
    ("epd.c", include_str!("../../../kernels/epd.c")),
    ("ltomcatv.c", include_str!("../../../kernels/ltomcatv.c")),
    ("pipeline.c", include_str!("../../../kernels/pipeline.c")),
    ("rigid.c", include_str!("../../../kernels/rigid.c")),
    ("constructs.c", include_str!("../../../kernels/constructs.c")),
    ("halo.c", include_str!("../../../kernels/halo.c")),
    ("epcc.c", include_str!("../../../kernels/epcc.c")),
    ("cycle.c", include_str!("../../../kernels/cycle.c")),
];

/// Writes the kernels' sources to `dir/src` and builds them with the C compiler `cc` into
/// `dir/bin`, which it returns; the MPI job (`halo`) too where `mpicc` is found (a workload's
/// MPI jobs say they need it, and are left out without it).
pub fn build(dir: &Path, cc: &str) -> anyhow::Result<PathBuf> {
    let src = dir.join("src");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&src)?;
    for (name, text) in SOURCES {
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
    if cpumgr_launch::workload::on_path("mpicc") {
        let mpi = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(&src)
            .arg(format!("OUT={}", bin.display()))
            .arg("mpi")
            .output()?;
        if !mpi.status.success() {
            tracing::warn!(
                "building the MPI job failed (its workload jobs are left out):\n{}",
                String::from_utf8_lossy(&mpi.stderr)
            );
        }
    }
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_carries_every_file_of_kernels() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
        let mut on_disk: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        let mut carried: Vec<String> = SOURCES.iter().map(|(n, _)| n.to_string()).collect();
        on_disk.sort();
        carried.sort();
        assert_eq!(carried, on_disk, "SOURCES must list every file the kernels' Makefile may need");
    }
}
