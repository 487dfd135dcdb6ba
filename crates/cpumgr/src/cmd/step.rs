//! `cpumgr step PID --name N --tasks T --cpus-per-task C`: the supervisor of one Slurm job step,
//! started by the SPANK plugin (`dist/slurm/cpumgr_spank.so`) when slurmstepd has forked the
//! step's task 0, which leads the process group of every task of the step.
//!
//! It waits until the step's tasks have executed their program (so that Slurm's CPU binding and
//! the user's identity are in place), registers the whole group as one program as wide as Slurm
//! granted it (tasks × CPUs per task), and then supervises it with the guarantees of `cpumgr
//! attach` (the [`Session`]): released to the tasks' own CPUs if the manager dies, unregistered
//! when the step ends or on
//! SIGTERM. Unlike `run` and `attach` it never starts a manager of its own ([`Session::join`]): a
//! node's manager is the system's, and without one the step runs unmanaged.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use cpumgr_core::CpuSet;
use cpumgr_daemon::enforce;
use cpumgr_daemon::procfs::{self, Target};
use cpumgr_proto::Registration;

use super::attach::{alive, supervise};
use super::control::duration;
use super::daemon;
use super::session::Session;
use crate::input::InputError;

/// How the step's program is registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Rigid when the step has several tasks on the node (MPI ranks), else malleable.
    Auto,
    /// A rigid team of tasks × CPUs per task: run whole or not at all.
    Rigid,
    /// Any number of CPUs from one up to tasks × CPUs per task.
    Malleable,
}

/// Arguments of `cpumgr step`.
#[derive(Debug, Parser)]
pub struct Args {
    /// The step's task 0, leader of the process group of every task of the step.
    pub pid: i32,
    /// The name shown by `status` and `top` (the plugin passes "job J.S user U").
    #[arg(long)]
    pub name: String,
    /// The step's tasks on this node.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub tasks: u32,
    /// CPUs per task (`srun -c`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub cpus_per_task: u32,
    /// How the step is registered.
    #[arg(long, value_enum, default_value_t = Kind::Auto)]
    pub kind: Kind,
    /// Relative weight.
    #[arg(long)]
    pub weight: Option<f64>,
    /// How long to wait for the tasks to execute their program before registering anyway.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub exec_wait: Duration,
    /// The node's manager (only its socket is used: `step` never starts one).
    #[command(flatten)]
    pub manager: daemon::Args,
}

/// The file a process executes.
fn exe(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// Whether `pid` has executed a program of its own: its file differs from its parent's (a task
/// not yet executed is a fork of slurmstepd).
fn executed(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let ppid = status.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|v| v.trim().parse::<i32>().ok());
    let Some(ppid) = ppid else { return false };
    match (exe(pid), exe(ppid)) {
        (Some(mine), Some(parents)) => mine != parents,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Waits until `tasks` processes of `target` have executed their program; returns their
/// processes then (or at the deadline), `None` when the leader ended first.
fn wait_for_tasks(target: Target, tasks: u32, wait: Duration) -> Option<Vec<i32>> {
    let deadline = Instant::now() + wait;
    loop {
        if !alive(target.leader()) {
            return None;
        }
        let pids = procfs::scan(&[target]).remove(&target).map(|s| s.pids).unwrap_or_default();
        let ready: Vec<i32> = pids.into_iter().filter(|&p| executed(p)).collect();
        if ready.len() >= tasks as usize {
            return Some(ready);
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                "{} of {tasks} tasks executed their program after {wait:?}; registering the step anyway",
                ready.len()
            );
            return Some(ready);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The registration of the step: as wide as what Slurm granted it on this node, tasks × CPUs per
/// task. Not the CPUs its tasks are bound to: Slurm may bind every task of a step sharing a node
/// to one CPU, and a rigid team of ranks capped at that would have them all spin on it.
fn registration(args: &Args) -> Registration {
    let cpus = args.tasks.saturating_mul(args.cpus_per_task);
    let rigid = args.kind == Kind::Rigid || (args.kind == Kind::Auto && args.tasks > 1);
    let mut reg =
        Registration { pid: Some(args.pid), name: args.name.clone(), weight: args.weight, ..Default::default() };
    if rigid {
        reg.rigid = Some(cpus);
    } else {
        reg.wanted = Some(cpus);
        reg.max = Some(cpus);
    }
    reg
}

/// Supervises the step until it ends or a signal ends the supervision.
pub fn run(args: Args) -> anyhow::Result<()> {
    let pid = args.pid;
    if pid <= 0 {
        return Err(InputError::new(format!("step {pid}: not a process id")));
    }
    if !alive(pid) {
        // A short step may end before its supervisor starts: nothing to manage.
        tracing::info!(pid, "{}: ended before it could be registered", args.name);
        return Ok(());
    }
    if let Some(w) = args.weight.filter(|w| !(w.is_finite() && *w > 0.0)) {
        return Err(InputError::new(format!("--weight {w}: must be a positive number")));
    }
    let target = Target::of(pid);
    if target.includes(std::process::id() as i32) {
        return Err(InputError::new(format!("step {pid}: this cpumgr step is in the step's process group")));
    }
    let Some(tasks) = wait_for_tasks(target, args.tasks, args.exec_wait) else { return Ok(()) };
    let mut bound = CpuSet::new();
    for p in &tasks {
        if let Ok(cpus) = enforce::affinity(*p) {
            bound.union_with(&cpus);
        }
    }
    let original = if bound.is_empty() { enforce::affinity(pid)? } else { bound };
    tracing::info!(pid, name = args.name, cpus = %original, "registering the step");
    let session = Session::join(&args.manager).map_err(|e| anyhow::anyhow!("{e:#}; {} runs unmanaged", args.name))?;
    supervise(session, registration(&args), target, &original)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kind: Kind, tasks: u32, cpus_per_task: u32) -> Args {
        let mut a = Args::parse_from(["step", "1", "--name", "job 1.0 user u"]);
        a.kind = kind;
        a.tasks = tasks;
        a.cpus_per_task = cpus_per_task;
        a
    }

    #[test]
    fn several_tasks_are_a_rigid_team_one_task_is_malleable_up_to_its_cpus() {
        let r = registration(&args(Kind::Auto, 2, 2));
        assert_eq!((r.rigid, r.wanted, r.max), (Some(4), None, None));
        let r = registration(&args(Kind::Auto, 1, 2));
        assert_eq!((r.rigid, r.wanted, r.max), (None, Some(2), Some(2)));
        let r = registration(&args(Kind::Rigid, 1, 3));
        assert_eq!(r.rigid, Some(3));
        let r = registration(&args(Kind::Malleable, 3, 1));
        assert_eq!((r.rigid, r.max), (None, Some(3)));
        assert_eq!(r.name, "job 1.0 user u");
    }

    #[test]
    fn this_process_has_executed_its_program() {
        assert!(executed(std::process::id() as i32));
    }
}
