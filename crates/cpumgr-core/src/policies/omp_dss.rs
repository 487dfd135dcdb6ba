//! Time-shared DSS as paper 003 §5 runs it under its OpenMP runtime: DSS shares within a sliding
//! window of gangs (`sw-dss`), with a 120 ms quantum that matches the operating system's own time
//! slice. Under this policy the paper measured turnaround growing linearly with the
//! multiprogramming degree.

use super::sliding::{Sliding, Step, PARAMS};
use super::PolicyInfo;

/// The quantum paper 003 used: 120 ms.
pub const QUANTUM: crate::program::Nanos = 120 * crate::program::NANOS_PER_MS;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "omp-dss",
    paper: "003 §5",
    summary: "paper 003's time-shared DSS: sw-dss with a 120 ms quantum",
    params: PARAMS,
    build: |p| Sliding::build("omp-dss", Step::Window, p, Some(QUANTUM)),
};

#[cfg(test)]
mod tests {
    #[test]
    fn prefers_a_120_ms_quantum_and_time_shares() {
        let p = crate::policies::build_simulated("omp-dss").unwrap();
        assert_eq!(p.preferred_quantum(), Some(120_000_000));
        assert!(p.time_sharing());
    }
}
