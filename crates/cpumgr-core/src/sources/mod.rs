//! Where topologies come from: hwloc's synthetic syntax ([`synthetic`]), hwloc XML files
//! ([`xml`]), and Linux sysfs through a caller-supplied reader ([`sysfs`]). Each reduces to
//! per-CPU records and [`crate::topology::Topology::from_cpus`].

pub mod synthetic;
pub mod sysfs;
pub mod xml;
