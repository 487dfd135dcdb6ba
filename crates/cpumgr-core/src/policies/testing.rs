//! Helpers for the unit tests of policies: program lists and one-shot decisions.

use crate::policies;
use crate::policy::{Decision, View};
use crate::program::Program;
use crate::topology::Topology;

/// Malleable programs `p1, p2, ...` wanting the given CPU counts, in arrival order.
pub fn programs(requests: &[u32]) -> Vec<Program> {
    requests.iter().enumerate().map(|(i, &r)| Program::new(i as u64 + 1, format!("p{}", i + 1), r)).collect()
}

/// Runs one quantum of the policy `spec` on a flat machine of `cpus` CPUs and returns each
/// program's count (0 for programs that do not run).
pub fn decide_once(spec: &str, cpus: u32, progs: &[Program]) -> Vec<u32> {
    let topology = Topology::flat(cpus);
    let mut policy = policies::build(spec).unwrap();
    let view = View { now: 0, quantum: 100_000_000, topology: &topology, cpus, programs: progs };
    for p in progs {
        policy.on_arrival(&view, p.id);
    }
    let mut d = Decision::default();
    d.reset(progs.len());
    policy.decide(&view, &mut d);
    d.allocations.iter().map(|a| a.granted()).collect()
}
