//! Two oneTBB programs started together, each one `parallel_for` over a compute-bound loop sized
//! for all CPUs (`tests/programs/work.cpp`): their combined makespan under plain oneTBB (each
//! assumes the machine), a static partition (`taskset`, half the CPUs each), cpumgr with its
//! libtcm (each program's TBB threads follow its allocation), and cpumgr without it
//! (`TCM_ENABLE=0`: affinity and stop/continue only). Prints figures, asserts nothing.
//!
//! `cargo bench -p cpumgr-tcm --bench tbbpair` uses `cpumgr` and `libtcm.so` of the bench's own
//! profile (`cargo build --release -p cpumgr -p cpumgr-tcm` first); `CPUMGR_PROFILE_DIR`
//! names another (`target/debug`). `TBBPAIR_CHUNKS` and `TBBPAIR_ITERS` size the loop (1600
//! chunks of 500 000 iterations: about 4 s on this machine's 2 CPUs for one program alone).

#[path = "../tests/support/tbb.rs"]
mod tbb;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The directory holding `cpumgr` and `libtcm.so`.
fn profile() -> PathBuf {
    if let Some(p) = std::env::var_os("CPUMGR_PROFILE_DIR") {
        return PathBuf::from(p);
    }
    // The bench runs from target/PROFILE/deps.
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn var(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpus() -> Vec<usize> {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = text.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_string();
    list.split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![r.parse().unwrap()],
        })
        .collect()
}

fn join(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// One program's figures: its own elapsed time and its threads per 250 ms window.
struct Figures {
    elapsed: String,
    threads: String,
}

fn figures(child: Child) -> Figures {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "a program failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let field = |k: &str| text.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("?").trim().to_string();
    Figures { elapsed: field("elapsed "), threads: field("threads") }
}

/// Starts both commands together and waits for both; the makespan and each one's figures.
fn pair(mut a: Command, mut b: Command) -> (Duration, Figures, Figures) {
    let t0 = Instant::now();
    let ca = a.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let cb = b.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (fa, fb) = (figures(ca), figures(cb));
    (t0.elapsed(), fa, fb)
}

fn main() {
    let prefix = match tbb::onetbb() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: tbbpair: needs oneTBB: {why}");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("cpumgr-tbbpair-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let work = tbb::build_cpp(&prefix, "work", &dir);
    let profile = profile();
    let cpumgr = profile.join("cpumgr");
    assert!(cpumgr.is_file(), "{} is missing: cargo build -p cpumgr (or set CPUMGR_PROFILE_DIR)", cpumgr.display());
    let tcm = tbb::tcm_library(&profile);
    let (chunks, iters) = (var("TBBPAIR_CHUNKS", 1600).to_string(), var("TBBPAIR_ITERS", 500_000).to_string());
    let all = cpus();
    let (lo, hi) = all.split_at(all.len() / 2);
    let program = || {
        let mut c = Command::new(&work);
        c.args([&chunks, &iters]);
        c
    };
    let pinned = |set: &[usize]| {
        let mut c = Command::new("taskset");
        c.args(["-c", &join(set)]).arg(&work).args([&chunks, &iters]);
        c
    };
    let socket = dir.join("cpumgr.sock");
    let managed = |name: &str, tcm_on: bool| {
        let mut c = Command::new(&cpumgr);
        c.args(["run", "--name", name, "--"]).arg(&work).args([&chunks, &iters]);
        c.env("CPUMGR_SOCKET", &socket).env("LD_PRELOAD", &tcm).env("TCM_ENABLE", if tcm_on { "1" } else { "0" });
        c
    };

    println!(
        "two oneTBB programs, each a parallel_for of {chunks} chunks x {iters} iterations, {} CPUs; {} and {}",
        all.len(),
        cpumgr.display(),
        tcm.display()
    );
    println!("load average before: {}", loadavg());
    let alone = figures(program().stdout(Stdio::piped()).spawn().unwrap());
    println!("one program alone on all CPUs: {} s (threads per 250 ms: {})", alone.elapsed, alone.threads);
    println!("{:<34} {:>9}  {:>9} {:>9}  threads per 250 ms (A | B)", "setup", "makespan", "A", "B");
    let row = |name: &str, (span, a, b): (Duration, Figures, Figures)| {
        println!(
            "{name:<34} {:>8.2}s  {:>8}s {:>8}s  {} | {}",
            span.as_secs_f64(),
            a.elapsed,
            b.elapsed,
            a.threads,
            b.threads
        );
    };
    row("plain oneTBB", pair(program(), program()));
    row(&format!("static partition (taskset {} | {})", join(lo), join(hi)), pair(pinned(lo), pinned(hi)));
    let mut daemon = Command::new(&cpumgr)
        .args(["daemon", "--quantum", "100ms"])
        .env("CPUMGR_SOCKET", &socket)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !socket.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "the manager did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    row("cpumgr, libtcm", pair(managed("A", true), managed("B", true)));
    row("cpumgr, no libtcm (TCM_ENABLE=0)", pair(managed("A", false), managed("B", false)));
    let _ = Command::new("kill").arg(daemon.id().to_string()).status();
    let _ = daemon.wait();
    println!("load average after: {}", loadavg());
    let _ = std::fs::remove_dir_all(&dir);
}
