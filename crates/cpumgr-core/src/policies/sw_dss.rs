//! Sliding Window DSS (paper 000 §4.3): programs are grouped, in arrival order, into gangs whose
//! requests add up to at most `k × P`; each quantum one gang runs with DSS shares of the whole
//! machine, and the next quantum the window jumps to the gang after it.
//!
//! Good at: giving every program the machine in turn when requests far exceed it, with large
//! shares while it runs. Bad at: cache reuse (consecutive gangs share nobody; see `ssw-dss`), and
//! it needs the enforcer to stop the programs outside the window.

use super::sliding::{Sliding, Step, PARAMS};
use super::PolicyInfo;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "sw-dss",
    paper: "000 §4.3",
    summary: "time-shared DSS: gangs of requests ≤ k·P run in turn, the window jumps gang by gang",
    params: PARAMS,
    build: |p| Sliding::build("sw-dss", Step::Window, p, None),
};

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::{runners, running};
    use crate::policies::testing::programs;

    #[test]
    fn the_window_jumps_from_gang_to_gang() {
        // 8 CPUs, k = 1: requests 4, 4, 8, 2 make gangs {1,2}, {3}, {4,1}, ...
        let r = running("sw-dss", 8, &programs(&[4, 4, 8, 2]), 4);
        let names = |q: usize| r[q].iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>();
        assert_eq!(names(0), vec!["p1", "p2"]);
        assert_eq!(names(1), vec!["p3"]);
        assert_eq!(names(2), vec!["p1", "p4"]);
        assert_eq!(r[1], vec![("p3".to_string(), 8)]);
        assert_eq!(r[2], vec![("p1".to_string(), 4), ("p4".to_string(), 2)]);
    }

    /// A refit after a member left fills its place from the programs after the window, and the
    /// next window still starts where the boundary put it: those programs keep their quantum.
    #[test]
    fn a_refit_leaves_the_next_window_where_it_was() {
        // 2 CPUs, one each: windows {1, 2}, {3, 4}.
        let all = programs(&[1, 1, 1, 1]);
        let mut p = crate::policies::build("sw-dss").unwrap();
        let mut step = |progs: &[crate::program::Program], boundary: bool| runners(p.as_mut(), 2, progs, boundary);
        assert_eq!(step(&all, true), ["p1", "p2"]);
        let rest = &all[1..];
        assert_eq!(step(rest, false), ["p2", "p3"], "p1 left: p3 fills its place for the rest of the quantum");
        assert_eq!(step(rest, true), ["p3", "p4"], "and has its own quantum next");
    }
}
