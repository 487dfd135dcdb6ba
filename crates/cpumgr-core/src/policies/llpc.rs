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
//! A program creates its threads once, at start, as many as it can use (§3.2: the master and
//! its slaves; here its largest request, `request.max`), all spinning; the algorithm moves them
//! between spinning and sleeping, never creates more. Its team — master and spinning slaves — is
//! kept across a phase that asks for fewer CPUs (a sequential section, where the slaves wait for
//! the next parallel loop, §3.2), and the program runs on `min(team, request)` CPUs, which is what
//! the load counts. When its request rises again it runs its whole team at once, as the paper's
//! next parallel loop would; it does not wait for the load to change.
//!
//! Good at: needing no information but the load; adapts to programs the manager does not know
//! (a sequential background load). Bad at: fairness (the first to adapt keeps more), and programs
//! that cannot shrink.

use super::PolicyInfo;
use crate::policy::{Decision, Policy, SimHints, View};
use crate::program::{Program, ProgramId};

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
        self.fit(view, out, true);
    }

    fn refit(&mut self, view: &View, out: &mut Decision) {
        self.fit(view, out, false);
    }
}

impl SimHints for Llpc {}

impl Llpc {
    /// Decides a quantum: at its `boundary`, every program adjusts its team to the load, as at
    /// its next loop; a refit within the quantum keeps the teams (new programs start whole).
    fn fit(&mut self, view: &View, out: &mut Decision, boundary: bool) {
        // New programs start with every thread they create spinning, as the paper's runtime does.
        // Both lists are in id order, so one merge drops the programs gone and adds the new ones
        // (no hashing: this runs every quantum over every program).
        let created = |p: &Program| p.kind.rigid_procs().unwrap_or(p.wants().max(p.request.max)).min(view.cpus).max(1);
        // The CPUs a team runs on: no more than the program asks for in its current phase.
        let running = |p: &Program, team: u32| team.min(p.wants()).max(1);
        let mut old = std::mem::take(&mut self.teams).into_iter().peekable();
        let mut load: u64 = 0;
        for p in view.programs {
            while old.next_if(|t| t.0 < p.id).is_some() {}
            let t = old.next_if(|t| t.0 == p.id).unwrap_or((p.id, created(p), LlpcState::default()));
            load += running(p, t.1) as u64;
            self.teams.push(t);
        }
        let mut counts = Vec::with_capacity(view.programs.len());
        for (p, (_, team, state)) in view.programs.iter().zip(&mut self.teams) {
            let before = running(p, *team);
            *team = if !boundary {
                *team
            } else if p.kind.rigid_procs().is_none() {
                adjust(state, view.cpus, load.min(u32::MAX as u64) as u32, created(p), *team)
            } else {
                created(p)
            };
            let after = running(p, *team);
            load = load + after as u64 - before as u64;
            counts.push(after);
        }
        // Never hand out more than the machine: the latest programs wait while it is full.
        let mut left = view.cpus;
        for (i, count) in counts.into_iter().enumerate() {
            if count <= left {
                out.give(i, count);
                left -= count;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::sliding::tests::{running, step};
    use crate::policies::testing::programs;

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

    #[test]
    fn a_team_survives_a_serial_phase_and_runs_when_the_request_rises() {
        // An evolving program of up to 4 threads in a 1-CPU phase on an idle machine of 8: it
        // runs on 1; when its request rises to 4, its whole team runs at once. (With the team
        // cut to the 1-CPU request, the load, and so the diff, never changed again: it stayed on
        // 1 CPU for good.)
        let mut llpc = Llpc::default();
        let mut progs = programs(&[4]);
        progs[0].request = crate::program::Request { wanted: 1, min: 1, max: 4 };
        assert_eq!(step(&mut llpc, 8, &progs), vec![1]);
        assert_eq!(step(&mut llpc, 8, &progs), vec![1]);
        progs[0].request.wanted = 4;
        assert_eq!(step(&mut llpc, 8, &progs), vec![4]);
        // Back to a serial phase and out again: the team is still there.
        progs[0].request.wanted = 1;
        assert_eq!(step(&mut llpc, 8, &progs), vec![1]);
        progs[0].request.wanted = 4;
        assert_eq!(step(&mut llpc, 8, &progs), vec![4]);
    }

    #[test]
    fn the_load_counts_what_a_serial_phase_runs() {
        // 8 CPUs: a program of up to 4 threads in its serial phase runs on 1, so another of 7
        // threads fits beside it without shedding; when the first asks for 4 again the load is
        // 11, and the first to loop (the earlier program) sleeps 3 workers: the load meets the
        // CPUs again.
        let mut llpc = Llpc::default();
        let mut progs = programs(&[4, 7]);
        progs[0].request = crate::program::Request { wanted: 1, min: 1, max: 4 };
        assert_eq!(step(&mut llpc, 8, &progs), vec![1, 7]);
        progs[0].request.wanted = 4;
        assert_eq!(step(&mut llpc, 8, &progs), vec![1, 7]);
        assert_eq!(step(&mut llpc, 8, &progs), vec![1, 7], "unchanged load, unchanged teams");
    }
}
