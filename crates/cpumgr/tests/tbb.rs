//! cpumgr's `libtcm.so.1` (crate `cpumgr-tcm`) under a real manager: a real oneTBB program from
//! PyPI's `tbb` (parallel_for, parallel_reduce, nested task arenas) loads it, connects, keeps its
//! results, and the threads it runs follow its allocation when a second program arrives and
//! leaves; a C program that calls the API wrongly gets the API's errors and leaves the manager
//! unharmed.
//!
//! Needs `libtcm.so` beside the `cpumgr` binary (`cargo build -p cpumgr-tcm`, or the workspace);
//! the TBB test needs g++ and oneTBB (`has_onetbb`: `target/tbbenv` or `$CPUMGR_TBB_PREFIX`).

mod common;
#[path = "../../cpumgr-tcm/tests/support/tbb.rs"]
mod tbb;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The profile directory of the `cpumgr` binary, where cargo puts `libtcm.so` too.
fn profile() -> PathBuf {
    Path::new(BIN).parent().unwrap().to_path_buf()
}

/// `cpumgr run --name NAME -- PROGRAM ARGS` against `d` (which preloads libtcm into a program
/// that links oneTBB: `cpumgr_launch::tcm::provide`), stdout and stderr into files of `dir`.
fn run_tbb(d: &Daemon, dir: &Path, name: &str, program: &Path, args: &[&str]) -> Child {
    d.cpumgr(&["run", "--name", name, "--"])
        .arg(program)
        .args(args)
        .env("CPUMGR_TCM_LIB", tbb::tcm_library(&profile()))
        .env("TBB_VERSION", "1")
        .stdout(std::fs::File::create(dir.join(format!("{name}.out"))).unwrap())
        .stderr(std::fs::File::create(dir.join(format!("{name}.err"))).unwrap())
        .spawn()
        .unwrap()
}

/// One test at a time: each starts a manager of both CPUs, and the TBB test reads its program's
/// threads per 100 ms.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default()
}

/// The thread counts of a `phases` output's windows.
fn windows(out: &str) -> Vec<u32> {
    whole_lines(out)
        .filter_map(|l| l.strip_prefix("window "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect()
}

/// Every `check NAME GOT EXPECTED` line of a `phases` output holds GOT = EXPECTED, and there are
/// three.
fn assert_checks(name: &str, out: &str) {
    let checks: Vec<Vec<&str>> =
        whole_lines(out).filter_map(|l| l.strip_prefix("check ")).map(|l| l.split(' ').collect()).collect();
    assert_eq!(checks.len(), 3, "{name}: {out}");
    for c in checks {
        assert_eq!(c[1], c[2], "{name}: {} result", c[0]);
    }
}

fn wait_child(c: &mut Child, what: &str) -> std::process::ExitStatus {
    let end = Instant::now() + 3 * DEADLINE;
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[cfg_attr(
    not(has_onetbb),
    ignore = "needs g++ and oneTBB in target/tbbenv or $CPUMGR_TBB_PREFIX (python3 -m venv target/tbbenv && target/tbbenv/bin/pip install tbb tbb-devel)"
)]
fn a_tbb_program_under_cpumgr_keeps_its_results_and_its_threads_follow_the_allocation() {
    let prefix = tbb::onetbb().unwrap_or_else(|why| panic!("the build found oneTBB, this run cannot use it: {why}"));
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let phases = tbb::build_cpp(&prefix, "phases", dir.path());
    let d = Daemon::start("equipartition");
    let explain =
        || format!("A: {}\n{}\nB: {}", read(dir.path(), "A.out"), read(dir.path(), "A.err"), read(dir.path(), "B.out"));

    let mut a = run_tbb(&d, dir.path(), "A", &phases, &["6"]);
    // Connected: TBB's permit is the program's request, and its team folds onto any allocation.
    wait_for_or(
        "A's TBB permit to reach the manager",
        || d.status().programs.iter().any(|p| p.name == "A" && p.team == "folding" && p.request == 2),
        explain,
    );
    wait_for_or("A to run its windows on 2 CPUs", || windows(&read(dir.path(), "A.out")).len() >= 5, explain);
    let before = windows(&read(dir.path(), "A.out")).len();
    let mut b = run_tbb(&d, dir.path(), "B", &phases, &["1.5"]);
    assert!(wait_child(&mut b, "B").success(), "B failed\n{}", explain());
    let during_end = windows(&read(dir.path(), "A.out")).len();
    assert!(wait_child(&mut a, "A").success(), "A failed\n{}", explain());

    let (a_out, a_err, b_out) = (read(dir.path(), "A.out"), read(dir.path(), "A.err"), read(dir.path(), "B.out"));
    assert_checks("A", &a_out);
    assert_checks("B", &b_out);
    assert!(
        a_err.contains("(cpumgr)") && a_err.contains("MANAGED BY         cpumgr program"),
        "libtcm loaded: {a_err}"
    );
    let w = windows(&a_out);
    eprintln!("A's threads per 100 ms window: {w:?} (B ran from window {before} to about {during_end})");
    assert!(w[..before].contains(&2), "A alone uses both CPUs' threads: {w:?}");
    // While B runs, A's allocation is one CPU and TBB's worker leaves: windows of one thread.
    let during = &w[before..during_end];
    assert!(during.windows(3).any(|x| x == [1, 1, 1]), "A follows its allocation of 1 while B runs: {w:?}");
    assert!(w[during_end..].contains(&2), "A takes its second CPU back after B: {w:?}");
    let bw = windows(&b_out);
    assert!(bw.iter().filter(|&&t| t == 1).count() * 2 > bw.len(), "B runs on its one CPU's thread: {bw:?}");
}

#[test]
fn misused_tcm_calls_get_the_api_errors_and_leave_the_manager_unharmed() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let progs = tbb::programs();
    let lib = tbb::tcm_library(&profile());
    let exe = dir.path().join("misuse");
    let cc = Command::new("cc")
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", progs.join("../../include").display()))
        .arg(progs.join("misuse.c"))
        .arg(format!("-L{}", lib.parent().unwrap().display()))
        .arg(format!("-Wl,-rpath,{}", lib.parent().unwrap().display()))
        .args(["-l:libtcm.so.1", "-o"])
        .arg(&exe)
        .output()
        .expect("running cc");
    assert!(cc.status.success(), "cc misuse.c: {}", String::from_utf8_lossy(&cc.stderr));

    let mut d = Daemon::start("equipartition");
    let out = d.cpumgr(&["run", "--name", "misuse", "--"]).arg(&exe).stderr(Stdio::piped()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(whole_lines(&text).any(|l| l == "0 failures"), "{text}");
    assert!(whole_lines(&text).filter(|l| l.starts_with("ok ")).count() >= 60, "{text}");
    assert!(text.contains("MANAGED BY         cpumgr program"), "the library followed the manager: {text}");
    // The manager is unharmed: it answers, the program is gone, a newcomer gets both CPUs.
    wait_for("the misusing program to leave the manager", || d.status().programs.is_empty());
    let pid = d.run("after", "sleep 30");
    wait_for("the newcomer to get both CPUs", || {
        d.status().programs.iter().any(|p| p.pid == pid && p.count == 2 && p.state == "running")
    });
}
