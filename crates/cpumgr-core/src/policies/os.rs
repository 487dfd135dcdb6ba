//! The plain-OS baseline: no manager. Every program runs as many threads as it wants on every CPU
//! and the kernel time-shares them, oversubscribed ([`Policy::oversubscribes`]). Callers do not
//! place or enforce this policy's decisions: the counts are thread counts, not CPU shares. The
//! simulator charges it the cost of oversubscription; the live manager leaves programs alone.
//!
//! Good at: nothing to set up, and a single program alone. Bad at: everything the papers study —
//! spinning barriers and descheduled lock holders when programs share the machine.

use super::PolicyInfo;
use crate::policy::{Decision, Policy, SimHints, View};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "os",
    paper: "baseline",
    summary: "no manager: every program runs all the threads it wants, the kernel time-shares them",
    params: &[],
    build: |_| Ok(Box::new(Os)),
};

/// The unmanaged baseline.
#[derive(Debug, Clone, Default)]
pub struct Os;

impl Policy for Os {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        for (i, p) in view.programs.iter().enumerate() {
            out.give(i, p.threads.unwrap_or(p.wants()).max(1));
        }
    }

    fn oversubscribes(&self) -> bool {
        true
    }
}

impl SimHints for Os {}

#[cfg(test)]
mod tests {
    use crate::policies::testing::{decide_once, programs};

    #[test]
    fn everyone_gets_what_it_asks() {
        assert_eq!(decide_once("os", 2, &programs(&[2, 2, 8])), vec![2, 2, 8]);
        assert!(crate::policies::build("os").unwrap().oversubscribes());
    }
}
