//! Starting a program under the manager so its runtime can cooperate from its first region: the
//! OpenMP adapter preloaded when the program uses OpenMP, and the environment that tells the
//! client library inside it which manager to ask and that its launcher registers it (so the client
//! waits for that registration instead of registering a second time).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The adapter's file name.
pub const ADAPTER: &str = "libcpumgr_omp.so";

/// The OpenMP runtimes whose programs the adapter serves.
const OPENMP_RUNTIMES: [&str; 3] = ["libgomp.so", "libomp.so", "libiomp5.so"];

/// Where the adapter is: `$CPUMGR_OMP_LIB`, else next to the running executable (a cargo build
/// puts both in `target/PROFILE/`), else in `../lib/` beside it (an installed layout).
pub fn adapter_library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CPUMGR_OMP_LIB").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    // Test binaries live one level down, in target/PROFILE/deps.
    [dir.join(ADAPTER), dir.join("../lib").join(ADAPTER), dir.join("..").join(ADAPTER)]
        .into_iter()
        .find(|p| p.is_file())
}

/// The file `cmd` runs: itself when it names a path, else the first match on `PATH`.
pub fn resolve(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        return Some(PathBuf::from(cmd));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(cmd)).find(|p| p.is_file())
}

/// Whether the ELF executable at `path` links an OpenMP runtime (names one in its dynamic
/// section's `DT_NEEDED`).
pub fn links_openmp(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    let Ok(elf) = goblin::elf::Elf::parse(&bytes) else { return false };
    elf.libraries.iter().any(|l| OPENMP_RUNTIMES.iter().any(|r| l.starts_with(r)))
}

/// Tells the client library in `cmd` to ask the manager on `socket` for the registration its
/// launcher makes (`CPUMGR_SOCKET`, `CPUMGR_LAUNCHED=1`).
pub fn managed_env(cmd: &mut Command, socket: &Path) {
    cmd.env("CPUMGR_SOCKET", socket).env("CPUMGR_LAUNCHED", "1");
}

/// Makes `cmd` load the adapter `lib` first.
pub fn preload(cmd: &mut Command, lib: &Path) {
    let mut preload = lib.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    cmd.env("LD_PRELOAD", preload);
}
