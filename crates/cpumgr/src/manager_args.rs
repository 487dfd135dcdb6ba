//! Options shared by every command that may start a manager (`daemon`, and `run` when no daemon
//! answers): policy, quantum, managed CPUs, topology, socket.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use cpumgr_core::CpuSet;
use cpumgr_daemon::Config;

use crate::input::InputError;

/// Manager settings; each also from a `CPUMGR_*` variable.
#[derive(Debug, Clone, Args)]
pub struct ManagerArgs {
    /// Scheduling policy, `name[:key=value,...]`.
    #[arg(long, env = "CPUMGR_POLICY", default_value = "equipartition:redistribute=true")]
    pub policy: String,
    /// Scheduler quantum (`100ms`, `0.1s`).
    #[arg(long, env = "CPUMGR_QUANTUM", default_value = "100ms")]
    pub quantum: String,
    /// CPUs to manage (taskset syntax); default: the CPUs this process may run on.
    #[arg(long, env = "CPUMGR_CPUS")]
    pub cpus: Option<String>,
    /// Topology (default: this machine's).
    #[arg(long, env = "CPUMGR_TOPOLOGY")]
    pub topology: Option<String>,
    /// Control socket (default: `$CPUMGR_SOCKET`, `$XDG_RUNTIME_DIR/cpumgr.sock`, `/run/cpumgr` as root).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Write the manager's trace (JSON lines) here.
    #[arg(long, env = "CPUMGR_TRACE")]
    pub trace: Option<PathBuf>,
}

/// Parses a quantum like `100ms`, `0.5s` or `120`.
pub fn parse_quantum(text: &str) -> anyhow::Result<Duration> {
    let ms = cpumgr_core::params::parse_millis(text).filter(|ms| (1.0..=10_000.0).contains(ms));
    ms.map(|ms| Duration::from_secs_f64(ms / 1000.0)).ok_or_else(|| InputError::new(format!("quantum {text:?} is not a duration in 1ms..=10s")))
}

impl ManagerArgs {
    /// The socket path.
    pub fn socket(&self) -> PathBuf {
        self.socket.clone().unwrap_or_else(cpumgr_daemon::server::default_socket)
    }

    /// The manager configuration.
    pub fn config(&self) -> anyhow::Result<Config> {
        cpumgr_core::policies::build(&self.policy).map_err(|e| InputError::new(e.to_string()))?;
        let topology = crate::topology_arg::load(self.topology.as_deref())?;
        let cpus = match &self.cpus {
            Some(list) => CpuSet::parse(list).map_err(|e| InputError::new(format!("--cpus: {e}")))?,
            None => crate::cmd::launch::allowed_cpus(),
        };
        let cpus = cpus.intersection(topology.cpus());
        if cpus.is_empty() {
            return Err(InputError::new("--cpus: none of these CPUs is on the machine"));
        }
        Ok(Config { policy: self.policy.clone(), quantum: parse_quantum(&self.quantum)?, cpus, topology })
    }

    /// Starts a manager listening on the socket.
    pub fn start(&self) -> anyhow::Result<cpumgr_daemon::Running> {
        let running = cpumgr_daemon::start(self.config()?, &self.socket())?;
        if let Some(path) = &self.trace {
            running.manager.trace_to(std::fs::File::create(path)?);
        }
        Ok(running)
    }
}
