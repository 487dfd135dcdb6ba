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
