//! The manager's CPU use per quantum: one scheduler step (`State::step`: the `/proc` walk, the
//! slots, the policy, the team guard, the placer, publication and enforcement) with 64 and 1024
//! registered programs, each a real sleeping process, on this machine's CPUs:
//! - *boundary*: a step at a quantum boundary, which walks `/proc` (every process on the machine);
//! - *kicked*: a step the work-list or a request triggers between boundaries, which reuses the
//!   last walk's samples;
//! - a boundary step with 1024 programs on a modelled node of 256 CPUs (the policy, the placer and
//!   publication at that size; a quarter of the programs run, and those are walked and confined);
//! - the `/proc` walk alone (opening every file it reads, or through the files the manager keeps
//!   open between walks), and with 2 000 more processes on the machine that are no program's
//!   (a server's daemons, containers and per-CPU kernel threads are thousands: the walk's part
//!   that grows with the machine, not with the programs).
//!
//! The boundary steps of 1024 programs are also measured in the manager thread's CPU time, which
//! a loaded machine changes far less than wall time.
//!
//! `cargo bench -p cpumgr-daemon --bench step`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use cpumgr_core::sources::synthetic;
use cpumgr_core::Topology;
use cpumgr_daemon::limits::UserLimits;
use cpumgr_daemon::procfs::{self, Known, Target};
use cpumgr_daemon::{Settings, State};
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion};
use support::Sleepers;

/// A manager state with every sleeper registered (asking for every CPU), stepped once so the
/// programs that get no CPU are already stopped. Boundary steps run at a 1 ms quantum, kicked
/// ones at 10 s (as when a storm of requests kicks steps between boundaries). `node`: the
/// machine the policy and the placer see, this one's when `None`.
fn state(kids: &Sleepers, quantum: Duration, node: Option<Topology>) -> State {
    let settings = Settings {
        quantum,
        backend: support::backend_for(node.as_ref()),
        topology: node,
        user_limits: UserLimits { max_programs: 4096, ..Default::default() },
        ..Default::default()
    };
    let mut state = State::new(&settings).expect("manager state");
    support::register_all(&mut state, kids);
    state.step(true);
    state
}

/// A large node, as the policy and the placer see it (hwloc's synthetic syntax): 256 CPUs. Its
/// CPUs beyond this machine's cannot be given (their programs' affinity calls fail), so what it
/// measures is the manager's own work for a node of that size.
const LARGE_NODE: &str = "package:2 core:64 pu:2";

fn step(c: &mut Criterion) {
    let mut g = c.benchmark_group("step");
    g.sample_size(20);
    for n in [64usize, 1024] {
        let kids = Sleepers::spawn(n);
        for (mode, quantum) in [("boundary", Duration::from_millis(1)), ("kicked", Duration::from_secs(10))] {
            let mut state = state(&kids, quantum, None);
            g.bench_function(format!("{mode} step, {n} programs"), |b| b.iter(|| state.step(mode == "boundary")));
            state.release_all();
        }
        if n == 1024 {
            let node = synthetic::parse(LARGE_NODE).expect("the modelled node");
            let mut state = state(&kids, Duration::from_millis(1), Some(node));
            g.bench_function(format!("boundary step, {n} programs, a modelled node of {LARGE_NODE}"), |b| {
                b.iter(|| state.step(true))
            });
            state.release_all();
        }
        let targets: Vec<Target> = kids.pids().into_iter().map(Target::of).collect();
        g.bench_function(format!("the /proc walk alone, {n} programs"), |b| b.iter(|| procfs::scan(&targets)));
        let mut files = procfs::Files::for_manager();
        let known: Vec<(Target, Known)> =
            targets.iter().map(|t| (*t, Known { pids: vec![t.leader()], ..Known::default() })).collect();
        g.bench_function(format!("the /proc walk alone, {n} programs, files kept open"), |b| {
            b.iter(|| files.scan(&known))
        });
        if n == 64 {
            let others = Sleepers::spawn(2000);
            g.bench_function(format!("the /proc walk alone, {n} programs, 2000 other processes"), |b| {
                b.iter(|| procfs::scan(&targets))
            });
            drop(others);
        }
    }
    g.finish();
}

/// The thread's CPU time (user and system, `CLOCK_THREAD_CPUTIME_ID`) as a criterion
/// measurement: what a step costs the manager's CPU, whatever else the machine runs (wall time
/// on a shared machine counts the waits for a CPU too).
struct ThreadCpu(WallTime);

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu()
    }

    fn end(&self, started: Duration) -> Duration {
        thread_cpu().saturating_sub(started)
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
}

/// The boundary steps of 1024 programs, on this machine and on the modelled large node, in the
/// manager thread's CPU time.
fn step_cpu(c: &mut Criterion<ThreadCpu>) {
    let mut g = c.benchmark_group("step, CPU time");
    g.sample_size(20);
    let kids = Sleepers::spawn(1024);
    let node = synthetic::parse(LARGE_NODE).expect("the modelled node");
    for (what, node) in [("this machine", None), ("a modelled node of 256 CPUs", Some(node))] {
        let mut state = state(&kids, Duration::from_millis(1), node);
        g.bench_function(format!("boundary step, 1024 programs, {what}"), |b| b.iter(|| state.step(true)));
        state.release_all();
    }
    g.finish();
}

criterion_group!(benches, step);
criterion_group! {
    name = cpu;
    config = Criterion::default().with_measurement(ThreadCpu(WallTime));
    targets = step_cpu
}
criterion_main!(benches, cpu);
