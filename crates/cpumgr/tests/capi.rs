//! The C ABI (`libcpumgr.so`, `cpumgr.h`, `cpumgr.pc`) used by a real C program: the example
//! `crates/cpumgr-capi/examples/follow.c`, compiled here with `cc` through `pkg-config`, run under
//! a manager and without one.
//!
//! Needs `libcpumgr.so` next to the `cpumgr` binary: the README's test command builds the whole
//! workspace first.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::*;

fn capi_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cpumgr-capi")
}

fn library() -> PathBuf {
    let lib = Path::new(BIN).with_file_name("libcpumgr.so");
    assert!(lib.is_file(), "{} is missing: run `cargo build --workspace` before the tests", lib.display());
    lib
}

/// An install prefix as a user would have it (`lib/libcpumgr.so`, `include/cpumgr.h`,
/// `lib/pkgconfig/cpumgr.pc`), made once per test binary, and `follow` built against it with the
/// flags `pkg-config` gives.
fn follow() -> PathBuf {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, exe) = BUILT.get_or_init(|| {
        let prefix = tempfile::tempdir().unwrap();
        let p = prefix.path();
        std::fs::create_dir_all(p.join("lib/pkgconfig")).unwrap();
        std::fs::create_dir_all(p.join("include")).unwrap();
        std::os::unix::fs::symlink(library(), p.join("lib/libcpumgr.so")).unwrap();
        std::fs::copy(capi_dir().join("include/cpumgr.h"), p.join("include/cpumgr.h")).unwrap();
        std::fs::copy(capi_dir().join("cpumgr.pc"), p.join("lib/pkgconfig/cpumgr.pc")).unwrap();
        let pc = Command::new("pkg-config")
            .args(["--cflags", "--libs", "cpumgr"])
            .env("PKG_CONFIG_PATH", p.join("lib/pkgconfig"))
            .output()
            .expect("running pkg-config");
        assert!(pc.status.success(), "pkg-config: {}", String::from_utf8_lossy(&pc.stderr));
        let flags = String::from_utf8(pc.stdout).unwrap();
        let exe = p.join("follow");
        let out = Command::new("cc")
            .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread"])
            .arg(capi_dir().join("examples/follow.c"))
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", p.join("lib").display()))
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("running cc");
        assert!(out.status.success(), "cc follow.c {flags}: {}", String::from_utf8_lossy(&out.stderr));
        (prefix, exe)
    });
    exe.clone()
}

/// One `region ...` line of `follow`'s output.
#[derive(Debug)]
struct Region {
    team: u32,
    alloc: u32,
    managed: bool,
    threads: u32,
    ok: bool,
}

fn regions(text: &str) -> Vec<Region> {
    text.lines()
        .filter_map(|l| l.strip_prefix("region "))
        .map(|l| {
            let field = |k: &str| -> u32 {
                l.split_whitespace().find_map(|f| f.strip_prefix(k)?.strip_prefix('=')?.parse().ok()).unwrap()
            };
            Region {
                team: field("team"),
                alloc: field("alloc"),
                managed: field("managed") == 1,
                threads: field("threads"),
                ok: l.ends_with(" ok"),
            }
        })
        .collect()
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let header = std::fs::read_to_string(capi_dir().join("include/cpumgr.h")).unwrap();
    // Every `cpumgr_NAME(`: a function declaration (the body typedef reads `(*cpumgr_body)(`).
    let mut declared: Vec<&str> = header
        .match_indices("cpumgr_")
        .map(|(i, _)| {
            let len = header[i..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(header.len() - i);
            (&header[i..i + len], header[i + len..].starts_with('('))
        })
        .filter_map(|(name, call)| call.then_some(name))
        .collect();
    declared.sort_unstable();
    declared.dedup();
    let nm = Command::new("nm").args(["-D", "--defined-only"]).arg(library()).output().expect("running nm");
    assert!(nm.status.success());
    let nm = String::from_utf8(nm.stdout).unwrap();
    let mut exported: Vec<&str> = nm
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("T"))
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("cpumgr_"))
        .collect();
    exported.sort_unstable();
    assert!(!declared.is_empty());
    assert_eq!(declared, exported);
    // And the header compiles as C++ too (extern "C" block), warnings as errors.
    let out = Command::new("c++")
        .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c++"])
        .arg(capi_dir().join("include/cpumgr.h"))
        .output();
    if let Ok(out) = out {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn the_pkg_config_file_carries_the_crate_version() {
    let pc = std::fs::read_to_string(capi_dir().join("cpumgr.pc")).unwrap();
    assert!(pc.lines().any(|l| l == format!("Version: {}", env!("CARGO_PKG_VERSION"))), "{pc}");
}

#[test]
fn two_c_programs_under_equipartition_each_run_teams_of_their_one_cpu() {
    let exe = follow();
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start("equipartition");
    let logs: Vec<PathBuf> = ["a", "b"].iter().map(|n| tmp.path().join(format!("{n}.out"))).collect();
    for (name, log) in ["a", "b"].iter().zip(&logs) {
        let child = d
            .cpumgr(&["run", "--name", name, "--", exe.to_str().unwrap(), "120", "2"])
            .stdout(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        d.runs.push(child);
    }
    let read = |log: &Path| regions(&std::fs::read_to_string(log).unwrap_or_default());
    for log in &logs {
        wait_for("both programs to run regions of 1 on an allocation of 1", || {
            let r = read(log);
            r.len() > 3 && r[r.len() - 3..].iter().all(|x| x.managed && x.alloc == 1 && x.team == 1)
        });
    }
    let s = d.status();
    assert_eq!(s.programs.len(), 2, "{s:?}");
    assert!(s.programs.iter().all(|p| p.count == 1), "{s:?}");
    for log in &logs {
        let r = read(log);
        assert!(r.iter().all(|x| x.ok), "every iteration exactly once: {r:?}");
        assert!(r.iter().all(|x| x.threads >= 1 && x.threads <= x.team && x.team <= 2), "{r:?}");
        let stable = &r[r.len() - 3..];
        assert!(stable.iter().all(|x| x.team <= x.alloc), "{stable:?}");
    }
}

#[test]
fn without_a_manager_a_c_program_keeps_its_own_thread_count_and_says_so_once() {
    let exe = follow();
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(exe)
        .args(["0.3", "3"])
        .env("CPUMGR_SOCKET", tmp.path().join("nobody.sock"))
        .env_remove("CPUMGR_MODE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stderr.matches("cpumgr: no manager").count(), 1, "said once: {stderr}");
    let r = regions(&stdout);
    assert!(!r.is_empty());
    assert!(r.iter().all(|x| x.ok && !x.managed && x.team == 3 && x.alloc == 3 && x.threads <= 3), "{r:?}");
    assert_eq!(stdout.lines().last(), Some("mode=unmanaged"));
}
