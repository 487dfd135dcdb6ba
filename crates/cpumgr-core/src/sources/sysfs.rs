//! This machine's topology from Linux sysfs: the online CPUs, each CPU's package and core, the
//! level-3 cache each shares, and the NUMA nodes' CPU lists.
//!
//! The core crate does no I/O: the caller passes `read`, which returns the contents of a path
//! relative to the sysfs root (`devices/system/cpu/online`, ...). The binary reads from `/sys` or
//! from a root given for tests, which replay fake sysfs trees of real machines.
//!
//! Optional files degrade gracefully (no `node` directory: no NUMA level; no L3 cache: no L3
//! level; a cache without `id`: its lowest sharing CPU names it); a malformed file is an error
//! naming the file and its contents.

use std::collections::BTreeMap;
use std::io;

use crate::cpuset::CpuSet;
use crate::topology::{CpuInfo, Topology};

/// Why sysfs could not be read: the file (relative to the root) and what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    /// A required file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A file's contents are not what the kernel writes there.
    #[error("{path}: unexpected contents {contents:?}: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// What it holds.
        contents: String,
        /// What was expected.
        reason: String,
    },
    /// The CPUs do not make a topology.
    #[error("{0}")]
    Topology(#[from] crate::topology::TopologyError),
}

/// Reads files relative to the sysfs root.
pub type Reader<'a> = &'a dyn Fn(&str) -> io::Result<String>;

fn required(read: Reader, path: &str) -> Result<String, SysfsError> {
    read(path).map_err(|source| SysfsError::Read { path: path.into(), source })
}

fn optional(read: Reader, path: &str) -> Result<Option<String>, SysfsError> {
    match read(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SysfsError::Read { path: path.into(), source }),
    }
}

fn malformed(path: &str, contents: &str, reason: &str) -> SysfsError {
    SysfsError::Malformed { path: path.into(), contents: contents.trim().into(), reason: reason.into() }
}

fn number(path: &str, text: &str) -> Result<u32, SysfsError> {
    let t = text.trim();
    // Some kernels write -1 for an unknown package or die: treat it as 0.
    if t == "-1" {
        return Ok(0);
    }
    t.parse().map_err(|_| malformed(path, text, "expected a number"))
}

fn list(path: &str, text: &str) -> Result<CpuSet, SysfsError> {
    CpuSet::parse(text.trim()).map_err(|e| malformed(path, text, &e.to_string()))
}

/// The L3 cache id of `cpu`, if it has an L3.
fn l3_of(read: Reader, cpu: u32) -> Result<Option<u32>, SysfsError> {
    for index in 0..16 {
        let dir = format!("devices/system/cpu/cpu{cpu}/cache/index{index}");
        let Some(level) = optional(read, &format!("{dir}/level"))? else { break };
        if number(&format!("{dir}/level"), &level)? != 3 {
            continue;
        }
        if let Some(kind) = optional(read, &format!("{dir}/type"))? {
            if kind.trim() == "Instruction" {
                continue;
            }
        }
        if let Some(id) = optional(read, &format!("{dir}/id"))? {
            return number(&format!("{dir}/id"), &id).map(Some);
        }
        let path = format!("{dir}/shared_cpu_list");
        let shared = list(&path, &required(read, &path)?)?;
        return Ok(Some(shared.first().unwrap_or(cpu)));
    }
    Ok(None)
}

/// The most CPUs a sysfs tree may list online: the largest `NR_CPUS` any mainline Linux build
/// allows (8192, x86-64's `MAXSMP` and powerpc's maximum). The kernel cannot bring more online,
/// so a longer list is not a machine, and reading a dozen files for each of its CPUs would only
/// waste time (the synthetic source, which describes simulated machines, goes to
/// [`crate::topology::MAX_CPUS`]).
pub const MAX_ONLINE: usize = 8192;

