//! The manager's TOML config file (`cpumgr daemon --config FILE`, or `CPUMGR_CONFIG`): the same
//! settings as the daemon's flags, one key each. A flag (or its `CPUMGR_*` variable) overrides the
//! file; an unknown key or a bad value is an error naming the file, the line and the key.
//!
//! ```toml
//! policy = "equipartition"
//! quantum = "100ms"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use cpumgr_daemon::limits::UserLimits;
use cpumgr_daemon::ratelimit::Rates;

use crate::input::{line_of, read_file, toml_error, InputError};

/// A config file as written: every key optional, each value with where it stands in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Scheduling policy, `name:key=value,...`.
    pub policy: Option<Spanned<String>>,
    /// Scheduler quantum (`100ms`, `0.1s`).
    pub quantum: Option<Spanned<String>>,
    /// Grace period before a shrink is forced.
    pub grace: Option<Spanned<String>>,
    /// CPUs to manage, taskset syntax.
    pub cpus: Option<Spanned<String>>,
    /// Control socket path.
    pub socket: Option<Spanned<PathBuf>>,
    /// Trace file (JSON lines).
    pub trace: Option<Spanned<PathBuf>>,
    /// Address of the OpenMetrics endpoint (`127.0.0.1:9184`).
    pub metrics: Option<Spanned<String>>,
    /// Serve metrics on a non-loopback address too.
    pub metrics_allow_remote: Option<bool>,
    /// How programs are confined to their CPUs (`"auto"`, `"affinity"`, `"cpuset"`).
    pub backend: Option<Spanned<String>>,
    /// Offer the policy only the CPUs that unmanaged processes leave.
    pub yield_outside: Option<bool>,
    /// Share the CPUs between programs (`"program"`, the default) or between users first
    /// (`"user"`: each user an equal share, whatever the number of programs it runs).
    pub share: Option<Spanned<String>>,
    /// Most programs one user may have registered at once.
    pub max_programs_per_user: Option<Spanned<i64>>,
    /// Highest weight a program may ask for.
    pub max_weight: Option<Spanned<f64>>,
    /// Weight of a program that asks for none.
    pub default_weight: Option<Spanned<f64>>,
    /// Requests per second one control connection may send (burst: one second's worth).
    pub requests_per_second: Option<Spanned<i64>>,
    /// Requests per second all the connections of one user may send together.
    pub user_requests_per_second: Option<Spanned<i64>>,
    /// Control connections one user may hold open at once.
    pub connections_per_user: Option<Spanned<i64>>,
}

/// A loaded config file: its values, and its text to place errors on lines.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Where it came from; `None` when no file was given.
    pub path: Option<PathBuf>,
    text: String,
    /// The values.
    pub config: Config,
}

impl Loaded {
    /// Reads and parses `path`; an unknown key or a value of the wrong type is an input error.
    pub fn read(path: &Path) -> anyhow::Result<Loaded> {
        let text = read_file(path)?;
        Self::parse(path, text)
    }

    /// Parses `text` as the file `path`.
    pub fn parse(path: &Path, text: String) -> anyhow::Result<Loaded> {
        let config: Config = toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?;
        Ok(Loaded { path: Some(path.to_path_buf()), text, config })
    }

    /// The per-user limits the file sets, each missing key at its default; a count below 1 or
    /// a weight that is not a positive number is an error naming its line.
    pub fn user_limits(&self) -> anyhow::Result<UserLimits> {
        let c = &self.config;
        let d = UserLimits::default();
        let limits = UserLimits {
            max_programs: self
                .count("max_programs_per_user", &c.max_programs_per_user)?
                .unwrap_or(d.max_programs as u32) as usize,
            max_weight: self.weight("max_weight", &c.max_weight)?.unwrap_or(d.max_weight),
            default_weight: self.weight("default_weight", &c.default_weight)?.unwrap_or(d.default_weight),
        };
        limits.check().map_err(|e| match &c.default_weight {
            Some(v) => self.error("default_weight", v, e),
            None => InputError::new(e),
        })?;
        Ok(limits)
    }

    /// The request rates and connection cap the file sets, each missing key at its default.
    pub fn rates(&self) -> anyhow::Result<Rates> {
        let c = &self.config;
        let d = Rates::default();
        Ok(Rates {
            per_connection: self.count("requests_per_second", &c.requests_per_second)?.unwrap_or(d.per_connection),
            per_user: self.count("user_requests_per_second", &c.user_requests_per_second)?.unwrap_or(d.per_user),
            connections_per_user: self
                .count("connections_per_user", &c.connections_per_user)?
                .map_or(d.connections_per_user, |n| n as usize),
        })
    }

