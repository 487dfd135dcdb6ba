//! Load: a manager process with many registered programs (real sleeping processes) while clients
//! register and unregister programs as fast as a target rate, for a while. Prints the manager's
//! memory (RSS, sampled every second), its descriptors (before, with the programs, after the
//! churn, after unregistering everything), the churn rate achieved and the scheduler step time
//! (from the manager's own `--metrics` histogram).
//!
//! `cargo bench -p cpumgr-daemon --bench load`: 1024 programs, 10 000 register/unregister pairs per
//! second for 60 s, the manager modelling a node of 256 CPUs. Sizes: `CPUMGR_LOAD_PROGRAMS`,
//! `CPUMGR_LOAD_RATE` (pairs per second), `CPUMGR_LOAD_SECS`, `CPUMGR_LOAD_CLIENTS`,
//! `CPUMGR_LOAD_NODE` (hwloc's synthetic syntax, or `host`). Under `cargo test` (no `--bench` argument) it runs
//! sized down (32 programs, 500 pairs/s, 2 s) and fails if a descriptor leaks or a request fails.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpumgr_core::sources::synthetic;
use cpumgr_daemon::limits::UserLimits;
use cpumgr_daemon::ratelimit::Rates;
use cpumgr_daemon::{Manager, Settings};
use cpumgr_proto::{Conn, Registration, Reply, Request};
// Each sleeper leads its own process group, as a program started by `cpumgr run` does, so the
// manager's boundary steps walk `/proc` as they do for real programs.
use support::Sleepers;

/// Set in the manager process this benchmark starts: the socket to serve.
const MANAGER_VAR: &str = "CPUMGR_LOAD_MANAGER";

/// The node the manager models (hwloc's synthetic syntax), or `host` for this machine.
const NODE_VAR: &str = "CPUMGR_LOAD_NODE";

/// The full run's node: 256 CPUs. CPUs beyond this machine's cannot be given (their programs'
/// affinity calls fail), so the figure is the manager's own work for a node of that size.
const LARGE_NODE: &str = "package:2 core:64 pu:2";

/// The sizes of one run.
struct Sizes {
    programs: usize,
    rate: u64,
    secs: u64,
    clients: usize,
    node: String,
}

impl Sizes {
    fn from_env(full: bool) -> Sizes {
        let var = |name: &str, full_size: u64, test_size: u64| -> u64 {
            match std::env::var(name) {
                Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")),
                Err(_) if full => full_size,
                Err(_) => test_size,
            }
        };
        Sizes {
            programs: var("CPUMGR_LOAD_PROGRAMS", 1024, 32) as usize,
            rate: var("CPUMGR_LOAD_RATE", 10_000, 500),
            secs: var("CPUMGR_LOAD_SECS", 60, 2),
            clients: var("CPUMGR_LOAD_CLIENTS", 4, 2) as usize,
            node: std::env::var(NODE_VAR).unwrap_or_else(|_| if full { LARGE_NODE } else { "host" }.into()),
        }
    }
}

fn main() {
    if let Some(socket) = std::env::var_os(MANAGER_VAR) {
        serve(Path::new(&socket));
        return;
    }
    let full = std::env::args().any(|a| a == "--bench");
    let sizes = Sizes::from_env(full);
    let report = drive(&sizes);
    report.print(&sizes);
    assert_eq!(report.failed, 0, "requests failed under load");
    assert_eq!(report.fds_after_churn, report.fds_with_programs, "descriptors leaked by the churn");
    assert_eq!(report.fds_after_all, report.fds_before, "descriptors leaked by the programs");
}

/// The manager process: serves `socket` and metrics on a free loopback port (printed on stdout),
/// with limits out of the way of the load, until its stdin closes.
fn serve(socket: &Path) {
    let node = std::env::var(NODE_VAR)
        .ok()
        .filter(|n| n != "host")
        .map(|n| synthetic::parse(&n).unwrap_or_else(|e| panic!("{NODE_VAR}={n}: {e}")));
    let settings = Settings {
        backend: support::backend_for(node.as_ref()),
        topology: node,
        max_programs: 1 << 16,
        user_limits: UserLimits { max_programs: 1 << 16, ..UserLimits::default() },
        rates: Rates { per_connection: u32::MAX, per_user: u32::MAX, connections_per_user: 1024 },
        ..Settings::default()
    };
    let mut m = Manager::start(socket, &settings).expect("manager");
    let addr = m.serve_metrics("127.0.0.1:0".parse().unwrap(), false).expect("metrics");
    println!("{addr}");
    let _ = std::io::stdin().read(&mut [0u8]);
    m.shutdown();
}

/// What one run measured.
struct Report {
    rss_kib: Vec<u64>,
    fds_before: usize,
    fds_with_programs: usize,
    fds_after_churn: usize,
    fds_after_all: usize,
    pairs: u64,
    failed: u64,
    elapsed: f64,
    steps: u64,
    step_sum: f64,
    buckets: Vec<(String, u64)>,
}

