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
    whole_lines(text)
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

/// A C program for the checks below, by its first argument; every wait in it is bounded (an
/// `alarm` kills it, and so ends the test's reads, if it hangs).
/// - `fork`: the parent registers as `forker` and uses the pool, then forks; the child checks it
///   is unmanaged, that `cpumgr_parallel_for` runs every iteration serially, finalizes, and that a
///   new `cpumgr_init` registers it as a program of its own; the parent prints `done` and waits
///   for its stdin to close.
/// - `huge`: one `cpumgr_parallel_for(SIZE_MAX, 2^63)`, printing every chunk.
/// - `lease`: waits for an allocation, prints `allocated`, waits for a line on stdin (the test
///   kills the manager meanwhile), then for the allocation to be reported gone.
const CHECKS_C: &str = r#"
#include <cpumgr.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_size_t iters, calls;
static void count(size_t b, size_t e, void *ctx) { (void)ctx; atomic_fetch_add(&iters, e - b); }
static void show(size_t b, size_t e, void *ctx) {
    (void)ctx;
    printf("chunk %zu %zu\n", b, e);
    if (atomic_fetch_add(&calls, 1) > 10) { printf("looping\n"); fflush(stdout); _exit(3); }
}

int main(int argc, char **argv) {
    alarm(30);
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "fork")) {
        int mode = cpumgr_init("forker", 0, 0);
        unsigned team = cpumgr_parallel_for(1000, 1, count, NULL);
        printf("parent mode=%d team=%u\n", mode, team);
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            alarm(10);
            iters = 0;
            int child_mode = cpumgr_mode();
            unsigned child_team = cpumgr_parallel_for(1000, 1, count, NULL);
            printf("child mode=%d team=%u iters=%zu alloc=%d\n", child_mode, child_team, (size_t)iters,
                   cpumgr_allocation(NULL, NULL, 0, NULL));
            cpumgr_finalize();
            printf("child again mode=%d\n", cpumgr_init("forked", 0, 0));
            fflush(stdout);
            _exit(0);
        }
        int st = 0;
        waitpid(child, &st, 0);
        printf("child exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        printf("parent after mode=%d alloc=%d\n", cpumgr_mode(), cpumgr_allocation(NULL, NULL, 0, NULL));
        printf("done\n");
        fflush(stdout);
        while (getchar() != EOF) {}
    } else if (!strcmp(what, "huge")) {
        unsigned team = cpumgr_parallel_for((size_t)-1, (size_t)1 << 63, show, NULL);
        printf("team=%u calls=%zu\n", team, (size_t)calls);
    } else if (!strcmp(what, "lease")) {
        cpumgr_init("leased", 0, 0);
        while (!cpumgr_allocation(NULL, NULL, 0, NULL)) usleep(10000);
        printf("allocated\n");
        fflush(stdout);
        getchar();
        while (cpumgr_allocation(NULL, NULL, 0, NULL)) usleep(10000);
        unsigned n = 99;
        uint64_t mask[1] = {~0ull}, epoch = 99;
        int r = cpumgr_allocation(&n, mask, 1, &epoch);
        printf("gone alloc=%d count=%u mask=%llx epoch=%llu team=%u\n", r, n, (unsigned long long)mask[0],
               (unsigned long long)epoch, cpumgr_team(0));
    }
    return 0;
}
"#;

/// [`CHECKS_C`] compiled against the library and its header, once per test binary.
fn checks() -> PathBuf {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, exe) = BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (src, exe) = (dir.path().join("checks.c"), dir.path().join("checks"));
        std::fs::write(&src, CHECKS_C).unwrap();
        let lib = library();
        let out = Command::new("cc")
            .args(["-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread"])
            .arg(format!("-I{}", capi_dir().join("include").display()))
            .arg(&src)
            .arg(format!("-L{}", lib.parent().unwrap().display()))
            .arg(format!("-Wl,-rpath,{}", lib.parent().unwrap().display()))
            .args(["-lcpumgr", "-o"])
            .arg(&exe)
            .output()
            .expect("running cc");
        assert!(out.status.success(), "cc checks.c: {}", String::from_utf8_lossy(&out.stderr));
        (dir, exe)
    });
    exe.clone()
}

/// The lines `checks` prints until one starts with `until` (all of them if none does; the
/// program's alarm bounds the wait).
fn lines_until(out: &mut impl std::io::BufRead, until: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for line in std::io::BufRead::lines(&mut *out) {
        let line = line.unwrap();
        let last = line.starts_with(until);
        lines.push(line);
        if last {
            break;
        }
    }
    lines
}

/// The C checks program running `mode` against the manager on `socket`, its stdin and stdout
/// piped to the test.
fn spawn_check(mode: &str, socket: &std::path::Path) -> std::process::Child {
    Command::new(checks())
        .arg(mode)
        .env("CPUMGR_SOCKET", socket)
        .env("CPUMGR_QUIET", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_forked_child_runs_unmanaged_and_serially_and_leaves_its_parent_registered() {
    let d = Daemon::start("equipartition");
    let mut child = spawn_check("fork", &d.socket);
    let lines = lines_until(&mut std::io::BufReader::new(child.stdout.take().unwrap()), "done");
    let has = |l: &str| lines.iter().any(|x| x == l);
    let parent_pid = child.id() as i32;
    let parent_listed = d.status().programs.iter().any(|p| p.name == "forker" && p.pid == parent_pid);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("parent mode=0 team=")), "managed: {lines:?}");
    assert!(has("child mode=1 team=1 iters=1000 alloc=0"), "unmanaged and serial in the child: {lines:?}");
    assert!(has("child again mode=0"), "finalize + init registers the child itself: {lines:?}");
    assert!(has("child exit=0"), "{lines:?}");
    assert!(has("parent after mode=0 alloc=1"), "{lines:?}");
    assert!(parent_listed, "the child's finalize left the parent registered: {lines:?} {:?}", d.status());
}

#[test]
fn a_parallel_for_at_the_top_of_size_t_cuts_two_chunks_and_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(checks())
        .arg("huge")
        .env("CPUMGR_SOCKET", tmp.path().join("nobody.sock"))
        .env("CPUMGR_QUIET", "1")
        .env_remove("CPUMGR_MODE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let mut chunks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("chunk ")).collect();
    chunks.sort_unstable();
    let (half, max) = (1u64 << 63, u64::MAX);
    assert_eq!(chunks, [format!("chunk 0 {half}"), format!("chunk {half} {max}")], "{stdout}");
    assert!(stdout.lines().any(|l| l.ends_with(" calls=2")), "{stdout}");
}

#[test]
fn once_the_manager_is_killed_a_c_program_reads_no_allocation() {
    let mut d = Daemon::start("equipartition");
    let mut child = spawn_check("lease", &d.socket);
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let first = lines_until(&mut out, "allocated");
    assert_eq!(first, ["allocated"]);
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"\n").unwrap();
    let rest = lines_until(&mut out, "gone");
    assert!(child.wait().unwrap().success(), "{rest:?}");
    // No allocation: the count is the program's own team, as cpumgr_team says once the lease ran out.
    let team = rest.last().and_then(|l| l.rsplit_once(" team=")).map(|(_, t)| t.to_string()).unwrap_or_default();
    assert_eq!(rest, [format!("gone alloc=0 count={team} mask=0 epoch=0 team={team}")]);
}
