//! `cpumgr daemon`: the manager in the foreground until SIGTERM or SIGINT, which release every
//! program (continued, affinity widened back) before it exits.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cpumgr_core::CpuSet;
use cpumgr_daemon::{Manager, Settings};

use super::control::{parse_duration, socket_path};
use crate::input::InputError;

/// Arguments of `cpumgr daemon` (also flattened into `cpumgr run` for an embedded manager).
#[derive(Debug, Parser)]
#[group(skip)]
pub struct Args {
    /// Scheduling policy, `name:key=value,...` (see `cpumgr policies`).
    #[arg(long, env = "CPUMGR_POLICY", default_value = "equipartition")]
    pub policy: String,
    /// Scheduler quantum (`100ms`, `0.1s`).
    #[arg(long, env = "CPUMGR_QUANTUM", default_value = "100ms")]
    pub quantum: String,
    /// How long a cooperative program gets to shrink before it is forced (default: one quantum).
    #[arg(long, env = "CPUMGR_GRACE")]
    pub grace: Option<String>,
    /// Control socket (default: `$XDG_RUNTIME_DIR/cpumgr.sock`, `/run/cpumgr/cpumgr.sock` as root).
    #[arg(long, env = "CPUMGR_SOCKET")]
    pub socket: Option<PathBuf>,
    /// CPUs to manage, taskset syntax (default: the CPUs this process may use).
    #[arg(long, env = "CPUMGR_CPUS")]
    pub cpus: Option<String>,
    /// Write trace events (JSON lines) to this file.
    #[arg(long, env = "CPUMGR_TRACE")]
    pub trace: Option<PathBuf>,
}

impl Args {
    /// The manager settings these arguments describe.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let cpus = match &self.cpus {
            Some(t) => Some(CpuSet::parse(t).map_err(|e| InputError::new(format!("--cpus {t}: {e}")))?),
            None => None,
        };
        cpumgr_core::policies::build(&self.policy).map_err(|e| InputError::new(format!("--policy: {e}")))?;
        Ok(Settings {
            policy: self.policy.clone(),
            quantum: parse_duration("--quantum", &self.quantum)?,
            grace: self.grace.as_deref().map(|g| parse_duration("--grace", g)).transpose()?,
            cpus,
            trace: self.trace.clone(),
            ..Settings::default()
        })
    }
}

/// Runs the manager until SIGTERM or SIGINT.
pub fn run(args: Args) -> anyhow::Result<()> {
    let settings = args.settings()?;
    let socket = socket_path(args.socket.as_deref());
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let manager = Manager::start(&socket, &settings).map_err(|e| match e {
        cpumgr_daemon::StartError::Settings(m) => InputError::new(m),
        e => anyhow::Error::new(e),
    })?;
    eprintln!("cpumgr: managing on {} with {}", socket.display(), settings.policy);
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(20));
    }
    manager.shutdown();
    Ok(())
}
