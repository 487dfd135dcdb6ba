//! `cpumgr run [--request N] ... -- CMD...`: runs CMD as a program registered with the manager.
//!
//! CMD gets its own process group (so the manager can stop and continue all of it); SIGINT,
//! SIGTERM and SIGHUP sent to `cpumgr run` are forwarded to that group; the exit status of
//! `cpumgr run` is CMD's (128 + signal when a signal ended it).
//!
//! When no manager answers on the socket, `cpumgr run` starts one inside its own process, and a
//! second `cpumgr run` joins it; the embedded manager stays until its last program has ended.
//!
//! `cpumgr run` is also its program's supervisor: if the manager disappears (even by SIGKILL, the
//! kernel closes its end of the connection), `cpumgr run` continues CMD's group and widens its
//! affinity back at once, so no program is left stopped or pinned by a dead manager. All of this
//! is the [`Session`] that `cpumgr attach` shares.
//!
//! A build (`make -j`, ninja, cargo) gets a jobserver whose tokens follow the program's
//! allocation, read from its slot (crate `cpumgr-jobserver`; `--jobserver`, `--no-jobserver`).

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;

use clap::Parser;
use cpumgr_daemon::procfs::Target;
use cpumgr_daemon::{enforce, pidfd};
use cpumgr_jobserver::{slot_source, Jobserver, Source};
use cpumgr_launch::{adapter, mpi};
use cpumgr_proto::Segment;

use super::daemon;
use super::session::{ProgramArgs, Session, FROZEN_AFTER};
use crate::input::InputError;

/// Arguments of `cpumgr run`.
#[derive(Debug, Parser)]
pub struct Args {
    /// What the program asks of the manager.
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Preload the OpenMP adapter (`libcpumgr_omp.so`) so every parallel region's team follows
    /// the allocation; the default when the command links an OpenMP runtime.
    #[arg(long, conflicts_with = "no_omp")]
    pub omp: bool,
    /// Never preload the OpenMP adapter.
    #[arg(long)]
    pub no_omp: bool,
    /// Give the command a GNU make jobserver whose tokens follow the allocation; the default for
    /// `make -j`, ninja and cargo (docs/LIVE.md, "Builds").
    #[arg(long, conflicts_with = "no_jobserver")]
    pub jobserver: bool,
    /// Never give the command a jobserver (make and ninja keep their own `-j`).
    #[arg(long)]
    pub no_jobserver: bool,
    /// Settings of the manager started here when none answers.
    #[command(flatten)]
    pub manager: daemon::Args,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1..)]
    pub cmd: Vec<String>,
}

/// The adapter to preload: asked for with `--omp`, or the command links an OpenMP runtime (and
/// `--no-omp` is not given). Asked for and missing is an error; detected and missing, a warning.
fn omp_adapter(args: &Args) -> anyhow::Result<Option<std::path::PathBuf>> {
    if args.no_omp {
        return Ok(None);
    }
    let wanted = args.omp || adapter::resolve(&args.cmd[0]).is_some_and(|p| adapter::links_openmp(&p));
    if !wanted {
        return Ok(None);
    }
    match adapter::adapter_library() {
        Some(lib) => Ok(Some(lib)),
        None if args.omp => Err(InputError::new(format!(
            "--omp: {} not found (set CPUMGR_OMP_LIB, or build it: cargo build -p cpumgr-omp)",
            adapter::ADAPTER
        ))),
        None => {
            tracing::warn!(
                "{} uses OpenMP but {} is not found; its regions keep their own teams",
                args.cmd[0],
                adapter::ADAPTER
            );
            Ok(None)
        }
    }
}

/// Runs the command; returns its exit status.
pub fn run(args: Args) -> anyhow::Result<u8> {
    args.program.check()?;
    let mut session = Session::open(&args.manager)?;
    let original = enforce::affinity(0)?;
    let force = (args.jobserver || args.no_jobserver).then_some(args.jobserver);
    let build = cpumgr_jobserver::plan(&args.cmd, force);
    let argv = build.as_ref().map_or(&args.cmd, |b| &b.args);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).process_group(0);
    let mut jobs = build.map(|b| Jobserver::new(b.style, b.cap)).transpose()?;
    if let Some(js) = &jobs {
        js.configure(&mut cmd);
    }
    adapter::managed_env(&mut cmd, session.socket());
    cpumgr_launch::tcm::provide(&mut cmd);
    if let Some(lib) = omp_adapter(&args)? {
        adapter::preload(&mut cmd, &lib);
    }
    let mut child = cmd.spawn().map_err(|e| InputError::new(format!("{}: {e}", args.cmd[0])))?;
    let pid = child.id() as i32;
    let ended = pidfd::open(pid).ok();
    let target = Target::Group(pid);
    let mut reg = args.program.registration(pid, &args.cmd.join(" "));
    if args.program.says_nothing_of_size() {
        if let Some(n) = mpi::ranks(&args.cmd) {
            tracing::info!("{} starts {n} MPI ranks: registered as a rigid team of {n}", args.cmd[0]);
            reg.rigid = Some(n);
        }
    }
    if let Err(message) = session.register(reg) {
        tracing::warn!("not registered, running unmanaged: {message}");
    }
    if let Some(js) = &mut jobs {
        let slot = session.slot_fd().and_then(|fd| Segment::open(fd).ok());
        let source = slot.map_or_else(|| Box::new(|| None::<u32>) as Box<dyn Source>, |s| slot_source(s, FROZEN_AFTER));
        js.follow(source, original.len() as u32);
    }
    let status = loop {
        while let Some(sig) = session.take_signal() {
            let _ = enforce::signal(target, sig);
            // A program the manager holds stopped must see the signal now, in every process.
            session.unregister();
            let strays = cpumgr_daemon::procfs::scan(&[target]).remove(&target).map(|s| s.strays).unwrap_or_default();
            let _ = enforce::cont(target, &strays);
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if session.watch(target, &original, ended.as_ref()) {
            break child.wait()?;
        }
    };
    drop(jobs);
    session.close();
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => (128 + s) as u8,
        _ => 1,
    })
}
