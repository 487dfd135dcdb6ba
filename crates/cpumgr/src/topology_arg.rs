//! The `--topology SPEC` argument shared by every command that needs a machine:
//! - absent or `host`: this machine, from sysfs (`CPUMGR_SYSFS_ROOT` overrides `/sys`, for tests);
//! - a path to a directory: a sysfs root (a saved or fake tree);
//! - a path to a file ending in `.xml`: an hwloc XML topology (`lstopo --of xml`);
//! - a plain number `N`: a flat machine of N CPUs;
//! - anything else: hwloc's synthetic syntax (`package:2 numa:2 core:8 pu:2`).

use std::path::Path;

use cpumgr_core::sources::{synthetic, sysfs, xml};
use cpumgr_core::Topology;

use crate::input::{read_file, InputError};

/// Reads a sysfs tree rooted at `root`.
pub fn from_sysfs(root: &Path) -> anyhow::Result<Topology> {
    sysfs::read(&|p: &str| std::fs::read_to_string(root.join(p)))
        .map_err(|e| InputError::new(format!("{}/{e}", root.display())))
}

/// Resolves a topology spec; `None` means this machine.
pub fn load(spec: Option<&str>) -> anyhow::Result<Topology> {
    let spec = spec.map(str::trim).unwrap_or("host");
    if spec == "host" {
        let root = std::env::var_os("CPUMGR_SYSFS_ROOT").unwrap_or_else(|| "/sys".into());
        return from_sysfs(Path::new(&root));
    }
    let path = Path::new(spec);
    if path.is_dir() {
        return from_sysfs(path);
    }
    if path.is_file() && !spec.ends_with(".xml") {
        return Err(InputError::new(format!("--topology {spec}: a file must be an hwloc XML topology ending in .xml")));
    }
    if spec.ends_with(".xml") {
        let text = read_file(path)?;
        return xml::parse(spec, &text).map_err(|e| InputError::new(e.to_string()));
    }
    if let Ok(n) = spec.parse::<u32>() {
        if n == 0 || n > synthetic::MAX_SYNTHETIC_CPUS as u32 {
            return Err(InputError::new(format!(
                "--topology {n}: a flat machine needs 1 to {} CPUs",
                synthetic::MAX_SYNTHETIC_CPUS
            )));
        }
        return Ok(Topology::flat(n));
    }
    synthetic::parse(spec).map_err(|e| InputError::new(e.to_string()))
}
