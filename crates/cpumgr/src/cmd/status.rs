//! `cpumgr status`: the manager's policy, quantum, backend and CPUs, and its programs.

use std::path::PathBuf;

use clap::Parser;
use cpumgr_proto::{Reply, Request};

use super::control::{call, socket_path};

/// Arguments of `cpumgr status`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Print JSON: `{"policy", "quantum_ms", "cpus", "programs": [{"id", "pid", "name", ...}]}`.
    #[arg(long)]
    pub json: bool,
    /// Control socket.
    #[arg(long, env = "CPUMGR_SOCKET")]
    pub socket: Option<PathBuf>,
}

/// Prints the status.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Reply::Status(s) = call(&socket_path(args.socket.as_deref()), &Request::Status, false)? else {
        anyhow::bail!("the manager answered something else than a status");
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "policy {}  quantum {} ms  backend {}  cpus {}  manager pid {}  steps {}",
        s.policy, s.quantum_ms, s.backend, s.cpus, s.pid, s.steps
    );
    println!(
        "{:>4} {:>8} {:<16} {:>7} {:>5} {:<12} {:<8} {:>7} {:<8} {:>10}",
        "id", "pid", "name", "request", "count", "cpus", "state", "threads", "team", "cpu ms"
    );
    for p in &s.programs {
        let threads = p.threads.map_or("-".to_string(), |t| t.to_string());
        println!(
            "{:>4} {:>8} {:<16} {:>7} {:>5} {:<12} {:<8} {:>7} {:<8} {:>10}",
            p.id,
            p.pid,
            p.name,
            p.request,
            p.count,
            p.cpus.to_string(),
            p.state,
            threads,
            if p.team.is_empty() { "-" } else { &p.team },
            p.cpu_ms
        );
    }
    Ok(())
}
