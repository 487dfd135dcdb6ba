//! Variable Time Quantum DSS (paper 000 §4.3): gangs of programs whose requests add up to at most
//! `k × P` run in turn with DSS shares, but each member runs for its own quantum, inversely
//! proportional to its CPUs, so that every member of a gang receives the same CPU time
//! (`quantum × fewest CPUs in the gang / its CPUs`). When a member's quantum expires (or it ends),
//! its CPUs go to programs from the repository queue — the programs outside the gang, in the order
//! they would run next — until the gang's quantum is over.
//!
//! The policy asks to be called at each member's expiry through [`Decision::wake_at`]; the live
//! manager and the simulator honour it with a [`Policy::refit`]. A gang starts at a boundary
//! ([`Policy::decide`]) only: one started between boundaries would end between them too.
//!
//! Good at: equal CPU time for programs of different widths under time sharing. Bad at: it stops
//! wide programs often (more stop/continue, more cache reloads), and a program's progress per
//! CPU-second still depends on how well it scales.

use super::dss::dss_shares;
use super::sliding::{limit, Step, PARAMS};
use super::window::{next_id, window, RotationMemo};
use super::PolicyInfo;
use crate::policy::{Decision, Policy, Rotation, SimHints, View};
use crate::program::{Nanos, ProgramId};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "vtq-dss",
    paper: "000 §4.3",
    summary: "time-shared DSS with a per-program quantum that equalises CPU time in each gang, repository queue",
    params: PARAMS,
    build: |p| Ok(Box::new(VtqDss { k: p.float("k")?, admit: super::admission(p.u32("admit")?), ..VtqDss::default() })),
};

/// The VTQ-DSS policy.
#[derive(Debug, Clone, Default)]
pub struct VtqDss {
    k: f64,
    /// The admission limit it advises ([`SimHints::preferred_mpl`]).
    admit: Option<u32>,
    /// Members of the current gang: CPUs and the end of their quantum. A gang is a handful of
    /// programs, formed every quantum: a vector reused from gang to gang costs no allocation (a
    /// map allocated nodes for every gang).
    gang: Vec<Member>,
    gang_end: Nanos,
    next: ProgramId,
    memo: RotationMemo,
    /// Scratch: per program of the view, whether it is a member of the gang.
    in_gang: Vec<bool>,
}

/// A member of the current gang.
#[derive(Debug, Clone, Copy)]
struct Member {
    id: ProgramId,
    /// CPUs it gets.
    cpus: u32,
    /// When its quantum expires.
    until: Nanos,
}

impl VtqDss {
    fn new_gang(&mut self, view: &View, out: &mut Decision) {
        self.gang.clear();
        let members = window(view, self.next, limit(self.k, view));
        let Some(&last) = members.last() else { return };
        self.next = next_id(view, last);
        dss_shares(view, &members, view.cpus, out);
        let fewest = members.iter().map(|&i| out.allocations[i].count).filter(|&c| c > 0).min().unwrap_or(1);
        for &i in &members {
            let c = out.allocations[i].count;
            if c > 0 {
                let q = (view.quantum as u128 * fewest as u128 / c as u128).max(1) as Nanos;
                self.gang.push(Member { id: view.programs[i].id, cpus: c, until: view.now + q });
            }
        }
        self.gang_end = view.now + view.quantum;
        out.reset(view.programs.len());
    }
}

impl Policy for VtqDss {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn on_exit(&mut self, id: ProgramId) {
        self.gang.retain(|m| m.id != id);
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        self.new_gang(view, out);
        self.refit(view, out);
    }

    /// Within the quantum: the members whose own quantum has not expired run, and the
    /// repository fills the rest; no gang starts (a gang started between boundaries would end
    /// between them too).
    fn refit(&mut self, view: &View, out: &mut Decision) {
        self.gang.retain(|m| view.index_of(m.id).is_some());
        let mut free = view.cpus;
        let mut wake = self.gang_end;
        let n = view.programs.len();
        self.in_gang.clear();
        self.in_gang.resize(n, false);
        for m in &self.gang {
            // Every member is listed (those that left were dropped above).
            let i = view.index_of(m.id).expect("a member is in the view");
            self.in_gang[i] = true;
            if m.until > view.now {
                out.give(i, m.cpus);
                free -= m.cpus;
                wake = wake.min(m.until);
            }
        }
        // The repository queue: programs outside the gang, from the next window on, fill the
        // CPUs that expired members left until the gang's quantum ends.
        let first = view.programs.partition_point(|p| p.id < self.next);
        for i in (first..n).chain(0..first) {
            let p = &view.programs[i];
            if free == 0 {
                break;
            }
            if self.in_gang[i] {
                continue;
            }
            let c = match p.kind.rigid_procs() {
                Some(procs) if procs.min(view.cpus) > free => continue,
                Some(procs) => procs.min(view.cpus),
                None => p.wants().min(free),
            };
            out.give(i, c);
            free -= c;
        }
        out.wake_at = (wake < self.gang_end).then_some(wake);
    }

    fn time_sharing(&self) -> bool {
        true
    }
}

