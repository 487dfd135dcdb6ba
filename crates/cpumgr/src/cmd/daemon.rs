//! `cpumgr daemon`: the manager in the foreground until SIGTERM or SIGINT, which release every
//! program (continued, affinity widened back) before it exits.
//!
//! Settings come from flags, their `CPUMGR_*` variables, and a TOML config file (`--config`,
//! `CPUMGR_CONFIG`; see [`super::config`]), in that order of precedence, then the defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cpumgr_core::CpuSet;
use cpumgr_daemon::{Manager, Settings, StartError};
use toml::Spanned;

use super::config::Loaded;
use super::control::{duration, socket_path};
use crate::input::InputError;

/// Arguments of `cpumgr daemon` (also flattened into `cpumgr run` and `cpumgr attach` for an
/// embedded manager).
#[derive(Debug, Parser)]
#[group(skip)]
pub struct Args {
    /// TOML file with any of the settings below (`policy = "gang"`); flags override it.
    #[arg(long, env = "CPUMGR_CONFIG")]
    pub config: Option<PathBuf>,
    /// Scheduling policy, `name:key=value,...` (see `cpumgr policies`) [default: equipartition].
    #[arg(long, env = "CPUMGR_POLICY")]
    pub policy: Option<String>,
    /// Scheduler quantum (`100ms`, `0.1s`) [default: 100ms].
    #[arg(long, env = "CPUMGR_QUANTUM")]
    pub quantum: Option<String>,
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
    /// Serve OpenMetrics at `http://ADDR/metrics` (loopback, e.g. `127.0.0.1:9184`; port 0 picks
    /// a free one; the address bound is printed).
    #[arg(long, env = "CPUMGR_METRICS")]
    pub metrics: Option<String>,
    /// Allow `--metrics` on a non-loopback address.
    #[arg(long)]
    pub metrics_allow_remote: bool,
    /// Share the CPUs between programs (`program`) or between users first (`user`: each user an
    /// equal share whatever the number of programs it runs) [default: program].
    #[arg(long, env = "CPUMGR_SHARE")]
    pub share: Option<String>,
    /// Test mode that injects faults: `seed=N,delay=30ms,drop=P,kill=P,die=P` (delayed quanta,
    /// lost messages, programs and the manager itself killed at random; docs/RELIABILITY.md).
    #[arg(long, env = "CPUMGR_CHAOS")]
    pub chaos: Option<String>,
    /// How programs are confined to their CPUs: `auto` (the cgroup cpuset tree when the manager
    /// may write it, else affinity), `affinity`, or `cpuset` (refuse to start without it)
    /// [default: auto].
    #[arg(long, env = "CPUMGR_BACKEND")]
    pub backend: Option<String>,
    /// Offer the policy only the CPUs that unmanaged processes leave (measured from their CPU
    /// time on the managed CPUs over about a second), so that managed teams do not compete with
    /// them for time slices (paper 001's rule, applied by the manager).
    #[arg(long, env = "CPUMGR_YIELD_OUTSIDE")]
    pub yield_outside: bool,
}

/// What the arguments and the config file describe together.
#[derive(Debug)]
pub struct Resolved {
    /// The manager's settings.
    pub settings: Settings,
    /// Its control socket.
    pub socket: PathBuf,
    /// Where to serve metrics, if anywhere, and whether a non-loopback address is allowed.
    pub metrics: Option<(SocketAddr, bool)>,
}

impl Resolved {
    /// Starts a manager with these settings, serving metrics when asked (and printing where).
    pub fn start(&self) -> Result<Manager, StartError> {
        let mut m = Manager::start(&self.socket, &self.settings)?;
        if let Some((addr, allow_remote)) = self.metrics {
            let bound = m.serve_metrics(addr, allow_remote)?;
            eprintln!("cpumgr: metrics on http://{bound}/metrics");
        }
        Ok(m)
    }
}

