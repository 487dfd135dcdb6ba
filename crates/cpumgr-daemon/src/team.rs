//! Never squeeze a spinning team; gang a folding one when folding costs more than a gang.
//!
//! A program whose runnable threads outnumber the CPUs the policy gives it, and which has not
//! shrunk its team itself, would pay a scheduler time slice at every barrier if it were confined
//! to those CPUs (478 s against 0.99 s: docs/ARCHITECTURE.md, Rules from measurement). The
//! [`TeamGuard`] rewrites the policy's decision so that this never happens: such a *squeezed*
//! program runs as a gang on as many CPUs as it has runnable threads (up to the machine) for a
//! share of the quanta that matches the CPUs the policy meant for it, and is stopped in the other
//! quanta.
//!
//! A team that folds (its threads hand their CPU over at barriers: [`Team::Folds`]) runs on any
//! count, but its threads may take more CPU time per barrier folded than whole; the OpenMP
//! adapter measures how much. Folded, it makes `1/cost` of the progress its CPUs would make
//! with the team whole; ganged, it makes all of it, but in its turns the CPUs beside it go to the
//! others only as far as they can use them. So the guard gangs it when what it gains outweighs
//! what the others lose, by [`GANG_MARGIN`] of its share (`worth_a_gang`): two fine-grained
//! teams alternate whole; a fine-grained team beside a single-threaded program folds unless
//! folding costs it more than 2.5 times.
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

/// What a gang must gain over folding, as a fraction of the team's share, before a folding team
/// is ganged: the gang's turns cost a few percent (each turn restarts the team on cold caches),
/// and a measured cost is noisy by as much. Two teams that fold at 1.1 times their cost whole
/// stay folded.
pub const GANG_MARGIN: f64 = 0.1;

/// What the guard knows of a program's team.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Team {
    /// Not known: trusted to fit whatever it is given.
    Unknown,
    /// This many threads that must run at once (a rigid team, or the runnable threads `/proc`
    /// showed).
    Whole(u32),
    /// A team that folds onto any count.
    Folds {
        /// Its threads.
        threads: u32,
        /// How many times the CPU time per barrier they take whole they take folded (`None`:
        /// not measured).
        cost: Option<f64>,
    },
}

