//! `cpumgr status`, `cpumgr policy set`, `cpumgr quantum set`: talk to a running manager.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use cpumgr_daemon::client::Client;
use cpumgr_proto::message::{Request, Response};

use crate::manager_args::parse_quantum;

/// Where the manager is.
#[derive(Debug, Clone, clap::Args)]
pub struct SocketArg {
    /// Control socket (default: `$CPUMGR_SOCKET`, `$XDG_RUNTIME_DIR/cpumgr.sock`, `/run/cpumgr` as root).
    #[arg(long)]
    socket: Option<PathBuf>,
}

impl SocketArg {
    fn ask(&self, request: &Request) -> anyhow::Result<Response> {
        let path = self.socket.clone().unwrap_or_else(cpumgr_daemon::server::default_socket);
        let mut c = Client::connect(&path).with_context(|| format!("no manager answers on {} (start one with `cpumgr daemon`, or use `cpumgr run`)", path.display()))?;
        match c.request(request)? {
            Response::Error { message } => bail!("the manager refused: {message}"),
            r => Ok(r),
        }
    }
}

/// Arguments of `cpumgr status`.
#[derive(Debug, Parser)]
pub struct StatusArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Prints the manager's state.
pub fn status(args: StatusArgs) -> anyhow::Result<()> {
    let Response::Status(s) = args.socket.ask(&Request::Status)? else { bail!("unexpected reply to status") };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!("policy {}  quantum {} ms  CPUs {}  backend {}  manager pid {}", s.policy, s.quantum_ms, s.cpus, s.backend, s.pid);
    println!("{:>4} {:>8} {:<16} {:>7} {:>5} {:<12} {:<8} {:>7} {:>9}", "id", "pid", "name", "request", "count", "cpus", "state", "threads", "cpu (s)");
    for p in &s.programs {
        println!("{:>4} {:>8} {:<16} {:>7} {:>5} {:<12} {:<8} {:>7} {:>9.2}", p.id, p.pid, p.name, p.request, p.count, p.cpus, p.state, p.threads, p.cpu_seconds);
    }
    Ok(())
}

/// Arguments of `cpumgr policy` and `cpumgr quantum`.
#[derive(Debug, Parser)]
pub struct SetArgs {
    #[command(subcommand)]
    set: Set,
    #[command(flatten)]
    socket: SocketArg,
}

#[derive(Debug, Subcommand)]
enum Set {
    /// Set it.
    Set {
        /// The new value (`NAME[:k=v,...]` for a policy, `50ms` for a quantum).
        value: String,
    },
}

/// `cpumgr policy set NAME[:k=v]`.
pub fn policy(args: SetArgs) -> anyhow::Result<()> {
    let Set::Set { value } = args.set;
    cpumgr_core::policies::build(&value).map_err(|e| crate::input::InputError::new(e.to_string()))?;
    args.socket.ask(&Request::SetPolicy { policy: value })?;
    Ok(())
}

/// `cpumgr quantum set 50ms`.
pub fn quantum(args: SetArgs) -> anyhow::Result<()> {
    let Set::Set { value } = args.set;
    let q = parse_quantum(&value)?;
    args.socket.ask(&Request::SetQuantum { ms: q.as_millis() as u64 })?;
    Ok(())
}
