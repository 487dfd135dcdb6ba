//! What the libtcm tests (`crates/cpumgr/tests/tbb.rs`) and the benchmark (`benches/tbbpair.rs`)
//! share: oneTBB from PyPI in a virtual environment, the test programs built against it and
//! cpumgr's `libtcm.so` found in a cargo profile directory. Included by `#[path]`.
#![allow(dead_code)] // each includer uses its own part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (every includer is a crate in `crates/`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test programs' sources and the C header.
pub fn programs() -> PathBuf {
    workspace().join("crates/cpumgr-tcm/tests/programs")
}

/// What to run to have oneTBB where the tests look for it.
pub const INSTALL: &str =
    "python3 -m venv target/tbbenv && target/tbbenv/bin/pip install --retries 1 --timeout 20 tbb tbb-devel";

/// A oneTBB install prefix (`include/oneapi/tbb.h`, `lib/libtbb.so.12`): `$CPUMGR_TBB_PREFIX`,
/// else `target/tbbenv` of the workspace, installed there from PyPI on first use when missing.
/// `Err` says why there is none.
pub fn onetbb() -> Result<PathBuf, String> {
    static PREFIX: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PREFIX
        .get_or_init(|| {
            let given = std::env::var_os("CPUMGR_TBB_PREFIX").map(PathBuf::from);
            let prefix = given.clone().unwrap_or_else(|| workspace().join("target/tbbenv"));
            let complete = |p: &Path| p.join("include/oneapi/tbb.h").is_file() && p.join("lib/libtbb.so.12").is_file();
            if complete(&prefix) {
                return Ok(prefix);
            }
            if given.is_some() {
                return Err(format!("CPUMGR_TBB_PREFIX={} holds no oneTBB", prefix.display()));
            }
            let install = Command::new("sh").arg("-c").arg(INSTALL).current_dir(workspace()).output();
            match install {
                Ok(_) if complete(&prefix) => Ok(prefix),
                Ok(out) => Err(format!(
                    "oneTBB is not installable here ({INSTALL}: {})",
                    String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("no output")
                )),
                Err(e) => Err(format!("oneTBB is not installable here ({INSTALL}: {e})")),
            }
        })
        .clone()
}

/// Builds the C++ program `name`.cpp of [`programs`] against oneTBB at `prefix` into `dir`.
pub fn build_cpp(prefix: &Path, name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(name);
    let out = Command::new("g++")
        .args(["-O2", "-std=c++17", "-pthread"])
        .arg(programs().join(format!("{name}.cpp")))
        .arg(format!("-I{}", prefix.join("include").display()))
        .arg(format!("-L{}", prefix.join("lib").display()))
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
        .arg("-ltbb")
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running g++");
    assert!(out.status.success(), "g++ {name}.cpp: {}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// cpumgr's `libtcm.so` in the cargo profile directory `profile`, which must hold it.
pub fn tcm_library(profile: &Path) -> PathBuf {
    let lib = profile.join("libtcm.so");
    assert!(lib.is_file(), "{} is missing: run `cargo build -p cpumgr-tcm` (or the workspace) first", lib.display());
    lib
}
