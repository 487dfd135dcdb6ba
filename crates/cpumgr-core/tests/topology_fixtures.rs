//! The topology readers against fixtures of real machine shapes: fake sysfs trees (a 2-socket SMT
//! server, a single-CCX desktop, an EPYC-like node with 4 L3 domains and 2 NUMA nodes, and the
//! development VM) and an hwloc XML file, each compared with its golden tree. Set
//! `CPUMGR_BLESS=1` to rewrite the goldens after a deliberate change, and review the diff.

use std::path::{Path, PathBuf};

use cpumgr_core::sources::{sysfs, xml};
use cpumgr_core::Topology;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn check_golden(name: &str, t: &Topology) {
    let golden = fixtures().join(format!("{name}.golden"));
    let text = t.to_string();
    if std::env::var_os("CPUMGR_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
    assert_eq!(text, want, "{name} differs from {}", golden.display());
}

fn read_tree(name: &str) -> Topology {
    let root = fixtures().join("sysfs").join(name);
    sysfs::read(&|p: &str| std::fs::read_to_string(root.join(p))).unwrap()
}

#[test]
fn server_with_two_sockets_and_smt() {
    let t = read_tree("server-2s");
    assert_eq!(t.summary(), "2 packages, 2 NUMA nodes, 2 L3, 16 cores, 32 CPUs");
    assert_eq!(t.smt(), 2);
    check_golden("server-2s", &t);
}

#[test]
fn desktop_with_one_ccx() {
    let t = read_tree("desktop-1ccx");
    assert_eq!(t.summary(), "1 package, 1 NUMA node, 1 L3, 8 cores, 16 CPUs");
    check_golden("desktop-1ccx", &t);
}

#[test]
fn epyc_node_with_four_ccx_and_two_numa_nodes() {
    let t = read_tree("epyc-4ccx");
    assert_eq!(t.summary(), "1 package, 2 NUMA nodes, 4 L3, 16 cores, 32 CPUs");
    check_golden("epyc-4ccx", &t);
}

#[test]
fn the_development_vm() {
    let t = read_tree("vm-2cpu");
    assert_eq!(t.num_cpus(), 2);
    check_golden("vm-2cpu", &t);
}

#[test]
fn an_hwloc_xml_file() {
    let path = fixtures().join("two-packages.xml");
    let t = xml::parse(&path.display().to_string(), &std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(t.summary(), "2 packages, 2 NUMA nodes, 2 L3, 4 cores, 8 CPUs");
    check_golden("two-packages.xml", &t);
}
