//! `cpumgr run -- CMD...`: launch a command as a registered program in its own process group,
//! forward SIGINT/SIGTERM to it, and exit with its status. `cpumgr attach PID` registers a process
//! that already runs and stays until it ends. When no manager answers on the socket, one is
//! started inside this process (a second `cpumgr run` joins it), and it keeps serving until every
//! program registered with it has ended.

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
    #[command(flatten)]
    program: ProgramArgs,
    #[command(flatten)]
    manager: ManagerArgs,
    /// The command and its arguments.
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

/// Arguments of `cpumgr attach`.
#[derive(Debug, Parser)]
pub struct AttachArgs {
    /// The running process to manage (with its process group).
    pid: i32,
    #[command(flatten)]
    program: ProgramArgs,
    #[command(flatten)]
    manager: ManagerArgs,
}

/// What a program asks of the manager.
#[derive(Debug, Clone, clap::Args)]
pub struct ProgramArgs {
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
}

/// A connection to a manager, embedded in this process when none answered.
struct Session {
    client: Client,
    embedded: Option<cpumgr_daemon::Running>,
    signal: Arc<AtomicUsize>,
}

impl Session {
    fn open(manager: &ManagerArgs) -> anyhow::Result<Session> {
        let socket = manager.socket();
        let embedded = match Client::connect(&socket) {
            Ok(_) => None,
            Err(_) => Some(manager.start().context("starting the embedded manager")?),
        };
        let client = Client::connect(&socket).with_context(|| format!("connecting to {}", socket.display()))?;
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)?;
        }
        Ok(Session { client, embedded, signal })
    }

    /// Registers `pid`; `None` if the manager refused (the program then runs unmanaged).
    fn register(&mut self, pid: i32, name: String, p: &ProgramArgs, cpus: u32) -> anyhow::Result<Option<u64>> {
        let request = p.request.or(p.rigid).unwrap_or(cpus);
        if request == 0 || p.rigid == Some(0) {
            return Err(InputError::new("--request and --rigid must be at least 1"));
        }
        let max = p.max.unwrap_or(request.max(p.min));
        if p.min > request || max < request {
            return Err(InputError::new(format!("need --min {} <= --request {request} <= --max {max}", p.min)));
        }
        let (reply, _slot) = self.client.register(&Request::Register { pid, name, request, min: p.min, max, rigid: p.rigid, weight: p.weight })?;
        Ok(match reply {
            Response::Registered { id } => Some(id),
            other => {
                tracing::warn!(?other, "the manager did not register the program; it runs unmanaged");
                None
            }
        })
    }

    /// Unregisters, and if the manager is embedded here, serves the programs that joined it
    /// until they are done.
    fn close(mut self, id: Option<u64>) {
        if let Some(id) = id {
            let _ = self.client.request(&Request::Unregister { id });
        }
        if let Some(running) = self.embedded.take() {
            while !running.manager.is_empty() && self.signal.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
            running.shutdown();
        }
    }
}

/// Runs the command; returns its exit status for `main` to exit with.
pub fn run(args: Args) -> anyhow::Result<i32> {
    let cpus = args.manager.config()?.cpus.len() as u32;
    let mut session = Session::open(&args.manager)?;
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
    let mut child = cmd.spawn().map_err(|e| InputError::new(format!("{}: {e}", args.command[0])))?;
    let pid = child.id() as i32;
    let name = args.program.name.clone().unwrap_or_else(|| args.command[0].rsplit('/').next().unwrap_or("program").to_string());
    let id = match session.register(pid, name, &args.program, cpus) {
        Ok(id) => id,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let status = loop {
        let sig = session.signal.swap(0, Ordering::SeqCst);
        if sig != 0 {
            // SAFETY: plain signals to the child's process group.
            unsafe { libc::kill(-pid, sig as i32) };
            unsafe { libc::kill(-pid, libc::SIGCONT) };
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    session.close(id);
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Registers a running process and stays until it ends (or SIGINT/SIGTERM, which end only the
/// attachment: the process is restored and left running).
pub fn attach(args: AttachArgs) -> anyhow::Result<()> {
    let cpus = args.manager.config()?.cpus.len() as u32;
    if !cpumgr_daemon::procfs::alive(args.pid) {
        return Err(InputError::new(format!("no process {}", args.pid)));
    }
    let mut session = Session::open(&args.manager)?;
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", args.pid)).unwrap_or_default();
    let name = args.program.name.clone().unwrap_or_else(|| comm.trim().to_string());
    let id = session.register(args.pid, name, &args.program, cpus)?;
    while cpumgr_daemon::procfs::alive(args.pid) && session.signal.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    session.close(id);
    Ok(())
}
