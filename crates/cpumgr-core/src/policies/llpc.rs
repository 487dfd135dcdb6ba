//! Loop-Level Process Control (paper 001 §3.3): each program sizes each parallel loop from the
//! system load, the number of threads running at once. When the load exceeds the CPUs, a program
//! puts spinning workers to sleep (never its master); when CPUs are idle, it wakes sleeping ones;
//! when the load is unchanged since its last loop, it changes nothing.
//!
//! [`adjust`] is the paper's algorithm as a pure function, for runtimes that decide by themselves
//! with no manager (`CPUMGR_MODE=llpc`). The `llpc` policy runs the same function for every
//! program at each quantum, one after the other, so each sees the load the earlier ones left —
//! what the programs would see, loop by loop, on a real machine. A manager must not oversubscribe,
//! so when even one thread each is too many, the latest programs wait.
//!
//! Good at: needing no information but the load; adapts to programs the manager does not know
//! (a sequential background load). Bad at: fairness (the first to adapt keeps more), and programs
//! that cannot shrink.

use super::PolicyInfo;
use crate::policy::{Decision, Policy, View};
use crate::program::ProgramId;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "llpc",
    paper: "001 §3.3",
    summary: "each program sizes its team from the load: sleep workers when overloaded, wake them when CPUs idle",
    params: &[],
    build: |_| Ok(Box::new(Llpc::default())),
};

/// One program's LLPC memory: the load difference it saw at its last loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LlpcState {
    /// `CPUs − load` at the last adjustment.
    pub last_diff: i64,
}

/// Paper 001's algorithm: the team size for the next parallel loop.
///
/// - `cpus`: CPUs of the machine (or of the program's CPU set);
/// - `load`: threads running at once on them, this program's active ones included;
/// - `created`: threads the program has (master + workers), its largest possible team;
/// - `active`: its current team (master + spinning workers).
///
/// Returns the new team, between 1 (the master always runs) and `created`.
pub fn adjust(state: &mut LlpcState, cpus: u32, load: u32, created: u32, active: u32) -> u32 {
    let diff = cpus as i64 - load as i64;
    let active = active.clamp(1, created.max(1));
    let mut adj: i64 = 0;
    if diff != 0 && diff != state.last_diff {
        if diff > 0 {
            let sleeping = (created.max(1) - active) as i64;
            adj = sleeping.min(diff);
        } else {
            let spinning = (active - 1) as i64;
            adj = -spinning.min(-diff);
        }
    }
    state.last_diff = diff;
    (active as i64 + adj) as u32
}

/// The LLPC policy.
#[derive(Debug, Clone, Default)]
pub struct Llpc {
    /// Per program, by id (ascending, as the view's programs): its team and memory.
    teams: Vec<(ProgramId, u32, LlpcState)>,
}

impl Policy for Llpc {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn on_exit(&mut self, id: ProgramId) {
        if let Ok(k) = self.teams.binary_search_by_key(&id, |t| t.0) {
            self.teams.remove(k);
        }
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        // New programs start with every thread spinning, as the paper's runtime does. Both
        // lists are in id order, so one merge drops the programs gone and adds the new ones
        // (no hashing: this runs every quantum over every program).
        let created = |i: usize| view.programs[i].wants().min(view.cpus).max(1);
        let mut old = std::mem::take(&mut self.teams).into_iter().peekable();
        let mut load: u64 = 0;
        for (i, p) in view.programs.iter().enumerate() {
            while old.next_if(|t| t.0 < p.id).is_some() {}
            let t = old.next_if(|t| t.0 == p.id).unwrap_or((p.id, created(i), LlpcState::default()));
            load += t.1 as u64;
            self.teams.push(t);
        }
        let mut teams = Vec::with_capacity(view.programs.len());
        for (i, p) in view.programs.iter().enumerate() {
            let (_, team, state) = &mut self.teams[i];
            if p.kind.rigid_procs().is_none() {
                let new = adjust(state, view.cpus, load.min(u32::MAX as u64) as u32, created(i), *team);
                load = load + new as u64 - *team as u64;
                *team = new;
            } else {
                *team = created(i);
            }
            teams.push(*team);
        }
        // Never hand out more than the machine: the latest programs wait while it is full.
        let mut left = view.cpus;
        for (i, team) in teams.into_iter().enumerate() {
            if team <= left {
                out.give(i, team);
                left -= team;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::sliding::tests::running;
    use crate::testing::programs;

    #[test]
    fn follows_the_papers_example() {
        // Paper 001 §3.3: 4 CPUs, a program with 4 threads. Load 5 (one more than the CPUs):
        // one spinning worker goes to sleep.
        let mut s = LlpcState::default();
        assert_eq!(adjust(&mut s, 4, 5, 4, 4), 3);
        // The load is unchanged at the next loop: same team.
        assert_eq!(adjust(&mut s, 4, 5, 4, 3), 3);
        // The other program ends (load 3): wake the sleeping worker.
        assert_eq!(adjust(&mut s, 4, 3, 4, 3), 4);
        // Heavily overloaded: all spinning workers sleep, the master keeps running.
        assert_eq!(adjust(&mut LlpcState::default(), 4, 20, 4, 4), 1);
        // Idle machine, all threads awake already: nothing to wake.
        assert_eq!(adjust(&mut LlpcState::default(), 4, 2, 2, 2), 2);
    }

    #[test]
    fn programs_adapt_to_each_other() {
        // Two programs of 4 threads on 4 CPUs: the first sheds 3 threads... the load then fits.
        let r = running("llpc", 4, &programs(&[4, 4]), 2);
        assert_eq!(r[0].iter().map(|x| x.1).sum::<u32>(), 4, "the load meets the CPUs: {:?}", r[0]);
        assert_eq!(r[1], r[0], "unchanged load, unchanged teams");
    }
}
