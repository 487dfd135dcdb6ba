//! Building the kernels: runs `make` in the kernels' source directory with a chosen C compiler
//! and output directory, and checks whether a compiler can build OpenMP programs at all.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Why the kernels could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `make` itself could not be started.
    #[error("cannot run make for the kernels in {dir}: {source}")]
    Spawn {
        /// The kernels' source directory.
        dir: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// `make` ran and failed; `log` holds what it printed.
    #[error("building the kernels with {cc} into {out} failed ({status}):\n{log}")]
    Failed {
        /// The C compiler asked for.
        cc: String,
        /// The output directory.
        out: PathBuf,
        /// make's exit status, in words.
        status: String,
        /// make's stdout and stderr.
        log: String,
    },
}

/// The directory holding the kernels' C sources and Makefile (`kernels/` in the workspace).
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels")
}

/// Builds every kernel with the C compiler `cc` (e.g. `gcc`, or `clang` for LLVM libomp) into
/// `out_dir`, creating it if needed, and returns the directory holding the binaries. make only
/// rebuilds what changed, so calling this again is cheap.
pub fn build(out_dir: &Path, cc: &str) -> Result<PathBuf, BuildError> {
    run_make(out_dir, cc, "all")?;
    Ok(out_dir.to_path_buf())
}

/// Checks that `cc` can compile, link and run an OpenMP program (for clang this needs LLVM
/// libomp installed); the probe is built in `out_dir`.
pub fn probe(out_dir: &Path, cc: &str) -> Result<(), BuildError> {
    run_make(out_dir, cc, "probe").map(|_| ())
}

/// Whether a program named `cc` can be started at all (it is on `PATH`).
pub fn compiler_present(cc: &str) -> bool {
    Command::new(cc).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

fn run_make(out_dir: &Path, cc: &str, target: &str) -> Result<Output, BuildError> {
    let dir = source_dir();
    let output = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&dir)
        .arg(format!("OUT={}", out_dir.display()))
        .arg(format!("CC={cc}"))
        .arg(target)
        .output()
        .map_err(|source| BuildError::Spawn { dir: dir.clone(), source })?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(BuildError::Failed {
            cc: cc.to_string(),
            out: out_dir.to_path_buf(),
            status: output.status.to_string(),
            log: format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        })
    }
}
