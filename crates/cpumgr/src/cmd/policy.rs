//! `cpumgr policy set NAME[:k=v,...]`: switch the running manager's policy; programs notice only
//! their new allocations.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use cpumgr_proto::Request;

use super::control::{call, socket_path};
use crate::input::InputError;

/// Arguments of `cpumgr policy`.
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
    /// Switch to policy SPEC (`name:key=value,...`).
    Set {
        /// The policy spec.
        spec: String,
    },
}

/// Sends the change.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Action::Set { spec } = args.action;
    cpumgr_core::policies::build(&spec).map_err(|e| InputError::new(e.to_string()))?;
    call(&socket_path(args.socket.as_deref()), &Request::SetPolicy { spec }, true)?;
    Ok(())
}
