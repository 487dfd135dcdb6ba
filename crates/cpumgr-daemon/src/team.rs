//! Never squeeze a spinning team.
//!
//! A program whose runnable threads outnumber the CPUs the policy gives it, and which has not
//! shrunk its team itself, would pay a scheduler time slice at every barrier if it were confined
//! to those CPUs (478 s against 0.99 s: docs/ARCHITECTURE.md, Rules from measurement). The
//! [`TeamGuard`] rewrites the policy's decision so that this never happens: such a *squeezed*
//! program runs as a gang on as many CPUs as it has runnable threads (up to the machine) for a
//! share of the quanta that matches the CPUs the policy meant for it, and is stopped in the other
//! quanta.
//!
//! Accounting is in CPU-quanta. Every quantum each program the policy lets run earns its count in
//! credit; a program that runs pays its width (its count, or its team width when squeezed).
//! Programs are then admitted, while CPUs remain:
//! 1. squeezed programs whose credit covers their width ("due"), most credit first;
//! 2. every other program, most credit first (ties by arrival), when its width fits.
//!
//! 3. the CPUs left over (a squeezed program that is not due left them) go to admitted programs
//!    that are not squeezed, up to what they want and the threads they have.
//!
//! Without squeezed programs every width is the policy's count, the counts fit, and the decision is
//! unchanged. Two squeezed 2-thread programs on 2 CPUs alternate quantum by quantum; a squeezed
//! program beside unsqueezed ones takes its turns when due and they fill the CPUs in between.
//! Credit is bounded so a long wait never turns into a long monopoly.

use std::collections::HashMap;

use cpumgr_core::{Decision, Program, ProgramId};

/// The bound on a program's credit, in multiples of the managed CPUs.
const CREDIT_BOUND: i64 = 2;

/// The squeeze guard; keeps each program's credit between quanta.
#[derive(Debug, Default)]
pub struct TeamGuard {
    credit: HashMap<ProgramId, i64>,
}

