//! Runs a workload once under one configuration: an FCFS queue with a multiprogramming level,
//! jobs started at their arrival times as real processes (each in its own process group), their
//! exits and CPU times collected, and a trace of what ran when.
//!
//! The baselines need no manager: `os` runs every job as the workload says (OpenMP defaults),
//! `passive` adds `OMP_WAIT_POLICY=passive`, `dynamic` adds `OMP_DYNAMIC=true`, and `static`
//! splits the CPUs once into `mpl` processor sets and starts each job pinned to a free one with
//! a matching `OMP_NUM_THREADS` (processor sets, `taskset` style). A policy configuration starts
//! a private cpumgr manager with that policy and registers every job with it as it starts; the
//! run's trace is then the manager's (what it gave whom, quantum by quantum). In a policy run a
//! oneTBB program gets cpumgr's `libtcm.so` and a build (`make -j`, ninja, cargo) a jobserver
//! whose tokens follow its allocation, as under `cpumgr run`.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{CpuSet, ProgramId};
use cpumgr_jobserver::{slot_source, Jobserver, Source};

use crate::adapter;
use crate::workload::{Job, Workload};

/// How the jobs of a run are treated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Config {
    /// Plain Linux: every job as the workload says.
    Os,
    /// `OMP_WAIT_POLICY=passive`.
    Passive,
    /// `OMP_DYNAMIC=true`.
    Dynamic,
    /// Processor sets: the CPUs split once among `mpl` slots, each job pinned to one.
    Static,
    /// Under a cpumgr manager with this policy (`name:key=value,...`).
    Policy(String),
}

impl Config {
    /// Parses a baseline name (policies are given as [`Config::Policy`]).
    pub fn parse(name: &str) -> Option<Config> {
        Some(match name {
            "os" => Config::Os,
            "passive" => Config::Passive,
            "dynamic" => Config::Dynamic,
            "static" => Config::Static,
            _ => return None,
        })
    }

    /// The name it is reported under.
    pub fn name(&self) -> &str {
        match self {
            Config::Os => "os",
            Config::Passive => "passive",
            Config::Dynamic => "dynamic",
            Config::Static => "static",
            Config::Policy(p) => p,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exited with this status.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
    /// Could not be started (the reason).
    NotStarted(String),
    /// Ended by the launcher because the run was interrupted.
    Interrupted,
    /// Ended by the launcher at the run's time limit ([`RunOptions::limit`]), or never started
    /// before it: not a failure of the job, but its run's makespan is then a lower bound.
    OverLimit,
    /// Its arrival time came after the run's time limit: it has no turnaround.
    NotArrived,
}

impl Outcome {
    /// Whether the run's time limit cut the job short ([`Outcome::OverLimit`],
    /// [`Outcome::NotArrived`]): not a failure, but what its figures say is a bound.
    pub fn cut_by_limit(&self) -> bool {
        matches!(self, Outcome::OverLimit | Outcome::NotArrived)
    }

    /// Whether the job succeeded.
    pub fn ok(&self) -> bool {
        *self == Outcome::Exited(0)
    }

    /// A short description.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Exited(0) => "ok".into(),
            Outcome::Exited(c) => format!("failed: exit {c}"),
            Outcome::Signaled(s) => format!("failed: signal {s}"),
            Outcome::NotStarted(why) => format!("failed: not started: {why}"),
            Outcome::Interrupted => "interrupted".into(),
            Outcome::OverLimit => "stopped at the time limit".into(),
            Outcome::NotArrived => "not arrived by the time limit".into(),
        }
    }
}

/// One job's result.
#[derive(Debug, Clone, PartialEq)]
pub struct JobResult {
    /// The job's name.
    pub name: String,
    /// Its class.
    pub class: String,
    /// Arrival, seconds from the run's start.
    pub arrival: f64,
    /// When it started.
    pub start: f64,
    /// When it ended.
    pub end: f64,
    /// User + system CPU seconds it used (with its children).
    pub cpu_seconds: f64,
    /// How it ended.
    pub outcome: Outcome,
    /// The last lines of its stderr when it failed.
    pub stderr_tail: String,
}

impl JobResult {
    /// End minus arrival.
    pub fn turnaround(&self) -> f64 {
        self.end - self.arrival
    }

    /// End minus start.
    pub fn run_time(&self) -> f64 {
        self.end - self.start
    }
}

