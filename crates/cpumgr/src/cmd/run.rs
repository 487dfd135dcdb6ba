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
//! affinity back at once, so no program is left stopped or pinned by a dead manager.

use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use cpumgr_daemon::procfs::Target;
use cpumgr_daemon::{enforce, Manager, StartError};
use cpumgr_launch::adapter;
use cpumgr_proto::{Conn, Registration, Reply, Request};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::control::socket_path;
use super::daemon;
use crate::input::InputError;

/// Arguments of `cpumgr run`.
#[derive(Debug, Parser)]
pub struct Args {
    /// CPUs wanted (default: every managed CPU).
    #[arg(long)]
    pub request: Option<u32>,
    /// Fewest CPUs it can run on.
    #[arg(long)]
    pub min: Option<u32>,
    /// Most CPUs it can use.
    #[arg(long)]
    pub max: Option<u32>,
    /// A rigid program of exactly N processes or threads.
    #[arg(long, conflicts_with_all = ["request", "min", "max"])]
    pub rigid: Option<u32>,
    /// Relative weight.
    #[arg(long)]
    pub weight: Option<f64>,
    /// Name shown by `status` (default: the command).
    #[arg(long)]
    pub name: Option<String>,
    /// Preload the OpenMP adapter (`libcpumgr_omp.so`) so every parallel region's team follows
    /// the allocation; the default when the command links an OpenMP runtime.
    #[arg(long, conflicts_with = "no_omp")]
    pub omp: bool,
    /// Never preload the OpenMP adapter.
    #[arg(long)]
    pub no_omp: bool,
    /// Settings of the manager started here when none answers.
    #[command(flatten)]
    pub manager: daemon::Args,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1..)]
    pub cmd: Vec<String>,
}

/// The signals forwarded to the program.
const FORWARDED: [i32; 3] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

/// Connects to the manager, or starts one here.
fn connect_or_embed(socket: &std::path::Path, args: &daemon::Args) -> anyhow::Result<(Conn, Option<Manager>)> {
    if let Ok(c) = Conn::connect(socket) {
        return Ok((c, None));
    }
    let settings = args.settings()?;
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match Manager::start(socket, &settings) {
            Ok(m) => return Ok((Conn::connect(socket)?, Some(m))),
            // Another process is starting one: join it as soon as it answers.
            Err(StartError::AlreadyRunning(_)) => {
                if let Ok(c) = Conn::connect(socket) {
                    return Ok((c, None));
                }
                if Instant::now() > deadline {
                    anyhow::bail!("a manager holds {} but does not answer", socket.display());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(StartError::Settings(m)) => return Err(InputError::new(m)),
            Err(e) => return Err(e.into()),
        }
    }
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
            tracing::warn!("{} uses OpenMP but {} is not found; its regions keep their own teams", args.cmd[0], adapter::ADAPTER);
            Ok(None)
        }
    }
}

/// Runs the command; returns its exit status.
pub fn run(args: Args) -> anyhow::Result<u8> {
    let socket = socket_path(args.manager.socket.as_deref());
    let (conn, embedded) = connect_or_embed(&socket, &args.manager)?;
    conn.set_timeout(Some(Duration::from_secs(5)))?;
    let original = enforce::affinity(0)?;
    let flags: Vec<(i32, Arc<AtomicBool>)> = FORWARDED.iter().map(|&s| (s, Arc::new(AtomicBool::new(false)))).collect();
    for (sig, flag) in &flags {
        signal_hook::flag::register(*sig, flag.clone())?;
    }
    let mut cmd = Command::new(&args.cmd[0]);
    cmd.args(&args.cmd[1..]).process_group(0);
    adapter::managed_env(&mut cmd, &socket);
    if let Some(lib) = omp_adapter(&args)? {
        adapter::preload(&mut cmd, &lib);
    }
    let mut child = cmd.spawn().map_err(|e| InputError::new(format!("{}: {e}", args.cmd[0])))?;
    let pid = child.id() as i32;
    let target = Target::Group(pid);
    let reg = Registration {
        pid: Some(pid),
        name: args.name.clone().unwrap_or_else(|| args.cmd.join(" ").chars().take(64).collect()),
        now: args.request,
        min: args.min,
        max: args.max,
        rigid: args.rigid,
        weight: args.weight,
    };
    let mut id = None;
    let mut link = Some(conn);
    match link.as_ref().map(|c| c.call(&Request::Register(reg))) {
        Some(Ok((Reply::Registered { id: i }, _slot))) => id = Some(i),
        Some(Ok((Reply::Error { message }, _))) => tracing::warn!("not registered, running unmanaged: {message}"),
        other => tracing::warn!("not registered, running unmanaged: {other:?}"),
    }
    let status = loop {
        for (sig, flag) in &flags {
            if flag.swap(false, Ordering::AcqRel) {
                let sig = nix::sys::signal::Signal::try_from(*sig)?;
                let _ = enforce::signal(target, sig);
                // A program the manager holds stopped must see the signal now.
                if let (Some(c), Some(i)) = (link.as_ref(), id.take()) {
                    let _ = c.call(&Request::Unregister { id: i });
                }
                let _ = enforce::cont(target);
            }
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        let gone = match &link {
            Some(c) => {
                let mut fds = [PollFd::new(c.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::from(20u16));
                fds[0].revents().is_some_and(|r| !r.is_empty())
            }
            None => {
                std::thread::sleep(Duration::from_millis(20));
                false
            }
        };
        if gone {
            // The only message the manager ever sends unasked is its end (EOF).
            tracing::warn!("the manager is gone; releasing the program");
            enforce::release(target, &original);
            link = None;
            id = None;
        }
    };
    if let (Some(c), Some(i)) = (&link, id) {
        let _ = c.call(&Request::Unregister { id: i });
    }
    drop(link);
    if let Some(m) = embedded {
        let mut told = false;
        while m.programs() > 0 && !flags.iter().any(|(_, f)| f.load(Ordering::Acquire)) {
            if !told {
                eprintln!("cpumgr: keeping the manager on {} for {} more program(s)", socket.display(), m.programs());
                told = true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        m.shutdown();
    }
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => (128 + s) as u8,
        _ => 1,
    })
}