/// Reads the topology of the online CPUs.
pub fn read(read: Reader) -> Result<Topology, SysfsError> {
    let online_path = "devices/system/cpu/online";
    let text = required(read, online_path)?;
    let online = list(online_path, &text)?;
    if online.is_empty() {
        return Err(malformed(online_path, "", "no CPU is online"));
    }
    if online.len() > MAX_ONLINE {
        let reason = format!("{} CPUs online, more than Linux's largest NR_CPUS ({MAX_ONLINE})", online.len());
        return Err(malformed(online_path, &text, &reason));
    }
    let mut numa_of: BTreeMap<u32, u32> = BTreeMap::new();
    if let Some(nodes) = optional(read, "devices/system/node/online")? {
        for node in list("devices/system/node/online", &nodes)?.iter() {
            let path = format!("devices/system/node/node{node}/cpulist");
            if let Some(cpus) = optional(read, &path)? {
                for cpu in list(&path, &cpus)?.iter() {
                    numa_of.insert(cpu, node);
                }
            }
        }
    }
    let mut infos = Vec::with_capacity(online.len());
    for cpu in online.iter() {
        let dir = format!("devices/system/cpu/cpu{cpu}/topology");
        let pkg_path = format!("{dir}/physical_package_id");
        let core_path = format!("{dir}/core_id");
        let package = optional(read, &pkg_path)?.map(|s| number(&pkg_path, &s)).transpose()?;
        let core = optional(read, &core_path)?.map(|s| number(&core_path, &s)).transpose()?;
        infos.push(CpuInfo {
            cpu,
            package,
            numa: numa_of.get(&cpu).copied(),
            l3: l3_of(read, cpu)?,
            core: core.or(Some(cpu)),
        });
    }
    Ok(Topology::from_cpus(&infos)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn fake(files: &[(String, String)]) -> impl Fn(&str) -> io::Result<String> {
        let map: HashMap<String, String> = files.iter().cloned().collect();
        move |p: &str| map.get(p).cloned().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn files(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn reads_cpus_cores_caches_and_nodes() {
        let mut f = files(&[
            ("devices/system/cpu/online", "0-3\n"),
            ("devices/system/node/online", "0\n"),
            ("devices/system/node/node0/cpulist", "0-3\n"),
        ]);
        for cpu in 0..4 {
            let d = format!("devices/system/cpu/cpu{cpu}");
            f.push((format!("{d}/topology/physical_package_id"), "0\n".into()));
            f.push((format!("{d}/topology/core_id"), format!("{}\n", cpu % 2)));
            f.push((format!("{d}/cache/index0/level"), "1\n".into()));
            f.push((format!("{d}/cache/index1/level"), "3\n".into()));
            f.push((format!("{d}/cache/index1/shared_cpu_list"), "0-3\n".into()));
        }
        let t = read(&fake(&f)).unwrap();
        assert_eq!(t.summary(), "1 package, 1 NUMA node, 1 L3, 2 cores, 4 CPUs");
        let cores: Vec<String> = t.level(crate::topology::Level::Core).map(|d| d.cpus.to_string()).collect();
        assert_eq!(cores, vec!["0,2", "1,3"]);
    }

    #[test]
    fn malformed_files_are_named() {
        let r = fake(&files(&[
            ("devices/system/cpu/online", "0-1\n"),
            ("devices/system/cpu/cpu1/topology/core_id", "one\n"),
        ]));
        let e = read(&r).unwrap_err().to_string();
        assert!(e.starts_with("devices/system/cpu/cpu1/topology/core_id: unexpected contents \"one\""), "{e}");
        let e = read(&fake(&[])).unwrap_err().to_string();
        assert!(e.starts_with("devices/system/cpu/online:"), "{e}");
        let e = read(&fake(&files(&[("devices/system/cpu/online", "zero")]))).unwrap_err().to_string();
        assert!(e.contains("\"zero\""), "{e}");
    }

    #[test]
    fn an_absurd_online_list_is_refused_before_any_cpu_is_read() {
        // Fuzzing: this one line made the reader look up 20 files for each of 2^20 CPUs and then
        // build a topology of tens of gigabytes.
        for (list, n) in [("0-1048575", "1048576"), ("0-8192", "8193")] {
            let r = |path: &str| -> std::io::Result<String> {
                assert_eq!(path, "devices/system/cpu/online", "nothing per CPU is read");
                Ok(format!("{list}\n"))
            };
            let e = read(&r).unwrap_err().to_string();
            assert!(e.starts_with("devices/system/cpu/online:") && e.contains(&format!("{n} CPUs online")), "{e}");
        }
        assert_eq!(read(&fake(&files(&[("devices/system/cpu/online", "0-8191\n")]))).unwrap().num_cpus(), 8192);
    }
}