/// A whole run's result.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The configuration's name.
    pub config: String,
    /// CPUs used.
    pub cpus: CpuSet,
    /// First arrival to last end, seconds.
    pub makespan: f64,
    /// Per job, in workload order.
    pub jobs: Vec<JobResult>,
    /// What ran when.
    pub trace: Vec<Event>,
}

/// Settings shared by every run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// CPUs the workload may use.
    pub cpus: CpuSet,
    /// The manager's quantum in policy runs.
    pub quantum: Duration,
    /// Where job logs go.
    pub log_dir: PathBuf,
    /// Polling period of the launcher's loop.
    pub poll: Duration,
    /// The OpenMP adapter to preload into the jobs of policy runs that link an OpenMP runtime, so
    /// their teams follow the allocation region by region; `None` runs them transparently (held by
    /// affinity and stop/continue only).
    pub omp_adapter: Option<PathBuf>,
    /// Whether policy runs' managers offer only the CPUs unmanaged processes leave
    /// (`cpumgr daemon --yield-outside`).
    pub yield_outside: bool,
    /// How long a run may take: one still going then has its jobs ended
    /// ([`Outcome::OverLimit`]), so that a configuration that makes the workload crawl (plain
    /// OS with spinning teams on a large machine) bounds the comparison's time. `None`: no limit.
    pub limit: Option<Duration>,
}

struct Running {
    index: usize,
    pid: i32,
    started: f64,
    slot: Option<usize>,
    /// A build's jobserver, dropped (its tokens taken back) when the job is reaped.
    _jobserver: Option<Jobserver>,
}

/// How long a build's slot may go unrenewed before its jobserver treats it as unmanaged (as
/// `cpumgr run`'s supervisor does).
const FROZEN_AFTER: Duration = Duration::from_secs(2);

/// Where a build's jobserver reads its allocation: the slot the manager gave it, or nowhere
/// (unmanaged, its share of the machine) when it was not registered.
fn build_source(slot: Option<OwnedFd>) -> Box<dyn Source> {
    match slot.and_then(|fd| cpumgr_proto::Segment::open(fd).ok()) {
        Some(segment) => slot_source(segment, FROZEN_AFTER),
        None => Box::new(|| None::<u32>),
    }
}

/// Where a job's output goes: `LOGDIR/CONFIG-JOB.{out,err}`.
fn log_path(opts: &RunOptions, config: &Config, job: &Job) -> PathBuf {
    let safe = |s: &str| s.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_");
    opts.log_dir.join(format!("{}-{}", safe(config.name()), safe(&job.name)))
}

/// A private manager for a policy run: started before the first job, every job registered with
/// it, its trace read back at the end.
struct Managed {
    manager: cpumgr_daemon::Manager,
    conn: cpumgr_proto::Conn,
    socket: PathBuf,
    trace: PathBuf,
}

impl Managed {
    fn start(spec: &str, opts: &RunOptions) -> std::io::Result<Managed> {
        let socket = opts.log_dir.join(format!("manager-{}.sock", std::process::id()));
        let trace = opts.log_dir.join("manager.trace");
        let settings = cpumgr_daemon::Settings {
            policy: spec.to_string(),
            quantum: opts.quantum,
            cpus: Some(opts.cpus.clone()),
            trace: Some(trace.clone()),
            yield_outside: opts.yield_outside,
            ..cpumgr_daemon::Settings::default()
        };
        let manager = cpumgr_daemon::Manager::start(&socket, &settings).map_err(std::io::Error::other)?;
        let conn = cpumgr_proto::Conn::connect(&socket)?;
        Ok(Managed { manager, conn, socket, trace })
    }

    /// Registers the job's process; its slot when the manager took it.
    fn register(&self, pid: i32, job: &Job) -> Option<OwnedFd> {
        use cpumgr_proto::{Registration, Reply, Request};
        let reg = Registration {
            pid: Some(pid),
            name: job.name.clone(),
            wanted: Some(job.request),
            rigid: job.procs,
            ..Registration::default()
        };
        match self.conn.call(&Request::Register(reg)) {
            Ok((Reply::Error { message }, _)) => {
                tracing::warn!(job = job.name, message, "the manager refused the job; it runs unmanaged")
            }
            Err(e) => tracing::warn!(job = job.name, error = %e, "could not register the job; it runs unmanaged"),
            Ok((Reply::Registered { .. }, fds)) => return fds.into_iter().next(),
            Ok(_) => {}
        }
        None
    }

