//! `cpumgr attach PID`: manages a process that already runs, with the guarantees of `cpumgr run`.
//!
//! The process (with its process group when it leads one) is registered with the manager, which
//! narrows, stops and continues it like any program; `cpumgr attach` stays as its supervisor until
//! it exits. SIGINT, SIGTERM or SIGHUP end only the attachment: the process is unregistered, and so
//! continued and widened back to the CPUs it had, and keeps running. If the manager disappears,
//! `cpumgr attach` releases the process itself. All of this is the [`Session`] `cpumgr run` uses.

use clap::Parser;
use cpumgr_core::CpuSet;
use cpumgr_daemon::procfs::{parse_stat, Target};
use cpumgr_daemon::{enforce, pidfd};
use cpumgr_proto::Registration;

use super::daemon;
use super::session::{ProgramArgs, Session};
use crate::input::InputError;

/// Arguments of `cpumgr attach`.
#[derive(Debug, Parser)]
pub struct Args {
    /// The running process to manage (with its process group when it leads one).
    pub pid: i32,
    /// What the program asks of the manager (the name defaults to the process's command name).
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Settings of the manager started here when none answers.
    #[command(flatten)]
    pub manager: daemon::Args,
}

/// Whether `pid` is a live process (neither gone nor a zombie waiting for its parent).
pub(super) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}

/// Manages the process until it exits or a signal ends the attachment.
pub fn run(args: Args) -> anyhow::Result<()> {
    let pid = args.pid;
    if pid <= 0 || !alive(pid) {
        return Err(InputError::new(format!("attach {pid}: no such process")));
    }
    let original = enforce::affinity(pid).map_err(|e| InputError::new(format!("attach {pid}: {e}")))?;
    let target = Target::of(pid);
    if target.includes(std::process::id() as i32) {
        // Stopped with its program, it could not supervise it.
        return Err(InputError::new(format!(
            "attach {pid}: this cpumgr attach is in process {pid}'s group, and would be stopped with it; start one of them in a group of its own (setsid)"
        )));
    }
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    args.program.check()?;
    let session = Session::open(&args.manager)?;
    supervise(session, args.program.registration(pid, comm.trim()), target, &original)
}

/// Registers `reg` (a process that runs, leading `target`) and supervises it until it exits or
/// a caught signal ends the supervision (it is then unregistered and keeps running); `original`
/// is what its affinity goes back to if the manager disappears. Shared by `attach` and `step`.
pub(super) fn supervise(
    mut session: Session,
    reg: Registration,
    target: Target,
    original: &CpuSet,
) -> anyhow::Result<()> {
    let pid = target.leader();
    let name = reg.name.clone();
    if let Err(message) = session.register(reg) {
        if !session.pending() {
            session.close();
            anyhow::bail!("the manager refused process {pid} ({name}): {message}");
        }
        tracing::warn!(pid, "not registered yet: {message}");
    }
    tracing::info!(pid, ?target, name, "attached");
    let ended = pidfd::open(pid).ok();
    while alive(pid) {
        if let Some(sig) = session.take_signal() {
            tracing::info!(pid, "{sig}: detaching; the process keeps running");
            break;
        }
        if session.watch(target, original, ended.as_ref()) {
            break;
        }
    }
    session.close();
    Ok(())
}
