//! oneTBB programs under the manager: cpumgr's `libtcm.so` (crate `cpumgr-tcm`) preloaded, so
//! the Thread Composability Manager that oneTBB loads at start is cpumgr's and its arenas'
//! worker threads follow the program's allocation.
//!
//! oneTBB loads `libtcm.so.1` from its own directory (where PyPI's `tbb` puts Intel's, which
//! arbitrates only inside the process), unless a library with that soname is already loaded:
//! `LD_PRELOAD` is the one variable that makes it use cpumgr's, whatever its install, and
//! nothing else needs setting (Intel's `TCM_ENABLE` switch does not apply: cpumgr's library is on
//! unless `TCM_ENABLE=0`).

use std::path::PathBuf;
use std::process::Command;

use crate::adapter;

/// The library's file name (soname `libtcm.so.1`).
pub const TCM: &str = "libtcm.so";

/// The oneTBB runtime libraries whose programs get it.
const TBB_RUNTIMES: [&str; 2] = ["libtbb.so", "libtbb_debug.so"];

/// Where cpumgr's `libtcm.so` is: `$CPUMGR_TCM_LIB`, else found as the OpenMP adapter is.
pub fn tcm_library() -> Option<PathBuf> {
    adapter::library("CPUMGR_TCM_LIB", TCM)
}

/// Preloads cpumgr's `libtcm.so` into `cmd` when its program links oneTBB; whether it did. A
/// oneTBB program without the library found is told about with a warning and runs with oneTBB's
/// own scheduler (its threads held by affinity and stop/continue only).
pub fn provide(cmd: &mut Command) -> bool {
    let program = PathBuf::from(cmd.get_program());
    let links_tbb = adapter::resolve(&program.to_string_lossy()).is_some_and(|p| adapter::links_any(&p, &TBB_RUNTIMES));
    if !links_tbb {
        return false;
    }
    match tcm_library() {
        Some(lib) => {
            adapter::preload(cmd, &lib);
            true
        }
        None => {
            tracing::warn!("{TCM} not found (set CPUMGR_TCM_LIB, or build it: cargo build -p cpumgr-tcm): the oneTBB program's threads do not follow its allocation");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that links oneTBB gets the library in `crates/cpumgr/tests/tbb.rs`, which has
    /// oneTBB; here, one that does not is left alone.
    #[test]
    fn a_program_that_does_not_link_onetbb_is_left_alone() {
        let mut sh = Command::new("sh");
        assert!(!provide(&mut sh));
        assert!(!sh.get_envs().any(|(k, _)| k == "LD_PRELOAD"));
    }
}
