//! The `--topology SPEC` argument shared by every command that needs a machine.

use cpumgr_core::Topology;

/// Resolves a topology spec; `None` means this machine.
pub fn load(spec: Option<&str>) -> anyhow::Result<Topology> {
    let n = match spec {
        None => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        Some(s) => s.parse::<u32>().map_err(|_| crate::input::InputError::new(format!("bad topology {s:?}")))?,
    };
    Ok(Topology::flat(n))
}
