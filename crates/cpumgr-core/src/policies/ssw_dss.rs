//! Step Sliding Window DSS (paper 000 §4.3): like SW-DSS, but each quantum the window only drops
//! its first program and refills up to `k × P` requested CPUs, so all but one of the running
//! programs run again and find their caches warm.
//!
//! Good at: cache reuse under time sharing. Bad at: a program at the window's head leaves after one
//! quantum while the others stay for several, so CPU time is shared less evenly (see `vtq-dss`).

use super::sliding::{Sliding, Step, PARAMS};
use super::PolicyInfo;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "ssw-dss",
    paper: "000 §4.3",
    summary: "time-shared DSS: the gang window drops its first program each quantum and refills up to k·P",
    params: PARAMS,
    build: |p| Sliding::build("ssw-dss", Step::Program, p, None),
};

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::running;
    use crate::policies::testing::programs;

    #[test]
    fn the_window_steps_one_program_at_a_time() {
        let r = running("ssw-dss", 8, &programs(&[4, 4, 4, 4]), 4);
        let names = |q: usize| r[q].iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>();
        assert_eq!(names(0), vec!["p1", "p2"]);
        assert_eq!(names(1), vec!["p2", "p3"], "all but the first run again");
        assert_eq!(names(2), vec!["p3", "p4"]);
        assert_eq!(names(3), vec!["p1", "p4"], "the window wraps around");
    }
}