    /// Stops the manager and reads its trace back. Every job has ended by now; the manager
    /// records a program's exit when it sees it go, so it is asked (for up to a second) until it
    /// holds no program: the exits of jobs the launcher ended just before are in the trace then.
    fn finish(self) -> std::io::Result<Vec<Event>> {
        use cpumgr_proto::{Reply, Request};
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            match self.conn.call(&Request::Status) {
                Ok((Reply::Status(s), _)) if !s.programs.is_empty() => std::thread::sleep(Duration::from_millis(2)),
                _ => break,
            }
        }
        self.manager.shutdown();
        let text = std::fs::read_to_string(&self.trace)?;
        Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
    }
}

/// The trace's exit of the workload's job `index` (program id `index + 1`) at `end` seconds.
fn exit_event(index: usize, end: f64, status: Option<i32>) -> Event {
    Event { t: ns(end), program: Some(ProgramId(index as u64 + 1)), kind: EventKind::Exit { status } }
}

fn now_s(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

fn ns(s: f64) -> u64 {
    (s * 1e9) as u64
}

/// Splits `cpus` into `n` nearly equal contiguous slots.
pub fn split_cpus(cpus: &CpuSet, n: usize) -> Vec<CpuSet> {
    let list: Vec<u32> = cpus.iter().collect();
    let n = n.clamp(1, list.len().max(1));
    (0..n)
        .map(|k| {
            let lo = k * list.len() / n;
            let hi = (k + 1) * list.len() / n;
            list[lo..hi].iter().copied().collect()
        })
        .collect()
}

/// How a job of a policy run meets its manager: the manager's socket (the job's client waits
/// for the launcher's registration there) and the adapter to preload when the job uses OpenMP.
struct Cooperation<'a> {
    socket: &'a Path,
    omp_adapter: Option<&'a Path>,
}

impl Cooperation<'_> {
    fn apply(&self, cmd: &mut Command, job: &Job) {
        adapter::managed_env(cmd, self.socket);
        crate::tcm::provide(cmd);
        let openmp = || adapter::resolve(&job.command[0]).is_some_and(|p| adapter::links_openmp(&p));
        if let Some(lib) = self.omp_adapter.filter(|_| openmp()) {
            adapter::preload(cmd, lib);
        }
    }
}

fn spawn(
    job: &Job,
    config: &Config,
    slot: Option<&CpuSet>,
    coop: Option<&Cooperation>,
    log: &Path,
) -> std::io::Result<(i32, Option<Jobserver>)> {
    // A build under the manager gets a jobserver (its own `-j` kept as a cap).
    let build = coop.and_then(|_| cpumgr_jobserver::plan(&job.command, None));
    let argv = build.as_ref().map_or(&job.command, |b| &b.args);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).envs(&job.env).stdin(Stdio::null()).process_group(0);
    let jobserver = build.map(|b| Jobserver::new(b.style, b.cap)).transpose().map_err(std::io::Error::other)?;
    if let Some(js) = &jobserver {
        js.configure(&mut cmd);
    }
    if let Some(d) = &job.dir {
        cmd.current_dir(d);
    }
    if let Some(coop) = coop {
        coop.apply(&mut cmd, job);
    }
    match config {
        Config::Passive => {
            cmd.env("OMP_WAIT_POLICY", "passive");
        }
        Config::Dynamic => {
            cmd.env("OMP_DYNAMIC", "true");
        }
        Config::Os | Config::Static | Config::Policy(_) => {}
    }
    if let Some(set) = slot {
        if job.procs.is_none() {
            cmd.env("OMP_NUM_THREADS", set.len().to_string());
        }
        let mask = cpumgr_daemon::affinity::mask(set)?;
        // SAFETY: set_mask is a plain system call; the closure touches only the copied mask and
        // runs in the child between fork and exec.
        unsafe {
            cmd.pre_exec(move || cpumgr_daemon::affinity::set_mask(0, &mask));
        }
    }
    let out = std::fs::File::create(log.with_extension("out"))?;
    let err = std::fs::File::create(log.with_extension("err"))?;
    cmd.stdout(out).stderr(err);
    let child = cmd.spawn()?;
    Ok((child.id() as i32, jobserver))
}