impl Team {
    /// The threads it can use at once; `None` when unknown.
    fn threads(self) -> Option<u32> {
        match self {
            Team::Unknown => None,
            Team::Whole(t) | Team::Folds { threads: t, .. } => Some(t),
        }
    }
}

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

    /// Rewrites `decision` for `programs` on `cpus` CPUs. `teams[i]` is program `i`'s team.
    /// Returns, per program, whether it was squeezed (and so runs as a gang or waits).
    pub fn apply(&mut self, programs: &[Program], teams: &[Team], cpus: u32, decision: &mut Decision) -> Vec<bool> {
        let n = programs.len();
        let entitled: Vec<u32> = decision.allocations.iter().map(|a| a.granted()).collect();
        // What the programs the policy runs can use at once, for the folding teams' choice.
        let capacities: Vec<u32> =
            (0..n).map(|i| if entitled[i] > 0 { capacity(&programs[i], teams[i]) } else { 0 }).collect();
        let fill: u64 = capacities.iter().map(|&c| c as u64).sum();
        let gang_team = |i: usize| match teams[i] {
            Team::Whole(t) => Some(t),
            Team::Folds { threads, cost: Some(cost) }
                if worth_a_gang(entitled[i], threads, cost, fill - capacities[i] as u64, cpus) =>
            {
                Some(threads)
            }
            _ => None,
        };
        let gang: Vec<Option<u32>> = (0..n).map(gang_team).collect();
        let squeezed: Vec<bool> = (0..n).map(|i| entitled[i] > 0 && gang[i].is_some_and(|t| t > entitled[i])).collect();
        self.credit.retain(|id, _| programs.iter().any(|p| p.id == *id));
        if !squeezed.iter().any(|&s| s) {
            self.credit.clear();
            return squeezed;
        }
        let mut width: Vec<u32> =
            (0..n).map(|i| if squeezed[i] { gang[i].unwrap_or(0).min(cpus) } else { entitled[i] }).collect();
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
        // take them, most credit first, up to what they want and the threads they have.
        for &i in order.iter().filter(|&&i| admitted[i] && !squeezed[i]) {
            let room = capacity(&programs[i], teams[i]).saturating_sub(width[i]);
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

/// The CPUs program `p` with team `team` can use at once: what it wants, up to its threads.
fn capacity(p: &Program, team: Team) -> u32 {
    p.wants().min(team.threads().unwrap_or(u32::MAX))
}

/// Whether a folding team of `threads` threads, whose folded threads take `cost` times the CPU
/// time per barrier they take whole, makes more progress on the machine as a gang. Folded onto
/// its share `entitled` (`e`) it makes `e / cost` of progress and the others use the rest,
/// `cpus - e`, as far as they can (`fill`: the CPUs they can use at once, together). Ganged on
/// `w` CPUs for `e / w` of the time, it makes `e`, and the others use the `cpus - w` CPUs beside
/// it in its turns and all of them in the others'.
fn worth_a_gang(entitled: u32, threads: u32, cost: f64, fill: u64, cpus: u32) -> bool {
    let (c, e, w, fill) = (cpus as f64, entitled as f64, threads.min(cpus) as f64, fill as f64);
    if e == 0.0 || w <= e {
        return false;
    }
    let others_folded = (c - e).min(fill);
    let others_ganged = e / w * (c - w).min(fill) + (1.0 - e / w) * c.min(fill);
    e - e / cost - (others_folded - others_ganged) > GANG_MARGIN * e
}

#[cfg(test)]
mod tests {
    use super::*;
    use Team::{Folds, Unknown, Whole};

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

    fn run(guard: &mut TeamGuard, p: &[Program], teams: &[Team], counts: &[u32], cpus: u32) -> Vec<u32> {
        let mut d = decision(counts);
        guard.apply(p, teams, cpus, &mut d);
        assert!(d.total() <= cpus as u64);
        d.allocations.iter().map(|a| a.granted()).collect()
    }

    #[test]
    fn fitting_teams_leave_the_decision_alone() {
        let p = progs(2);
        let mut g = TeamGuard::new();
        assert_eq!(run(&mut g, &p, &[Whole(1), Whole(1)], &[1, 1], 2), vec![1, 1]);
        assert_eq!(run(&mut g, &p, &[Unknown, Unknown], &[1, 1], 2), vec![1, 1]);
    }

    #[test]
    fn two_squeezed_pairs_alternate_as_gangs() {
        let p = progs(2);
        let mut g = TeamGuard::new();
        let seq: Vec<Vec<u32>> = (0..6).map(|_| run(&mut g, &p, &[Whole(2), Whole(2)], &[1, 1], 2)).collect();
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
            let s = run(&mut g, &p, &[Whole(2), Whole(1)], &[1, 1], 2);
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
        let seq: Vec<Vec<u32>> =
            (0..20).map(|_| run(&mut g, &p, &[Whole(2), Folds { threads: 2, cost: None }], &[1, 1], 2)).collect();
        assert!(seq.iter().all(|s| s == &vec![2, 0] || s == &vec![0, 2]), "{seq:?}");
        assert_eq!(seq.iter().filter(|s| s[0] == 2).count(), 10, "{seq:?}");
    }

    #[test]
    fn programs_the_policy_stops_stay_stopped() {
        let p = progs(3);
        let mut g = TeamGuard::new();
        let mut d = decision(&[1, 1, 0]);
        g.apply(&p, &[Whole(4), Whole(1), Whole(4)], 2, &mut d);
        assert!(!d.allocations[2].running);
    }

    fn folds(cost: f64) -> Team {
        Folds { threads: 2, cost: Some(cost) }
    }

    #[test]
    fn two_teams_that_fold_at_a_cost_alternate_as_gangs_and_cheap_ones_stay_folded() {
        let p = progs(2);
        let mut g = TeamGuard::new();
        let seq: Vec<Vec<u32>> = (0..6).map(|_| run(&mut g, &p, &[folds(1.5), folds(1.3)], &[1, 1], 2)).collect();
        assert!(seq.iter().all(|s| s == &vec![2, 0] || s == &vec![0, 2]), "{seq:?}");
        assert_eq!(seq.iter().filter(|s| s[0] == 2).count(), 3, "{seq:?}");
        let mut g = TeamGuard::new();
        for teams in [[folds(1.05), folds(1.05)], [Folds { threads: 2, cost: None }, folds(1.05)]] {
            assert_eq!(run(&mut g, &p, &teams, &[1, 1], 2), vec![1, 1], "{teams:?}");
        }
    }

    #[test]
    fn a_team_beside_a_single_thread_folds_unless_folding_costs_it_more_than_the_thread_loses() {
        // Ganged, the team's turns leave the single thread nothing and its own turns leave a CPU
        // idle: half a CPU lost, which only a team slowed down more than 2.5 times by folding
        // (GANG_MARGIN included) wins back.
        let p = progs(2);
        let mut g = TeamGuard::new();
        for _ in 0..4 {
            assert_eq!(run(&mut g, &p, &[folds(2.0), Whole(1)], &[1, 1], 2), vec![1, 1]);
        }
        let seq: Vec<Vec<u32>> = (0..6).map(|_| run(&mut g, &p, &[folds(3.0), Whole(1)], &[1, 1], 2)).collect();
        assert!(seq.iter().all(|s| s == &vec![2, 0] || s == &vec![0, 1]), "{seq:?}");
    }
}
