//! hwloc's synthetic topology syntax: `package:2 numa:2 l3:2 core:8 pu:2`, one `level:count` per
//! token, from the root down. Names are case-insensitive and take hwloc's spellings (`pack`,
//! `NUMANode`, `L3Cache`, `PU`, ...); levels a spec leaves out are implicit; `pu` defaults to one per
//! core. CPUs are numbered in tree order, as hwloc numbers the PUs of a synthetic topology.

use crate::topology::{CpuInfo, Level, Topology, TopologyError, MAX_CPUS};

/// The most CPUs a synthetic machine may have: a topology's [`MAX_CPUS`] (the simulator's
/// largest models are 100 000). Checked per token, so `pu:777777` is refused before anything is
/// built (building it would take gigabytes: docs/FUZZING.md).
pub const MAX_SYNTHETIC_CPUS: u64 = MAX_CPUS as u64;

/// Why a synthetic spec was refused: the 1-based token and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("synthetic topology {spec:?}, token {token} ({text:?}): {reason}")]
pub struct SyntheticError {
    /// The whole spec.
    pub spec: String,
    /// 1-based index of the token.
    pub token: usize,
    /// The token.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

fn level_named(name: &str) -> Option<Level> {
    Some(match name.to_ascii_lowercase().as_str() {
        "package" | "pack" | "socket" => Level::Package,
        "numa" | "numanode" | "node" => Level::Numa,
        "l3" | "l3cache" => Level::L3,
        "core" => Level::Core,
        "pu" | "cpu" => Level::Cpu,
        _ => return None,
    })
}

/// Parses a synthetic spec into a topology.
pub fn parse(spec: &str) -> Result<Topology, SyntheticError> {
    let mut counts = [1u64; 6];
    let mut last: Option<Level> = None;
    let tokens: Vec<&str> = spec.split_whitespace().collect();
    let fail = |token: usize, text: &str, reason: String| SyntheticError {
        spec: spec.into(),
        token,
        text: text.into(),
        reason,
    };
    if tokens.is_empty() {
        return Err(fail(0, "", "empty spec (expected e.g. \"package:2 core:8 pu:2\")".into()));
    }
    let mut given = [false; 6];
    for (k, tok) in tokens.iter().enumerate() {
        let (name, count) = tok.split_once(':').ok_or_else(|| fail(k + 1, tok, "expected level:count".into()))?;
        let level = level_named(name)
            .ok_or_else(|| fail(k + 1, tok, format!("unknown level {name:?} (package, numa, l3, core, pu)")))?;
        let n: u64 = count.parse().map_err(|_| fail(k + 1, tok, format!("{count:?} is not a count")))?;
        if n == 0 {
            return Err(fail(k + 1, tok, "a count must be at least 1".into()));
        }
        if last.is_some_and(|l| l >= level) {
            return Err(fail(
                k + 1,
                tok,
                format!("{name} must come before the levels under it (package numa l3 core pu)"),
            ));
        }
        last = Some(level);
        counts[level.depth()] = n;
        given[level.depth()] = true;
        let total: u128 = counts.iter().map(|&c| c as u128).product();
        if total > MAX_SYNTHETIC_CPUS as u128 {
            return Err(fail(k + 1, tok, format!("more than {MAX_SYNTHETIC_CPUS} CPUs")));
        }
    }
    let [_, pk, nu, l3, co, pu] = counts;
    let mut infos = Vec::new();
    let mut cpu = 0u32;
    for p in 0..pk {
        for n in 0..nu {
            for l in 0..l3 {
                for c in 0..co {
                    for _ in 0..pu {
                        let numa = p * nu + n;
                        let cache = numa * l3 + l;
                        infos.push(CpuInfo {
                            cpu,
                            package: given[1].then_some(p as u32),
                            numa: given[2].then_some(numa as u32),
                            l3: given[3].then_some(cache as u32),
                            // Cores are numbered within their package, like Linux's core_id.
                            core: given[4].then_some(((n * l3 + l) * co + c) as u32),
                        });
                        cpu += 1;
                    }
                }
            }
        }
    }
    // A spec without `core` has no SMT to speak of: each PU is its own core, so the placer never
    // treats unrelated PUs as siblings.
    if !given[4] {
        for (k, info) in infos.iter_mut().enumerate() {
            info.core = Some(k as u32);
        }
    }
    Topology::from_cpus(&infos).map_err(|e: TopologyError| fail(0, spec, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_tree_of_a_spec() {
        let t = parse("package:2 numa:2 core:8 pu:2").unwrap();
        assert_eq!(t.num_cpus(), 64);
        assert_eq!(t.count(Level::Package), 2);
        assert_eq!(t.count(Level::Numa), 4);
        assert_eq!(t.count(Level::L3), 0, "not described");
        assert_eq!(t.count(Level::Core), 32);
        assert_eq!(t.smt(), 2);
        let first_numa = t.level(Level::Numa).next().unwrap();
        assert_eq!(first_numa.cpus.to_string(), "0-15");
        assert_eq!(t.summary(), "2 packages, 4 NUMA nodes, 32 cores, 64 CPUs");
    }

    #[test]
    fn accepts_hwloc_spellings_and_defaults() {
        let t = parse("Pack:1 NUMANode:1 L3Cache:2 Core:4").unwrap();
        assert_eq!(t.num_cpus(), 8);
        assert_eq!(t.count(Level::L3), 2);
        assert_eq!(parse("pu:6").unwrap().num_cpus(), 6);
    }

    #[test]
    fn errors_name_the_token() {
        let e = parse("package:2 cores:4").unwrap_err();
        assert_eq!(e.token, 2);
        assert!(e.reason.contains("unknown level"), "{e}");
        assert_eq!(parse("core:4 package:2").unwrap_err().token, 2);
        assert_eq!(parse("package:0").unwrap_err().token, 1);
        assert_eq!(parse("package:x").unwrap_err().token, 1);
        assert_eq!(parse("package").unwrap_err().token, 1);
        assert!(parse("package:1024 core:1024 pu:1024").unwrap_err().reason.contains("more than"));
        assert!(parse("pu:777777").unwrap_err().reason.contains("more than"), "fuzzing: 24 GB for this spec");
        assert!(parse("  ").is_err());
    }
}
