//! The fuzzed entry points: one function per cargo-fuzz target, each feeding bytes to one of
//! cpumgr's readers of untrusted input and checking what it returns. A panic here is a bug.
//!
//! The same functions replay the kept corpus on stable in `crates/cpumgr/tests/fuzz_corpus.rs`
//! (which includes this file as a module), so the corpus keeps guarding the parsers in CI even
//! though fuzzing itself needs nightly. `docs/FUZZING.md` lists the targets and how to run them.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use cpumgr_core::sources::{synthetic, sysfs, xml};
use cpumgr_core::{CpuSet, Topology};
use cpumgr_proto::msg::{self, MsgError};
use cpumgr_proto::slot::{validate_request, validate_speedup, Slot};
use cpumgr_proto::{Reply, Request};
use cpumgr_sim::generate::JobKind;
use cpumgr_sim::swf::{self, SwfOptions};

/// The input as text, when it is UTF-8 (every text reader gets its file through
/// `read_to_string`, which refuses anything else before the parser sees it).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// What every parsed topology must satisfy, whatever it was read from.
fn check_topology(t: &Topology) {
    assert_eq!(t.num_cpus(), t.cpus().len());
    for p in 0..t.num_cpus() as u32 {
        assert_eq!(t.position(t.cpu_at(p)), Some(p));
    }
    // A domain's CPUs are those at its positions: as many, each (distinct) at one of them.
    for (i, d) in t.domains().iter().enumerate() {
        assert_eq!(d.cpus.len(), (d.end - d.first) as usize, "{d:?}");
        assert!(d.cpus.iter().all(|c| t.position(c).is_some_and(|p| t.domain_of(p, d.level) == i)), "{d:?}");
    }
    let _ = t.summary();
}

/// A control-socket message as the manager receives it: decoded as a [`Request`] (and, for
/// `set-policy`, the spec built into a policy as the manager does), and as a [`Reply`] as a client
/// receives one. Whatever decodes must encode and decode again.
pub fn control_msg(data: &[u8]) {
    match msg::decode::<Request>(data) {
        Ok(req) => {
            if let Request::SetPolicy { spec } = &req {
                if let Err(e) = cpumgr_core::policies::build(spec) {
                    let _ = e.to_string();
                }
            }
            match msg::encode(&req) {
                Ok(bytes) => assert!(msg::decode::<Request>(&bytes).is_ok(), "{req:?} does not decode again"),
                Err(MsgError::TooLong(_)) => {}
                Err(e) => panic!("{req:?} does not encode: {e}"),
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    if let Err(e) = msg::decode::<Reply>(data) {
        let _ = e.to_string();
    }
}

/// A slot page written by a hostile program: the first 4 bytes are the managed CPU count, the
/// rest overwrite the slot byte for byte. Everything the manager reads from it goes through the
/// validators, whose results must always be usable.
pub fn slot(data: &[u8]) {
    let Some((cpus, page)) = data.split_first_chunk::<4>() else { return };
    let cpus = u32::from_le_bytes(*cpus);
    let mut s = Slot::default();
    let n = page.len().min(std::mem::size_of::<Slot>());
    // SAFETY: `s` is a local the copy alone writes to, `n` stays inside it, and every field of a
    // `Slot` is an integer atomic, for which any bit pattern is a valid value (the slot is shared
    // with another process for exactly that reason).
    unsafe { std::ptr::copy_nonoverlapping(page.as_ptr(), std::ptr::addr_of_mut!(s).cast::<u8>(), n) };
    let _ = s.check_header().map_err(|e| e.to_string());
    let mut clamps = Vec::new();
    if let Some(raw) = s.raw_request() {
        let r = validate_request(raw, cpus, &mut clamps);
        assert!(r.max >= 1 && r.max <= cpus.max(1), "{raw:?} on {cpus} CPUs gave {r:?}");
        assert!(r.min <= r.max && r.wanted <= r.max, "{raw:?} on {cpus} CPUs gave {r:?}");
    }
    if let Some(raw) = s.raw_speedup() {
        if let Some(r) = validate_speedup(raw, cpus, &mut clamps) {
            assert!(r.cpus.get() <= cpus, "{raw:?} on {cpus} CPUs gave {r:?}");
            assert!(r.speedup.is_finite() && (0.0..=r.cpus.get() as f64).contains(&r.speedup), "{raw:?} gave {r:?}");
        }
    }
    for c in &clamps {
        let _ = c.to_string();
    }
    let _ = (s.raw_phase(), s.raw_team(), s.raw_heartbeat(), s.preempt_to(), s.lease_until());
    if let Some(a) = s.allocation() {
        assert!(a.cpus.iter().all(|c| c < cpumgr_proto::slot::MAX_CPUS));
    }
}

/// A `cpumgr launch` workload file.
pub fn launch_workload(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let expand = cpumgr_launch::Expand { cpus: 4, kernels: PathBuf::from("/k") };
    match cpumgr_launch::Workload::parse(Path::new("fuzz.toml"), text, &expand) {
        Ok(w) => {
            assert!(!w.jobs.is_empty());
            for j in &w.jobs {
                assert!(j.request >= 1 && j.at.is_finite() && j.at >= 0.0, "{j:?}");
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// A `cpumgr sim` TOML workload, checked against its machine as the simulator does, and its first
/// jobs drawn (listed and generated).
pub fn sim_workload(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match cpumgr_sim::workload::parse("fuzz.toml", text) {
        Ok(w) => {
            // A file with no machine is checked against one the command line would give.
            if w.cpus.is_none() {
                if let Err(e) = cpumgr_sim::workload::parse_on("fuzz.toml", text, Some(64)) {
                    let _ = e.to_string();
                }
            }
            for j in w.jobs().take(16) {
                let _ = j.total_work();
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// An SWF trace, read strictly as rigid jobs and leniently (bad lines skipped) as malleable ones.
pub fn swf(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let lenient = SwfOptions { kind: JobKind::Malleable, skip_bad: true, ..Default::default() };
    for opts in [SwfOptions::default(), lenient] {
        match swf::parse("fuzz.swf", text, &opts) {
            Ok(t) => {
                for j in &t.jobs {
                    assert!(j.request >= 1 && j.request <= t.cpus, "{j:?} on {} CPUs", t.cpus);
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}

/// An hwloc synthetic topology spec (`--topology synthetic:...`).
pub fn topo_synthetic(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match synthetic::parse(text) {
        Ok(t) => check_topology(&t),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// An hwloc XML topology (`--topology FILE.xml`).
pub fn topo_xml(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match xml::parse("fuzz.xml", text) {
        Ok(t) => check_topology(&t),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// A sysfs tree: one file a line, `path=contents` (paths relative to the sysfs root); a file
/// whose contents are `!` fails to read with a permission error, an absent one is not found.
pub fn topo_sysfs(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let files: HashMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let read = |path: &str| -> io::Result<String> {
        match files.get(path) {
            Some(&"!") => Err(io::Error::from(io::ErrorKind::PermissionDenied)),
            Some(contents) => Ok(format!("{contents}\n")),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    };
    match sysfs::read(&read) {
        Ok(t) => check_topology(&t),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// A CPU list (`0-3,8,10-11:2`): what parses must print and parse back to the same set.
pub fn cpu_list(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match CpuSet::parse(text) {
        Ok(set) => {
            let printed = set.to_string();
            assert_eq!(CpuSet::parse(&printed).ok(), Some(set), "{text:?} printed as {printed:?}");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