impl TeamGuard {
    /// A guard with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rewrites `decision` for `programs` on `cpus` CPUs. `teams[i]` is program `i`'s runnable
    /// team (threads it needs at once), `None` when unknown (it is then trusted to fit). Returns,
    /// per program, whether it was squeezed (and so runs as a gang or waits).
    pub fn apply(
        &mut self,
        programs: &[Program],
        teams: &[Option<u32>],
        cpus: u32,
        decision: &mut Decision,
    ) -> Vec<bool> {
        let n = programs.len();
        let entitled: Vec<u32> = decision.allocations.iter().map(|a| a.granted()).collect();
        let squeezed: Vec<bool> =
            (0..n).map(|i| entitled[i] > 0 && teams[i].is_some_and(|t| t > entitled[i])).collect();
        self.credit.retain(|id, _| programs.iter().any(|p| p.id == *id));
        if !squeezed.iter().any(|&s| s) {
            self.credit.clear();
            return squeezed;
        }
        let mut width: Vec<u32> =
            (0..n).map(|i| if squeezed[i] { teams[i].unwrap_or(0).min(cpus) } else { entitled[i] }).collect();
        let bound = CREDIT_BOUND * cpus as i64;
        for (i, p) in programs.iter().enumerate() {
            let c = self.credit.entry(p.id).or_insert(0);
            *c = (*c + entitled[i] as i64).clamp(-bound, bound);
        }
        let credit = |i: usize| self.credit[&programs[i].id];
        let mut order: Vec<usize> = (0..n).filter(|&i| entitled[i] > 0).collect();
        let due = |i: usize| squeezed[i] && credit(i) >= width[i] as i64;
        order.sort_by(|&a, &b| due(b).cmp(&due(a)).then(credit(b).cmp(&credit(a))).then(a.cmp(&b)));
        let mut free = cpus;
        let mut admitted = vec![false; n];
        for &i in &order {
            if width[i] <= free {
                free -= width[i];
                admitted[i] = true;
            }
        }
        // CPUs a waiting gang leaves are not left idle: admitted programs that are not squeezed
        // take them, most credit first, up to what they want and the threads they have (a
        // folding team's are unknown: it runs on any count).
        for &i in order.iter().filter(|&&i| admitted[i] && !squeezed[i]) {
            let room = programs[i].wants().min(teams[i].unwrap_or(u32::MAX)).saturating_sub(width[i]);
            let extra = room.min(free);
            width[i] += extra;
            free -= extra;
        }
        for i in 0..n {
            if admitted[i] {
                *self.credit.get_mut(&programs[i].id).unwrap() -= width[i] as i64;
                decision.give(i, width[i]);
            } else {
                decision.give(i, 0);
            }
        }
        squeezed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progs(n: usize) -> Vec<Program> {
        (0..n).map(|i| Program::new(i as u64 + 1, format!("p{}", i + 1), 2)).collect()
    }

    fn decision(counts: &[u32]) -> Decision {
        let mut d = Decision::default();
        d.reset(counts.len());
        for (i, &c) in counts.iter().enumerate() {
            d.give(i, c);
        }
        d
    }

    fn run(guard: &mut TeamGuard, p: &[Program], teams: &[Option<u32>], counts: &[u32], cpus: u32) -> Vec<u32> {
        let mut d = decision(counts);
        guard.apply(p, teams, cpus, &mut d);
        assert!(d.total() <= cpus as u64);
        d.allocations.iter().map(|a| a.granted()).collect()
    }

    #[test]
    fn fitting_teams_leave_the_decision_alone() {
        let p = progs(2);
        let mut g = TeamGuard::new();
        assert_eq!(run(&mut g, &p, &[Some(1), Some(1)], &[1, 1], 2), vec![1, 1]);
        assert_eq!(run(&mut g, &p, &[None, None], &[1, 1], 2), vec![1, 1]);
    }

    #[test]
    fn two_squeezed_pairs_alternate_as_gangs() {
        let p = progs(2);
        let mut g = TeamGuard::new();
        let seq: Vec<Vec<u32>> = (0..6).map(|_| run(&mut g, &p, &[Some(2), Some(2)], &[1, 1], 2)).collect();
        for (q, s) in seq.iter().enumerate() {
            assert!(s == &vec![2, 0] || s == &vec![0, 2], "quantum {q}: {s:?} squeezes a team");
            if q > 0 {
                assert_ne!(s, &seq[q - 1], "they alternate");
            }
        }
    }

    #[test]
    fn a_squeezed_team_beside_a_single_thread_gets_its_share_and_never_less_than_its_team() {
        let p = progs(2);
        let mut g = TeamGuard::new();
        let mut gang_quanta = 0;
        let mut single_quanta = 0;
        for _ in 0..40 {
            let s = run(&mut g, &p, &[Some(2), Some(1)], &[1, 1], 2);
            assert!(s[0] == 0 || s[0] == 2, "{s:?}");
            gang_quanta += (s[0] == 2) as u32;
            single_quanta += (s[1] == 1) as u32;
        }
        assert_eq!(gang_quanta, 20, "the team gets its 1-CPU share as 2 CPUs half the time");
        assert_eq!(single_quanta, 20);
    }

    #[test]
    fn a_folding_team_takes_the_cpu_a_waiting_gang_leaves() {
        // Program 0 is squeezed (a rigid team of 2 on its 1-CPU share); program 1 folds (its team
        // is not counted): in the quanta the gang waits, the folding one has both CPUs.
        let p = progs(2);
        let mut g = TeamGuard::new();
        let seq: Vec<Vec<u32>> = (0..20).map(|_| run(&mut g, &p, &[Some(2), None], &[1, 1], 2)).collect();
        assert!(seq.iter().all(|s| s == &vec![2, 0] || s == &vec![0, 2]), "{seq:?}");
        assert_eq!(seq.iter().filter(|s| s[0] == 2).count(), 10, "{seq:?}");
    }

    #[test]
    fn programs_the_policy_stops_stay_stopped() {
        let p = progs(3);
        let mut g = TeamGuard::new();
        let mut d = decision(&[1, 1, 0]);
        g.apply(&p, &[Some(4), Some(1), Some(4)], 2, &mut d);
        assert!(!d.allocations[2].running);
    }
}
