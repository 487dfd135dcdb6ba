//! Policy parameters: the `name:key=value,...` syntax, each policy's table of parameters with
//! defaults and ranges, and errors that name the key and the allowed range.
//!
//! A policy declares its parameters once, as a slice of [`ParamSpec`]; the same table drives
//! parsing, validation, defaults and `cpumgr policies`, so the documentation cannot drift from
//! what the code accepts.

use std::collections::BTreeMap;

use serde::Serialize;

/// The type and range of one parameter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ParamKind {
    /// An integer in `min..=max`.
    Int {
        /// Default value.
        default: i64,
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
    /// A real number in `min..=max`.
    Float {
        /// Default value.
        default: f64,
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
    /// `true` or `false`.
    Bool {
        /// Default value.
        default: bool,
    },
    /// A duration in milliseconds (`120`, `120ms`, `0.5s`) in `min..=max` ms.
    Millis {
        /// Default value.
        default: f64,
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
}

/// One parameter a policy accepts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamSpec {
    /// The key in `name:key=value`.
    pub key: &'static str,
    /// What it controls.
    pub help: &'static str,
    /// Its type, default and range.
    #[serde(flatten)]
    pub kind: ParamKind,
}

impl ParamSpec {
    /// The allowed values, for error messages and listings.
    pub fn range(&self) -> String {
        match self.kind {
            ParamKind::Int { min, max, .. } => format!("an integer in {min}..={max}"),
            ParamKind::Float { min, max, .. } => format!("a number in {min}..={max}"),
            ParamKind::Bool { .. } => "true or false".into(),
            ParamKind::Millis { min, max, .. } => format!("a duration in {min}ms..={max}ms"),
        }
    }

    /// The default, printed.
    pub fn default_text(&self) -> String {
        match self.kind {
            ParamKind::Int { default, .. } => default.to_string(),
            ParamKind::Float { default, .. } => default.to_string(),
            ParamKind::Bool { default } => default.to_string(),
            ParamKind::Millis { default, .. } => format!("{default}ms"),
        }
    }
}

/// Why a policy specification was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// No policy has that name.
    #[error("unknown policy {name:?}; known policies: {known}")]
    UnknownPolicy {
        /// The name given.
        name: String,
        /// Every registered name, comma-separated.
        known: String,
    },
    /// The policy has no such key.
    #[error("policy {policy}: unknown parameter {key:?}; it takes {allowed}")]
    UnknownKey {
        /// The policy.
        policy: &'static str,
        /// The key given.
        key: String,
        /// The keys it takes.
        allowed: String,
    },
    /// The value does not parse or is out of range.
    #[error("policy {policy}: parameter {key}={value:?} is not {range}")]
    BadValue {
        /// The policy.
        policy: &'static str,
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        range: String,
    },
    /// An item without `=`, or a key given twice.
    #[error("policy {policy}: malformed parameter {item:?} (expected key=value, each key once)")]
    Malformed {
        /// The policy.
        policy: String,
        /// The offending item.
        item: String,
    },
    /// Parameters that make sense alone but not together.
    #[error("policy {policy}: {reason}")]
    Inconsistent {
        /// The policy.
        policy: &'static str,
        /// Why.
        reason: String,
    },
}

/// A parsed `name:key=value,...` specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySpec {
    /// The policy name.
    pub name: String,
    /// Raw key/value pairs, in key order.
    pub values: BTreeMap<String, String>,
}

impl PolicySpec {
    /// Splits `name:key=value,...`.
    pub fn parse(text: &str) -> Result<PolicySpec, ParamError> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let name = name.trim().to_string();
        let mut values = BTreeMap::new();
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let malformed = || ParamError::Malformed { policy: name.clone(), item: item.to_string() };
            let (k, v) = item.split_once('=').ok_or_else(malformed)?;
            if values.insert(k.trim().to_string(), v.trim().to_string()).is_some() {
                return Err(malformed());
            }
        }
        Ok(PolicySpec { name, values })
    }
}

/// Typed access to one policy's parameters, checked against its table.
#[derive(Debug)]
pub struct Params<'a> {
    policy: &'static str,
    specs: &'static [ParamSpec],
    values: &'a BTreeMap<String, String>,
}

impl<'a> Params<'a> {
    /// Checks that every given key is in `specs`.
    pub fn new(
        policy: &'static str,
        specs: &'static [ParamSpec],
        values: &'a BTreeMap<String, String>,
    ) -> Result<Self, ParamError> {
        if let Some(key) = values.keys().find(|k| !specs.iter().any(|s| s.key == k.as_str())) {
            let allowed = if specs.is_empty() {
                "no parameters".to_string()
            } else {
                specs.iter().map(|s| s.key).collect::<Vec<_>>().join(", ")
            };
            return Err(ParamError::UnknownKey { policy, key: key.clone(), allowed });
        }
        Ok(Params { policy, specs, values })
    }