/// Reaps `pid` if it ended: its outcome and CPU seconds.
fn try_reap(pid: i32) -> Option<(Outcome, f64)> {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall on our own child with valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    if r != pid {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    let outcome = if libc::WIFEXITED(status) {
        Outcome::Exited(libc::WEXITSTATUS(status))
    } else {
        Outcome::Signaled(libc::WTERMSIG(status))
    };
    Some((outcome, cpu))
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Ends every job still running: SIGTERM to its process group (and SIGCONT, so a stopped one
/// can act on it), then SIGKILL after a grace period, and reaps them all, each with `outcome`
/// and an exit without status in `trace` (so that the run's timeline ends when they did).
/// Processes of a group that outlive their job (a child that ignores SIGTERM) get SIGKILL once
/// the job is reaped.
fn end_all(
    running: &mut Vec<Running>,
    results: &mut [Option<JobResult>],
    trace: &mut Vec<Event>,
    jobs: &[Job],
    t0: Instant,
    outcome: &Outcome,
) {
    let groups: Vec<i32> = running.iter().map(|r| r.pid).collect();
    for r in running.iter() {
        unsafe {
            libc::kill(-r.pid, libc::SIGTERM);
            libc::kill(-r.pid, libc::SIGCONT);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !running.is_empty() {
        running.retain(|r| match try_reap(r.pid) {
            Some((_, cpu)) => {
                let job = &jobs[r.index];
                let end = now_s(t0);
                trace.push(exit_event(r.index, end, None));
                results[r.index] = Some(JobResult {
                    name: job.name.clone(),
                    class: job.class.clone(),
                    arrival: job.at,
                    start: r.started,
                    end,
                    cpu_seconds: cpu,
                    outcome: outcome.clone(),
                    stderr_tail: String::new(),
                });
                false
            }
            None => true,
        });
        if Instant::now() > deadline {
            for r in running.iter() {
                unsafe { libc::kill(-r.pid, libc::SIGKILL) };
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for g in groups {
        // SAFETY: plain syscall; a group that is already empty answers ESRCH.
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
}

/// Runs the workload once. `progress` is called with (jobs done, jobs total) whenever a job
/// ends; `stop` ends the run early (Ctrl-C): running jobs are ended, waiting ones are reported
/// as interrupted. At `opts.limit` the run ends the same way, its jobs reported as over the
/// limit.
pub fn run(
    workload: &Workload,
    config: &Config,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize),
) -> std::io::Result<RunResult> {
    std::fs::create_dir_all(&opts.log_dir)?;
    let jobs = &workload.jobs;
    let ncpus = opts.cpus.len() as u32;
    let mut mpl = if workload.mpl == 0 { jobs.len() } else { workload.mpl as usize };
    let slots = if *config == Config::Static { split_cpus(&opts.cpus, mpl.min(opts.cpus.len())) } else { Vec::new() };
    if *config == Config::Static {
        // Processor sets: a job runs only in a free set.
        mpl = slots.len();
    }
    let mut slot_free = vec![true; slots.len()];
    let mut pending: VecDeque<usize> = (0..jobs.len()).collect();
    let mut running: Vec<Running> = Vec::new();
    let mut results: Vec<Option<JobResult>> = vec![None; jobs.len()];
    let mut trace = vec![Event {
        t: 0,
        program: None,
        kind: EventKind::Start {
            source: "launch".into(),
            cpus: opts.cpus.clone(),
            policy: config.name().into(),
            quantum: 0,
        },
    }];
    let manager = match config {
        Config::Policy(spec) => Some(Managed::start(spec, opts)?),
        _ => None,
    };
    let mut done = 0;
    let t0 = Instant::now();
    let mut arrived = 0;
    // Why the run ended before its jobs did, if it did: what the jobs it ended are reported as.
    let mut cut = None;
    while done < jobs.len() {
        if stop.load(Ordering::Relaxed) {
            cut = Some(Outcome::Interrupted);
        } else if opts.limit.is_some_and(|l| t0.elapsed() >= l) {
            cut = Some(Outcome::OverLimit);
        }
        if let Some(outcome) = &cut {
            end_all(&mut running, &mut results, &mut trace, jobs, t0, outcome);
            break;
        }
        let now = now_s(t0);
        while arrived < jobs.len() && jobs[arrived].at <= now {
            let j = &jobs[arrived];
            trace.push(Event {
                t: ns(j.at),
                program: Some(ProgramId(arrived as u64 + 1)),
                kind: EventKind::Arrive { name: j.name.clone(), request: j.request },
            });
            arrived += 1;
        }
        // Admit in FCFS order while the multiprogramming level allows.
        while running.len() < mpl && pending.front().is_some_and(|&i| jobs[i].at <= now) {
            let i = pending.pop_front().unwrap_or_default();
            let job = &jobs[i];
            let slot = slot_free.iter().position(|f| *f);
            let set = slot.map(|s| &slots[s]);
            let log = log_path(opts, config, job);
            let id = Some(ProgramId(i as u64 + 1));
            let coop =
                manager.as_ref().map(|m| Cooperation { socket: &m.socket, omp_adapter: opts.omp_adapter.as_deref() });
            match spawn(job, config, set, coop.as_ref(), &log) {
                Ok((pid, mut jobserver)) => {
                    if let Some(s) = slot {
                        slot_free[s] = false;
                    }
                    let (count, cpus) = match set {
                        Some(s) => (s.len() as u32, s.clone()),
                        None => (job.procs.unwrap_or(job.request).min(ncpus.max(1)), opts.cpus.clone()),
                    };
                    trace.push(Event {
                        t: ns(now),
                        program: id,
                        kind: EventKind::Allocate { count, cpus, running: true },
                    });
                    let job_slot = manager.as_ref().and_then(|m| m.register(pid, job));
                    if let Some(js) = &mut jobserver {
                        js.follow(build_source(job_slot), ncpus);
                    }
                    running.push(Running { index: i, pid, started: now, slot, _jobserver: jobserver });
                }
                Err(e) => {
                    results[i] = Some(JobResult {
                        name: job.name.clone(),
                        class: job.class.clone(),
                        arrival: job.at,
                        start: now,
                        end: now,
                        cpu_seconds: 0.0,
                        outcome: Outcome::NotStarted(format!("{}: {e}", job.command[0])),
                        stderr_tail: String::new(),
                    });
                    trace.push(exit_event(i, now, None));
                    done += 1;
                    progress(done, jobs.len());
                }
            }
        }
        let mut ended = Vec::new();
        running.retain(|r| match try_reap(r.pid) {
            Some(x) => {
                ended.push((r.index, r.started, r.slot, x));
                false
            }
            None => true,
        });
        for (i, started, slot, (outcome, cpu)) in ended {
            let end = now_s(t0);
            let job = &jobs[i];
            if let Some(s) = slot {
                slot_free[s] = true;
            }
            let status = match outcome {
                Outcome::Exited(c) => Some(c),
                Outcome::Signaled(s) => Some(128 + s),
                _ => None,
            };
            trace.push(exit_event(i, end, status));
            let stderr_tail =
                if outcome.ok() { String::new() } else { tail(&log_path(opts, config, job).with_extension("err"), 5) };
            results[i] = Some(JobResult {
                name: job.name.clone(),
                class: job.class.clone(),
                arrival: job.at,
                start: started,
                end,
                cpu_seconds: cpu,
                outcome,
                stderr_tail,
            });
            done += 1;
            progress(done, jobs.len());
        }
        std::thread::sleep(opts.poll);
    }
    let end = now_s(t0);
    let jobs_out: Vec<JobResult> = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| JobResult {
                name: jobs[i].name.clone(),
                class: jobs[i].class.clone(),
                arrival: jobs[i].at,
                start: end,
                end,
                cpu_seconds: 0.0,
                outcome: match &cut {
                    Some(Outcome::OverLimit) if jobs[i].at > end => Outcome::NotArrived,
                    c => c.clone().unwrap_or(Outcome::Interrupted),
                },
                stderr_tail: String::new(),
            })
        })
        .collect();
    if let Some(m) = manager {
        trace = m.finish()?;
    }
    // A job that never arrived is not part of the run's span.
    let first =
        jobs_out.iter().filter(|j| j.outcome != Outcome::NotArrived).map(|j| j.arrival).fold(f64::INFINITY, f64::min);
    let last = jobs_out.iter().map(|j| j.end).fold(0.0, f64::max);
    trace.sort_by_key(|e| e.t);
    Ok(RunResult {
        config: config.name().into(),
        cpus: opts.cpus.clone(),
        makespan: (last - first).max(0.0),
        jobs: jobs_out,
        trace,
    })
}
