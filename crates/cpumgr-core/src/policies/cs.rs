//! Co-scheduling (paper 002 §3.2), the time-sharing baseline Self Co-Scheduling is measured
//! against: every job runs all its processes at once in time slices, and up to `mpl` jobs share
//! each CPU — a gang scheduler whose matrix has `mpl` rows.
//!
//! Good at: a rigid job always has all its processes running together. Bad at: every job waits
//! `mpl − 1` slices out of `mpl`, and communication-light jobs gain nothing from running whole.

use super::PolicyInfo;
use crate::params::{ParamKind, ParamSpec};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "cs",
    paper: "002 §3.2",
    summary: "co-scheduling: whole jobs in time slices, at most `mpl` jobs per CPU",
    params: &[
        ParamSpec {
            key: "mpl",
            help: "jobs that time-share each CPU (rows of the matrix)",
            kind: ParamKind::Int { default: 4, min: 1, max: 64 },
        },
        ParamSpec {
            key: "fill",
            help: "give a row's idle CPUs to jobs of other rows that fit",
            kind: ParamKind::Bool { default: true },
        },
    ],
    build: |p| super::gang::build("cs", p, "mpl", None),
};

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::running;
    use crate::policies::testing::programs;

    #[test]
    fn jobs_beyond_the_mpl_wait() {
        let r = running("cs:mpl=2,fill=false", 4, &programs(&[4, 4, 4]), 4);
        let ran: Vec<Vec<&str>> = r.iter().map(|q| q.iter().map(|(n, _)| n.as_str()).collect()).collect();
        assert_eq!(ran, vec![vec!["p1"], vec!["p2"], vec!["p1"], vec!["p2"]]);
    }
}