/// A setting from its flag (or variable) when given, else from the file, parsed by `parse`; an
/// error names the flag, or the file, line and key.
fn pick<T>(
    flag: (&str, Option<&str>),
    file: &Loaded,
    key: &str,
    value: Option<&Spanned<String>>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> anyhow::Result<Option<T>> {
    if let Some(text) = flag.1 {
        return parse(text).map(Some).map_err(|e| InputError::new(format!("{} {text}: {e}", flag.0)));
    }
    value.map(|v| parse(v.get_ref()).map_err(|e| file.error(key, v, e))).transpose()
}

fn policy(spec: &str) -> Result<String, String> {
    cpumgr_core::policies::build(spec).map(|_| spec.to_string()).map_err(|e| e.to_string())
}

/// An address to serve metrics on, checked where it is written: a non-loopback one only when
/// `allow_remote` (either the flag or the file's key), rather than refused when the manager starts.
fn metrics_address(text: &str, allow_remote: bool) -> Result<SocketAddr, String> {
    let addr = text.parse().map_err(|_| "not an address (IP:PORT, e.g. 127.0.0.1:9184)".to_string())?;
    cpumgr_daemon::metrics::check_addr(addr, allow_remote)
        .map_err(|e| format!("{e} (--metrics-allow-remote, or metrics_allow_remote = true in the config file)"))?;
    Ok(addr)
}

/// A path from its flag (or variable) when given, else from the file, where an empty value is an
/// error naming the file, line and key (clap refuses an empty flag or variable, naming the flag).
fn pick_path(
    flag: &Option<PathBuf>,
    file: &Loaded,
    key: &str,
    value: Option<&Spanned<PathBuf>>,
) -> anyhow::Result<Option<PathBuf>> {
    if flag.is_some() {
        return Ok(flag.clone());
    }
    value
        .map(|v| match v.get_ref() {
            p if p.as_os_str().is_empty() => Err(file.error(key, v, "names no file")),
            p => Ok(p.clone()),
        })
        .transpose()
}

/// A CPU list of this machine's online CPUs, checked where it is written (flag, variable or config
/// line) rather than when the manager starts.
fn cpus(text: &str) -> Result<CpuSet, String> {
    let set = CpuSet::parse(text).map_err(|e| e.to_string())?;
    if set.is_empty() {
        return Err("names no CPU".into());
    }
    let outside = set.difference(cpumgr_daemon::state::host_topology()?.cpus());
    if !outside.is_empty() {
        return Err(format!("CPUs {outside} are not online"));
    }
    Ok(set)
}

impl Args {
    /// The manager settings and socket these arguments, and the config file they name, describe.
    pub fn resolve(&self) -> anyhow::Result<Resolved> {
        let file = match &self.config {
            Some(p) => Loaded::read(p)?,
            None => Loaded::default(),
        };
        let c = &file.config;
        let defaults = Settings::default();
        let allow_remote = self.metrics_allow_remote || c.metrics_allow_remote.unwrap_or(false);
        Ok(Resolved {
            settings: Settings {
                policy: pick(("--policy", self.policy.as_deref()), &file, "policy", c.policy.as_ref(), policy)?
                    .unwrap_or(defaults.policy),
                quantum: pick(("--quantum", self.quantum.as_deref()), &file, "quantum", c.quantum.as_ref(), duration)?
                    .unwrap_or(defaults.quantum),
                grace: pick(("--grace", self.grace.as_deref()), &file, "grace", c.grace.as_ref(), duration)?,
                cpus: pick(("--cpus", self.cpus.as_deref()), &file, "cpus", c.cpus.as_ref(), cpus)?,
                trace: pick_path(&self.trace, &file, "trace", c.trace.as_ref())?,
                share: pick(("--share", self.share.as_deref()), &file, "share", c.share.as_ref(), str::parse)?
                    .unwrap_or_default(),
                user_limits: file.user_limits()?,
                rates: file.rates()?,
                chaos: pick(("--chaos", self.chaos.as_deref()), &file, "chaos", None, str::parse)?,
                backend: pick(
                    ("--backend", self.backend.as_deref()),
                    &file,
                    "backend",
                    c.backend.as_ref(),
                    str::parse,
                )?
                .unwrap_or_default(),
                yield_outside: self.yield_outside || c.yield_outside.unwrap_or(false),
                ..defaults
            },
            socket: socket_path(pick_path(&self.socket, &file, "socket", c.socket.as_ref())?.as_deref()),
            metrics: pick(("--metrics", self.metrics.as_deref()), &file, "metrics", c.metrics.as_ref(), |t| {
                metrics_address(t, allow_remote)
            })?
            .map(|a| (a, allow_remote)),
        })
    }
}

/// Runs the manager until SIGTERM or SIGINT.
pub fn run(args: Args) -> anyhow::Result<()> {
    let resolved = args.resolve()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let manager = resolved.start().map_err(|e| match e {
        StartError::Settings(m) => InputError::new(m),
        e => anyhow::Error::new(e),
    })?;
    eprintln!("cpumgr: managing on {} with {}", resolved.socket.display(), resolved.settings.policy);
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(20));
    }
    manager.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn resolve(file: &str, flags: &[&str]) -> anyhow::Result<Resolved> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, file).unwrap();
        let mut argv = vec!["daemon", "--config", path.to_str().unwrap()];
        argv.extend_from_slice(flags);
        Args::try_parse_from(argv)
            .unwrap()
            .resolve()
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace(path.to_str().unwrap(), "c.toml")))
    }

    #[test]
    fn the_file_sets_what_no_flag_sets() {
        let r = resolve("policy = \"gang\"\nquantum = \"40ms\"\ncpus = \"0\"\n", &["--quantum", "30ms"]).unwrap();
        assert_eq!(r.settings.policy, "gang");
        assert_eq!(r.settings.quantum, Duration::from_millis(30));
        assert_eq!(r.settings.cpus, Some(CpuSet::parse("0").unwrap()));
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let r = resolve(include_str!("../../../../dist/cpumgr.toml"), &[]).unwrap();
        assert_eq!(r.socket, Path::new("/run/cpumgr/cpumgr.sock"));
        assert_eq!(r.settings.policy, "equipartition:redistribute=true");
    }

    #[test]
    fn a_bad_value_in_the_file_names_file_line_and_key() {
        let e = resolve("policy = \"gang\"\n\nquantum = \"fast\"\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("c.toml:3: field `quantum`: not a duration"), "{e}");
        let e = resolve("policy = \"nonesuch\"\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("c.toml:1: field `policy`"), "{e}");
        // A flag's bad value names the flag; the file's value is not consulted.
        let e = resolve("quantum = \"fast\"\n", &["--quantum", "slow"]).unwrap_err().to_string();
        assert!(e.starts_with("--quantum slow:"), "{e}");
    }

    #[test]
    fn an_empty_path_in_the_file_names_file_line_and_key() {
        let e = resolve("policy = \"gang\"\ntrace = \"\"\n", &[]).unwrap_err().to_string();
        assert_eq!(e, "c.toml:2: field `trace`: names no file");
        let e = resolve("\nsocket = \"\"\n", &[]).unwrap_err().to_string();
        assert_eq!(e, "c.toml:2: field `socket`: names no file");
        // A flag overrides the file's value; an empty flag is refused naming the flag.
        assert_eq!(resolve("trace = \"\"\n", &["--trace", "t.jsonl"]).unwrap().settings.trace, Some("t.jsonl".into()));
        let e = Args::try_parse_from(["daemon", "--trace", ""]).unwrap_err().to_string();
        assert!(e.contains("--trace"), "{e}");
    }

    #[test]
    fn a_remote_metrics_address_in_the_file_names_file_line_and_key() {
        let e = resolve("policy = \"gang\"\n\nmetrics = \"0.0.0.0:9184\"\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("c.toml:3: field `metrics`: "), "{e}");
        assert!(e.contains("not loopback"), "{e}");
        let e = resolve("", &["--metrics", "0.0.0.0:9184"]).unwrap_err().to_string();
        assert!(e.starts_with("--metrics 0.0.0.0:9184: "), "{e}");
        assert!(e.contains("not loopback"), "{e}");
        // Allowed by the file's key or by the flag, wherever the address is written.
        let remote = Some(("0.0.0.0:9184".parse().unwrap(), true));
        assert_eq!(resolve("metrics = \"0.0.0.0:9184\"\nmetrics_allow_remote = true\n", &[]).unwrap().metrics, remote);
        assert_eq!(resolve("metrics = \"0.0.0.0:9184\"\n", &["--metrics-allow-remote"]).unwrap().metrics, remote);
        assert_eq!(resolve("metrics_allow_remote = true\n", &["--metrics", "0.0.0.0:9184"]).unwrap().metrics, remote);
        assert_eq!(
            resolve("metrics = \"127.0.0.1:0\"\n", &[]).unwrap().metrics,
            Some(("127.0.0.1:0".parse().unwrap(), false))
        );
    }
}
