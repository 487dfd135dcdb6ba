//! `cpumgr run -- CMD...`: launch a command as a registered program in its own process group,
//! forward SIGINT/SIGTERM to it, and exit with its status. When no manager answers on the socket,
//! one is started inside this process (a second `cpumgr run` joins it), and it keeps serving until
//! every program registered with it has ended.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use cpumgr_daemon::client::Client;
use cpumgr_proto::message::{Request, Response};

use crate::input::InputError;
use crate::manager_args::ManagerArgs;

/// Arguments of `cpumgr run`.
#[derive(Debug, Parser)]
pub struct Args {
    /// CPUs the program wants (default: all managed CPUs).
    #[arg(long)]
    request: Option<u32>,
    /// Fewest CPUs it can run on.
    #[arg(long, default_value_t = 1)]
    min: u32,
    /// Most CPUs it can use (default: its request).
    #[arg(long)]
    max: Option<u32>,
    /// The program runs exactly N processes/threads (an MPI job): it gets N CPUs or waits.
    #[arg(long)]
    rigid: Option<u32>,
    /// Relative weight.
    #[arg(long, default_value_t = 1.0)]
    weight: f64,
    /// Name shown in status and reports (default: the command).
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    manager: ManagerArgs,
    /// The command and its arguments.
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

/// Runs the command; returns its exit status for `main` to exit with.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let socket = args.manager.socket();
    let embedded = match Client::connect(&socket) {
        Ok(_) => None,
        Err(_) => Some(args.manager.start().context("starting the embedded manager")?),
    };
    let mut client = Client::connect(&socket).with_context(|| format!("connecting to {}", socket.display()))?;
    let cpus = args.manager.config()?.cpus.len() as u32;
    let request = args.request.or(args.rigid).unwrap_or(cpus);
    if request == 0 || args.rigid == Some(0) {
        return Err(InputError::new("--request and --rigid must be at least 1"));
    }
    let max = args.max.unwrap_or(request.max(args.min));
    if args.min > request || max < request {
        return Err(InputError::new(format!("need --min {} <= --request {request} <= --max {max}", args.min)));
    }

    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)?;
    }
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]).process_group(0);
    // SAFETY: prctl is async-signal-safe. If this launcher dies (even by SIGKILL), the program
    // gets SIGKILL too, rather than running on, unmanaged and detached.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| InputError::new(format!("{}: {e}", args.command[0])))?;
    let pid = child.id() as i32;
    let name = args.name.clone().unwrap_or_else(|| args.command[0].rsplit('/').next().unwrap_or("program").to_string());
    let (reply, _slot) = client.register(&Request::Register { pid, name, request, min: args.min, max, rigid: args.rigid, weight: args.weight })?;
    let id = match reply {
        Response::Registered { id } => Some(id),
        other => {
            tracing::warn!(?other, "the manager did not register the program; it runs unmanaged");
            None
        }
    };
    let status = loop {
        let sig = signal.swap(0, Ordering::SeqCst);
        if sig != 0 {
            // SAFETY: plain signal to the child's process group.
            unsafe { libc::kill(-pid, sig as i32) };
            unsafe { libc::kill(-pid, libc::SIGCONT) };
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(id) = id {
        let _ = client.request(&Request::Unregister { id });
    }
    if let Some(running) = embedded {
        // Others may have joined this manager: serve them until they are done.
        while !running.manager.is_empty() && signal.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        running.shutdown();
    }
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