impl Report {
    fn print(&self, s: &Sizes) {
        let rss: Vec<String> = self.rss_kib.iter().map(|k| format!("{:.1}", *k as f64 / 1024.0)).collect();
        println!(
            "load: {} programs registered on node {}; churn target {} register/unregister pairs/s on {} connections for {} s",
            s.programs, s.node, s.rate, s.clients, s.secs
        );
        println!(
            "churn achieved: {} pairs in {:.1} s = {:.0} pairs/s ({:.0} requests/s), {} failed",
            self.pairs,
            self.elapsed,
            self.pairs as f64 / self.elapsed,
            2.0 * self.pairs as f64 / self.elapsed,
            self.failed
        );
        let (first, last) = (self.rss_kib[0], *self.rss_kib.last().unwrap());
        let max = self.rss_kib.iter().max().unwrap();
        println!(
            "manager RSS MiB: with the programs {:.1}, end of churn {:.1}, max {:.1}; per second: {}",
            first as f64 / 1024.0,
            last as f64 / 1024.0,
            *max as f64 / 1024.0,
            rss.join(" ")
        );
        println!(
            "manager descriptors: before {}, with the programs {}, after the churn {}, after unregistering all {}",
            self.fds_before, self.fds_with_programs, self.fds_after_churn, self.fds_after_all
        );
        let mean = if self.steps > 0 { self.step_sum / self.steps as f64 * 1e3 } else { 0.0 };
        println!("scheduler steps: {} in {:.1} s, mean {mean:.2} ms", self.steps, self.elapsed);
        let cumulative: Vec<String> = self.buckets.iter().map(|(le, n)| format!("<={le}s:{n}")).collect();
        println!("step time histogram (cumulative, whole run): {}", cumulative.join(" "));
    }
}

fn register(conn: &Conn, pid: i32) -> Option<u64> {
    let reg = Registration { pid: Some(pid), name: format!("p{pid}"), ..Default::default() };
    match conn.call(&Request::Register(reg)) {
        Ok((Reply::Registered { id }, _fds)) => Some(id),
        _ => None,
    }
}

fn unregister(conn: &Conn, id: u64) -> bool {
    matches!(conn.call(&Request::Unregister { id }), Ok((Reply::Ok, _)))
}

/// Descriptors the process holds other than sockets and `/proc` files (slots, pidfds, files):
/// connections come and go with the clients, and the walk keeps open the `/proc` files of the
/// programs that run, which change with every quantum's decision.
fn fds(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    dir.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| {
                let l = l.to_string_lossy();
                !l.starts_with("socket:") && !l.starts_with("/proc/")
            })
        })
        .count()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `GET /metrics` from the manager.
fn metrics(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("metrics endpoint");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The descriptors `pid` holds for good: the fewest of 10 counts over 200 ms (a scheduler step
/// holds a directory of /proc open while it walks it).
fn steady_fds(pid: u32) -> usize {
    (0..10)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            fds(pid)
        })
        .min()
        .unwrap_or(0)
}

/// [`steady_fds`] once it is `n`, or after 5 s.
fn settle_fds(pid: u32, n: usize) -> usize {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let steady = steady_fds(pid);
        if steady == n || Instant::now() >= end {
            return steady;
        }
    }
}

fn drive(s: &Sizes) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let socket: PathBuf = dir.path().join("load.sock");
    let mut manager = Command::new(std::env::current_exe().unwrap())
        .env(MANAGER_VAR, &socket)
        .env(NODE_VAR, &s.node)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("manager process");
    let mut line = String::new();
    BufReader::new(manager.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().to_string();
    let mpid = manager.id();
    let setup = Conn::connect(&socket).expect("manager socket");
    setup.call(&Request::Status).unwrap();
    let fds_before = steady_fds(mpid);

    let programs = Sleepers::spawn(s.programs);
    let ids: Vec<u64> = programs.pids().into_iter().map(|pid| register(&setup, pid).expect("registration")).collect();
    setup.call(&Request::Status).unwrap();
    let fds_with_programs = steady_fds(mpid);

    // One sleeping process per churn client, registered and unregistered again and again.
    let churners = Sleepers::spawn(s.clients);
    let stop = Arc::new(AtomicBool::new(false));
    let (pairs, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let interval = Duration::from_secs_f64(s.clients as f64 / s.rate as f64);
    let started = Instant::now();
    let threads: Vec<_> = churners
        .pids()
        .into_iter()
        .map(|pid| {
            let conn = Conn::connect(&socket).expect("manager socket");
            let (stop, pairs, failed) = (stop.clone(), pairs.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    match register(&conn, pid) {
                        Some(id) if unregister(&conn, id) => pairs.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                    next += interval;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else if now - next > Duration::from_secs(1) {
                        next = now; // behind: do not make up for more than a second
                    }
                }
            })
        })
        .collect();
    let mut rss = vec![rss_kib(mpid)];
    while started.elapsed() < Duration::from_secs(s.secs) {
        std::thread::sleep(Duration::from_secs(1).min(Duration::from_secs(s.secs).saturating_sub(started.elapsed())));
        rss.push(rss_kib(mpid));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let fds_after_churn = settle_fds(mpid, fds_with_programs);
    let text = metrics(&addr);
    let value = |name: &str| -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok())
    };
    let steps = value("cpumgr_step_duration_seconds_count ").unwrap_or(0.0) as u64;
    let step_sum = value("cpumgr_step_duration_seconds_sum ").unwrap_or(0.0);
    let buckets = text
        .lines()
        .filter_map(|l| l.strip_prefix("cpumgr_step_duration_seconds_bucket{le=\""))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(le, n)| (le.to_string(), n.trim().parse().unwrap_or(0)))
        .collect();
    for id in ids {
        assert!(unregister(&setup, id), "unregister {id}");
    }
    let fds_after_all = settle_fds(mpid, fds_before);
    drop(setup);
    drop(manager.stdin.take());
    let _ = manager.wait();
    Report {
        rss_kib: rss,
        fds_before,
        fds_with_programs,
        fds_after_churn,
        fds_after_all,
        pairs: pairs.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        elapsed,
        steps,
        step_sum,
        buckets,
    }
}
