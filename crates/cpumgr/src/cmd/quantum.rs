//! `cpumgr quantum set 50ms`: change the running manager's quantum.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use cpumgr_proto::Request;

use super::control::{call, parse_duration, socket_path};

/// Arguments of `cpumgr quantum`.
#[derive(Debug, Parser)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Control socket.
    #[arg(long, env = "CPUMGR_SOCKET", global = true)]
    socket: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Set the quantum (`50ms`, `0.2s`).
    Set {
        /// The new quantum.
        quantum: String,
    },
}

/// Sends the change.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Action::Set { quantum } = args.action;
    let q = parse_duration("quantum", &quantum)?;
    call(&socket_path(args.socket.as_deref()), &Request::SetQuantum { ms: q.as_secs_f64() * 1000.0 }, true)?;
    Ok(())
}