impl SimHints for VtqDss {
    fn preferred_mpl(&self) -> Option<u32> {
        self.admit
    }

    fn rotation(&self, view: &View, max: u32) -> Option<Rotation> {
        // A gang a quantum, each the window after the last, as in SW-DSS; the expiries follow
        // from the gang, and the repository's fills from every program outside it.
        let mut r = self.memo.rotation(view, self.next, limit(self.k, view), Step::Window.advance(), max)?;
        for p in view.programs {
            r.mix(p.id.0);
        }
        Some(r)
    }

    fn skip(&mut self, by: Nanos) {
        self.gang_end = self.gang_end.saturating_add(by);
        for m in &mut self.gang {
            m.until = m.until.saturating_add(by);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::testing::programs;
    use crate::topology::Topology;

    /// Runs the policy on its own schedule (quantum boundaries and wake-ups) until `end`, adding up
    /// each program's CPU time.
    fn cpu_time(spec: &str, cpus: u32, requests: &[u32], quantum: Nanos, end: Nanos) -> Vec<Nanos> {
        let t = Topology::flat(cpus);
        let progs = programs(requests);
        let mut policy = crate::policies::build(spec).unwrap();
        let mut d = Decision::default();
        let mut used = vec![0; progs.len()];
        let mut now = 0;
        while now < end {
            let view = View { now, quantum, topology: &t, cpus, programs: &progs };
            d.reset(progs.len());
            policy.decide_at(now.is_multiple_of(quantum), &view, &mut d);
            assert!(d.total() <= cpus as u64);
            let next_boundary = (now / quantum + 1) * quantum;
            let until = d.wake_at.map_or(next_boundary, |w| w.min(next_boundary));
            for (u, a) in used.iter_mut().zip(&d.allocations) {
                if a.running {
                    *u += a.count as Nanos * (until - now);
                }
            }
            now = until;
        }
        used
    }

    #[test]
    fn members_of_a_gang_get_equal_cpu_time() {
        // 8 CPUs, k = 2: requests 8 and 2 form one gang; DSS gives 6 and 2 CPUs; the wide one
        // runs a third of the quantum, the narrow one all of it: 2 CPU-quanta each.
        let used = cpu_time("vtq-dss:k=2", 8, &[8, 2], 90, 900);
        assert_eq!(used[0], used[1], "{used:?}");
        assert_eq!(used[0], 10 * 2 * 90);
    }

    #[test]
    fn a_skip_moves_the_gang_with_the_clock() {
        // Deciding at a member's expiry after skipping `by` gives what deciding at the expiry
        // gives without the skip: the gang's absolute times moved with the clock.
        let t = Topology::flat(4);
        let progs = programs(&[4, 1, 1]);
        let decide_at = |p: &mut Box<dyn crate::SimHints>, now: Nanos| {
            let mut d = Decision::default();
            d.reset(3);
            let view = View { now, quantum: 100, topology: &t, cpus: 4, programs: &progs };
            p.decide_at(now.is_multiple_of(100), &view, &mut d);
            d
        };
        let mut plain = crate::policies::build_simulated("vtq-dss:k=1.25").unwrap();
        let mut skipped = crate::policies::build_simulated("vtq-dss:k=1.25").unwrap();
        let first = decide_at(&mut plain, 0);
        assert_eq!(decide_at(&mut skipped, 0), first);
        let wake = first.wake_at.expect("p1 expires before the gang ends");
        let by = 1000 * 100;
        skipped.skip(by);
        let (a, b) = (decide_at(&mut plain, wake), decide_at(&mut skipped, wake + by));
        assert_eq!(b.allocations, a.allocations, "the same decision at the same point of the rotation");
        assert_eq!(b.wake_at, a.wake_at.map(|w| w + by));
    }

    #[test]
    fn the_repository_queue_fills_expired_members_cpus() {
        // 4 CPUs, k = 1: gangs {p1 (4)} and {p2 (2), p3 (2)}: inside each gang the quanta are
        // equal, and nobody waits for more than one gang.
        let used = cpu_time("vtq-dss", 4, &[4, 2, 2], 100, 1000);
        assert!(used.iter().all(|&u| u > 0), "{used:?}");
        let t = Topology::flat(4);
        let progs = programs(&[4, 1, 1]);
        let mut p = crate::policies::build("vtq-dss:k=1.25").unwrap();
        let mut d = Decision::default();
        d.reset(3);
        // Gang {p1, p2} (requests 4 + 1 ≤ 1.25 × 4): DSS gives 3 and 1; p1's quantum is a third
        // of p2's, and when it expires p3 comes from the repository queue.
        p.decide(&View { now: 0, quantum: 100, topology: &t, cpus: 4, programs: &progs }, &mut d);
        let wake = d.wake_at.expect("p1 expires before the gang ends");
        d.reset(3);
        p.refit(&View { now: wake, quantum: 100, topology: &t, cpus: 4, programs: &progs }, &mut d);
        assert!(!d.allocations[0].running && d.allocations[1].running && d.allocations[2].running, "{d:?}");
    }
}
