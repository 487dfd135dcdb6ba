//! Dynamic Space Sharing (paper 000 §4.3): every program gets CPUs in proportion to its request
//! and in inverse proportion to the total load (the sum of all requests): `request × P / Σ
//! requests` when the machine is oversubscribed, its whole request otherwise.
//!
//! Good at: using every CPU while keeping big and small programs in proportion. Bad at: programs
//! that ask for many CPUs but use them badly (see `pdpa`), and at many programs on few CPUs, where
//! shares round down to nothing and the time-shared variants (`sw-dss`, `ssw-dss`, `vtq-dss`) help.

use super::PolicyInfo;
use crate::policy::{proportional_shares, Decision, Policy, SimHints, View};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "dss",
    paper: "000 §4.3",
    summary: "space sharing in proportion to each request over the total load (request × P / Σ requests)",
    params: &[],
    build: |_| Ok(Box::new(Dss)),
};

/// The DSS policy.
#[derive(Debug, Clone, Default)]
pub struct Dss;

impl Policy for Dss {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let all: Vec<usize> = (0..view.programs.len()).collect();
        dss_shares(view, &all, view.cpus, out);
    }
}

impl SimHints for Dss {}

/// Gives `members` (indices into the view) DSS shares of `cpus`: rigid members first, whole or
/// not at all ([`super::reserve_rigid`]'s rule, within the members), then the others in
/// proportion to their requests. Members that get nothing do not run. The building block of
/// every DSS variant.
pub fn dss_shares(view: &View, members: &[usize], cpus: u32, out: &mut Decision) {
    let mut left = cpus;
    let mut open = Vec::with_capacity(members.len());
    for &i in members {
        match view.programs[i].kind.rigid_procs() {
            Some(n) => {
                let need = n.min(cpus);
                if need <= left {
                    out.give(i, need);
                    left -= need;
                }
            }
            None => open.push(i),
        }
    }
    let wants: Vec<u32> = open.iter().map(|&i| view.programs[i].wants()).collect();
    let weights: Vec<f64> = wants.iter().map(|&w| w as f64).collect();
    let mut shares = Vec::new();
    proportional_shares(left, &weights, &wants, &mut shares);
    for (&i, &s) in open.iter().zip(&shares) {
        out.give(i, s);
    }
}

#[cfg(test)]
mod tests {
    use crate::policies::testing::{decide_once, programs};

    #[test]
    fn shares_are_request_times_p_over_total_requests() {
        // 16 CPUs, requests 16 and 8 and 8 (total 32): shares 16×16/32 = 8, 8×16/32 = 4, 4.
        assert_eq!(decide_once("dss", 16, &programs(&[16, 8, 8])), vec![8, 4, 4]);
        // Not oversubscribed: everyone gets its request.
        assert_eq!(decide_once("dss", 16, &programs(&[4, 2])), vec![4, 2]);
        // 64 CPUs, the paper's DSS workload shape: requests 32 and 16 ×3 (total 80).
        assert_eq!(decide_once("dss", 64, &programs(&[32, 16, 16, 16])), vec![25, 13, 13, 13]);
    }
}