    fn count(&self, key: &str, v: &Option<Spanned<i64>>) -> anyhow::Result<Option<u32>> {
        v.as_ref()
            .map(|v| match u32::try_from(*v.get_ref()) {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(self.error(key, v, format!("{} is not a count from 1 to {}", v.get_ref(), u32::MAX))),
            })
            .transpose()
    }

    fn weight(&self, key: &str, v: &Option<Spanned<f64>>) -> anyhow::Result<Option<f64>> {
        v.as_ref()
            .map(|v| match *v.get_ref() {
                w if w.is_finite() && w > 0.0 => Ok(w),
                w => Err(self.error(key, v, format!("{w} is not a positive number"))),
            })
            .transpose()
    }

    /// An input error about the value of `key` at `span`.
    pub fn error<T>(&self, key: &str, value: &Spanned<T>, msg: impl std::fmt::Display) -> anyhow::Error {
        match &self.path {
            Some(p) => InputError::at(p, line_of(&self.text, value.span().start), key, msg),
            None => InputError::new(format!("{key}: {msg}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Loaded> {
        Loaded::parse(Path::new("m.toml"), text.to_string())
    }

    #[test]
    fn every_key_is_read() {
        let l = parse(
            "policy = \"gang\"\nquantum = \"50ms\"\ngrace = \"10ms\"\ncpus = \"0-1\"\nsocket = \"/tmp/s\"\ntrace = \"t.jsonl\"\n\
             metrics = \"127.0.0.1:0\"\nmetrics_allow_remote = true\n",
        )
        .unwrap();
        let c = &l.config;
        assert_eq!(c.policy.as_ref().unwrap().get_ref(), "gang");
        assert_eq!(c.quantum.as_ref().unwrap().get_ref(), "50ms");
        assert_eq!(c.grace.as_ref().unwrap().get_ref(), "10ms");
        assert_eq!(c.cpus.as_ref().unwrap().get_ref(), "0-1");
        assert_eq!(c.socket.as_ref().unwrap().get_ref(), Path::new("/tmp/s"));
        assert_eq!(c.trace.as_ref().unwrap().get_ref(), Path::new("t.jsonl"));
        assert_eq!(c.metrics.as_ref().unwrap().get_ref(), "127.0.0.1:0");
        assert_eq!(c.metrics_allow_remote, Some(true));
    }

    #[test]
    fn the_limits_are_read_and_bad_ones_name_their_line() {
        let l = parse(
            "share = \"user\"\nmax_programs_per_user = 8\nmax_weight = 4.0\ndefault_weight = 2.0\n\
             requests_per_second = 50\nuser_requests_per_second = 80\nconnections_per_user = 3\n",
        )
        .unwrap();
        assert_eq!(l.config.share.as_ref().unwrap().get_ref(), "user");
        assert_eq!(l.user_limits().unwrap(), UserLimits { max_programs: 8, max_weight: 4.0, default_weight: 2.0 });
        assert_eq!(l.rates().unwrap(), Rates { per_connection: 50, per_user: 80, connections_per_user: 3 });
        assert_eq!(parse("").unwrap().rates().unwrap(), Rates::default());
        let e = parse("\nmax_programs_per_user = 0\n").unwrap().user_limits().unwrap_err().to_string();
        assert!(e.starts_with("m.toml:2: field `max_programs_per_user`: 0 is not a count"), "{e}");
        let e = parse("max_weight = -1.5\n").unwrap().user_limits().unwrap_err().to_string();
        assert!(e.starts_with("m.toml:1: field `max_weight`: -1.5 is not a positive number"), "{e}");
        let e = parse("max_weight = 2.0\ndefault_weight = 3.0\n").unwrap().user_limits().unwrap_err().to_string();
        assert!(e.starts_with("m.toml:2: field `default_weight`: default_weight 3 is above max_weight 2"), "{e}");
        let e = parse("requests_per_second = 5000000000\n").unwrap().rates().unwrap_err().to_string();
        assert!(e.starts_with("m.toml:1: field `requests_per_second`"), "{e}");
    }

    #[test]
    fn an_unknown_key_names_file_line_and_key() {
        let e = parse("policy = \"gang\"\nquantm = \"50ms\"\n").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:2: field `quantm`"), "{e}");
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn a_value_of_the_wrong_type_names_file_line_and_key() {
        let e = parse("\n\nquantum = 50\n").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:3: field `quantum`"), "{e}");
    }

    #[test]
    fn a_value_error_points_at_its_line() {
        let l = parse("policy = \"gang\"\n\ncpus = \"zero\"\n").unwrap();
        let e = l.error("cpus", l.config.cpus.as_ref().unwrap(), "not a CPU list").to_string();
        assert_eq!(e, "m.toml:3: field `cpus`: not a CPU list");
    }
}