    fn spec(&self, key: &'static str) -> &'static ParamSpec {
        self.specs
            .iter()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("{}: no parameter {key} in its table", self.policy))
    }

    fn bad(&self, spec: &ParamSpec, value: &str) -> ParamError {
        ParamError::BadValue { policy: self.policy, key: spec.key, value: value.to_string(), range: spec.range() }
    }

    /// An integer parameter.
    pub fn int(&self, key: &'static str) -> Result<i64, ParamError> {
        let spec = self.spec(key);
        let ParamKind::Int { default, min, max } = spec.kind else { panic!("{key} is not an integer parameter") };
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<i64>().ok().filter(|x| (min..=max).contains(x)).ok_or_else(|| self.bad(spec, v)),
        }
    }

    /// An integer parameter as `u32` (its range must fit).
    pub fn u32(&self, key: &'static str) -> Result<u32, ParamError> {
        self.int(key).map(|v| v as u32)
    }

    /// A real parameter.
    pub fn float(&self, key: &'static str) -> Result<f64, ParamError> {
        let spec = self.spec(key);
        let ParamKind::Float { default, min, max } = spec.kind else { panic!("{key} is not a float parameter") };
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<f64>().ok().filter(|x| (min..=max).contains(x)).ok_or_else(|| self.bad(spec, v)),
        }
    }

    /// A boolean parameter (`true`/`false`, `yes`/`no`, `1`/`0`).
    pub fn bool(&self, key: &'static str) -> Result<bool, ParamError> {
        let spec = self.spec(key);
        let ParamKind::Bool { default } = spec.kind else { panic!("{key} is not a bool parameter") };
        match self.values.get(key).map(String::as_str) {
            None => Ok(default),
            Some("true" | "yes" | "1" | "on") => Ok(true),
            Some("false" | "no" | "0" | "off") => Ok(false),
            Some(v) => Err(self.bad(spec, v)),
        }
    }

    /// A duration parameter, in nanoseconds.
    pub fn millis(&self, key: &'static str) -> Result<crate::program::Nanos, ParamError> {
        let spec = self.spec(key);
        let ParamKind::Millis { default, min, max } = spec.kind else { panic!("{key} is not a duration parameter") };
        let ms = match self.values.get(key) {
            None => default,
            Some(v) => parse_millis(v).filter(|x| (min..=max).contains(x)).ok_or_else(|| self.bad(spec, v))?,
        };
        Ok((ms * 1e6).round() as crate::program::Nanos)
    }
}

/// Parses `120`, `120ms`, `0.5s`, `500us`, `2m` (minutes) into milliseconds.
pub fn parse_millis(text: &str) -> Option<f64> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e3)
    } else {
        (t, 1.0)
    };
    num.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec { key: "k", help: "", kind: ParamKind::Int { default: 2, min: 1, max: 8 } },
        ParamSpec { key: "eff", help: "", kind: ParamKind::Float { default: 0.7, min: 0.0, max: 1.0 } },
        ParamSpec { key: "on", help: "", kind: ParamKind::Bool { default: false } },
        ParamSpec { key: "q", help: "", kind: ParamKind::Millis { default: 100.0, min: 1.0, max: 1000.0 } },
    ];

    #[test]
    fn parses_values_and_defaults() {
        let spec = PolicySpec::parse("x:k=3, eff=0.5,on=yes,q=0.12s").unwrap();
        assert_eq!(spec.name, "x");
        let p = Params::new("x", SPECS, &spec.values).unwrap();
        assert_eq!(p.int("k").unwrap(), 3);
        assert_eq!(p.float("eff").unwrap(), 0.5);
        assert!(p.bool("on").unwrap());
        assert_eq!(p.millis("q").unwrap(), 120_000_000);
        let empty = PolicySpec::parse("x").unwrap();
        let p = Params::new("x", SPECS, &empty.values).unwrap();
        assert_eq!(p.int("k").unwrap(), 2);
        assert_eq!(p.millis("q").unwrap(), 100_000_000);
    }

    #[test]
    fn errors_name_the_key_and_range() {
        let spec = PolicySpec::parse("x:kk=1").unwrap();
        let e = Params::new("x", SPECS, &spec.values).unwrap_err().to_string();
        assert!(e.contains("\"kk\"") && e.contains("k, eff, on, q"), "{e}");
        let spec = PolicySpec::parse("x:k=9").unwrap();
        let e = Params::new("x", SPECS, &spec.values).unwrap().int("k").unwrap_err().to_string();
        assert!(e.contains("k=\"9\"") && e.contains("1..=8"), "{e}");
        assert!(PolicySpec::parse("x:k").is_err());
        assert!(PolicySpec::parse("x:k=1,k=2").is_err());
        let spec = PolicySpec::parse("x:eff=NaN").unwrap();
        assert!(Params::new("x", SPECS, &spec.values).unwrap().float("eff").is_err());
    }
}
