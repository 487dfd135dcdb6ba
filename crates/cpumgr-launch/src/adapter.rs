//! Starting a program under the manager so its runtime can cooperate from its first region: the
//! OpenMP adapter preloaded when the program uses OpenMP, the environment that tells the client
//! library inside it which manager to ask and that its launcher registers it (so the client waits
//! for that registration instead of registering a second time), and for a Python program the hook
//! that sizes its BLAS, OpenMP and PyTorch pools without an import (`python/hook`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The adapter's file name.
pub const ADAPTER: &str = "libcpumgr_omp.so";

/// The OpenMP runtimes whose programs the adapter serves.
const OPENMP_RUNTIMES: [&str; 3] = ["libgomp.so", "libomp.so", "libiomp5.so"];

/// The C ABI library, which the Python hook reads the allocation through.
pub const CAPI: &str = "libcpumgr.so";

/// The Python hook's directory in the source tree, and the file that marks it.
const PYTHON_HOOK: (&str, &str) = ("python/hook", "cpumgr_follow.py");

/// Where the adapter is: `$CPUMGR_OMP_LIB`, else next to the running executable (a cargo build
/// puts both in `target/PROFILE/`), else in `../lib/` beside it (an installed layout).
pub fn adapter_library() -> Option<PathBuf> {
    library("CPUMGR_OMP_LIB", ADAPTER)
}

/// Where `libcpumgr.so` is: `$CPUMGR_CAPI_LIB`, else found as the adapter is.
pub fn capi_library() -> Option<PathBuf> {
    library("CPUMGR_CAPI_LIB", CAPI)
}

/// `$var`, else `name` next to the running executable or in `../lib/` beside it.
pub fn library(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    // Test binaries live one level down, in target/PROFILE/deps.
    [dir.join(name), dir.join("../lib").join(name), dir.join("..").join(name)].into_iter().find(|p| p.is_file())
}

/// The directory of the Python hook (`sitecustomize.py`, `cpumgr_follow.py`):
/// `$CPUMGR_PYTHON_HOOK`, else `../share/cpumgr/python` beside the executable (an installed
/// layout), else `python/hook` of the source tree whose `target/PROFILE/` holds the executable.
pub fn python_hook() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CPUMGR_PYTHON_HOOK").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let (tree, marker) = PYTHON_HOOK;
    std::iter::once(dir.join("../share/cpumgr/python"))
        .chain(dir.ancestors().skip(1).take(3).map(|d| d.join(tree)))
        .find(|d| d.join(marker).is_file())
}

/// Whether the file at `path` runs Python: an interpreter named `python…` or `pypy…`, or a
/// script whose `#!` line names one.
pub fn runs_python(path: &Path) -> bool {
    let is_python = |name: &str| {
        let name = name.rsplit('/').next().unwrap_or(name);
        ["python", "pypy"]
            .iter()
            .any(|p| name.strip_prefix(p).is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.')))
    };
    if path.file_name().and_then(|n| n.to_str()).is_some_and(is_python) {
        return true;
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
    let line = head[..n].split(|&b| b == b'\n').next().unwrap_or(&[]);
    line.starts_with(b"#!") && String::from_utf8_lossy(&line[2..]).split_whitespace().take(2).any(is_python)
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
    links_any(path, &OPENMP_RUNTIMES)
}

/// Whether the ELF executable at `path` names, in its dynamic section's `DT_NEEDED`, a library
/// whose name starts with one of `names`.
pub fn links_any(path: &Path, names: &[&str]) -> bool {
    needed(path).iter().any(|l| names.iter().any(|r| l.starts_with(r)))
}

/// The libraries the ELF executable at `path` names in `DT_NEEDED` (none for a file that is not
/// one), read once per process: a command is asked about OpenMP and about oneTBB, and a launcher
/// starts the same binary for many jobs, so the whole file is read and parsed only the first time.
fn needed(path: &Path) -> std::sync::Arc<[String]> {
    static SEEN: std::sync::Mutex<Vec<(PathBuf, std::sync::Arc<[String]>)>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, libs)) = seen.iter().find(|(p, _)| p == path) {
        return libs.clone();
    }
    let libs: std::sync::Arc<[String]> = std::fs::read(path)
        .ok()
        .and_then(|bytes| {
            goblin::elf::Elf::parse(&bytes).ok().map(|elf| elf.libraries.iter().map(|l| l.to_string()).collect())
        })
        .unwrap_or_default();
    seen.push((path.to_path_buf(), libs.clone()));
    libs
}

/// Tells the client library in `cmd` to ask the manager on `socket` for the registration its
/// launcher makes (`CPUMGR_SOCKET`, `CPUMGR_LAUNCHED=1`); a Python command also gets the hook
/// first on its `PYTHONPATH` and the C ABI library it reads the allocation with
/// (`CPUMGR_CAPI_LIB`), so its pools follow the allocation without an import.
pub fn managed_env(cmd: &mut Command, socket: &Path) {
    cmd.env("CPUMGR_SOCKET", socket).env("CPUMGR_LAUNCHED", "1");
    let program = PathBuf::from(cmd.get_program());
    if resolve(&program.to_string_lossy()).is_some_and(|p| runs_python(&p)) {
        python_env(cmd);
    }
}

/// The Python hook's environment for `cmd`; without the hook or the library, a warning.
fn python_env(cmd: &mut Command) {
    let (Some(hook), Some(lib)) = (python_hook(), capi_library()) else {
        tracing::warn!("the Python hook or {CAPI} is not found (CPUMGR_PYTHON_HOOK, CPUMGR_CAPI_LIB): the program's thread pools keep their sizes");
        return;
    };
    let mut path = hook.into_os_string();
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    cmd.env("PYTHONPATH", path).env("CPUMGR_CAPI_LIB", lib);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn interpreters_and_scripts_that_run_python_are_told_from_others() {
        let dir = std::env::temp_dir().join(format!("cpumgr-adapter-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["python", "python3", "python3.11", "/usr/bin/python3", "pypy3"] {
            assert!(runs_python(Path::new(name)), "{name}");
        }
        for name in ["pythonista", "sh", "/usr/bin/perl", "ipython"] {
            assert!(!runs_python(Path::new(name)), "{name}");
        }
        assert!(runs_python(&script(&dir, "a", "#!/usr/bin/env python3\nprint(1)\n")));
        assert!(runs_python(&script(&dir, "b", "#!/usr/bin/python3.11 -u\n")));
        assert!(!runs_python(&script(&dir, "c", "#!/bin/sh\npython3 x.py\n")));
        assert!(!runs_python(&script(&dir, "d", "print(1)\n")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_python_command_gets_the_hook_first_on_its_path_and_the_library() {
        let mut cmd = Command::new("python3");
        managed_env(&mut cmd, Path::new("/tmp/s.sock"));
        let env: std::collections::HashMap<_, _> = cmd
            .get_envs()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.map(|v| v.to_string_lossy().into_owned())))
            .collect();
        assert_eq!(env["CPUMGR_SOCKET"].as_deref(), Some("/tmp/s.sock"));
        // The test binary lives in target/PROFILE/deps of this source tree: the hook is found.
        let path = env["PYTHONPATH"].clone().unwrap();
        assert!(Path::new(path.split(':').next().unwrap()).join("cpumgr_follow.py").is_file(), "{path}");
        assert!(env.contains_key("CPUMGR_CAPI_LIB") || capi_library().is_none());
        let mut sh = Command::new("sh");
        managed_env(&mut sh, Path::new("/tmp/s.sock"));
        assert!(!sh.get_envs().any(|(k, _)| k == "PYTHONPATH"));
    }
}
