//! Jobs entering and leaving the program list the policy sees: admission under the
//! multiprogramming level, a job's end, and the compaction that takes finished programs out.

use cpumgr_core::{Nanos, Program, ProgramId};

use super::live::Beside;
use super::{view_of, Engine};
use crate::list::Removal;
use crate::tally::Ran;

impl Engine<'_, '_> {
    /// Removes finished jobs from the program list (keeping id order).
    pub(super) fn compact(&mut self) {
        if self.dead.is_empty() {
            return;
        }
        self.dead.sort_unstable();
        for &i in &self.dead {
            let mut set = std::mem::take(&mut self.programs[i].cpus);
            set.clear();
            self.spare_sets.push(set);
        }
        // The program list and the records' order are parallel: one plan removes from both.
        let plan = Removal::new(self.programs.len(), &self.dead);
        self.programs.remove(&plan);
        self.live.remove(&plan);
        if self.decided {
            debug_assert_eq!(
                self.decision.allocations.len(),
                self.programs.len() + self.dead.len(),
                "the last decision is for the list before"
            );
            remove_sorted(&mut self.decision.allocations, &self.dead);
        }
        self.active_stale = true;
        self.dead.clear();
    }

    pub(super) fn finish(&mut self, i: usize) {
        let slot = self.live.slot(i);
        if self.live.in_slot(slot).ran_last {
            // Its CPUs are free from now on (for the next placement of the changed programs).
            self.placer.release(self.topology, &self.programs[i].cpus);
        }
        self.set_rate(i, 0, self.live.in_slot(slot).threads);
        self.dead.push(i);
        let (l, p) = (self.live.in_slot_mut(slot), &mut self.programs[i]);
        l.alive = false;
        l.ran_last = false;
        l.done_at = Nanos::MAX;
        // The name goes back to the job, for its record: the program leaves at the next
        // compaction, and nothing reads a finished program's name.
        std::mem::swap(&mut l.spec.name, &mut p.name);
        self.policy.on_exit(p.id);
        let ran =
            Ran { first_run: l.first_run, run_ns: l.run_ns, busy: l.busy, moves: l.moves, dedicated: l.dedicated };
        self.tally.finish(p.id, &mut l.spec, p.arrival, &ran, self.now);
    }

    /// Admits queued jobs while the multiprogramming level allows (at steps, after
    /// [`Engine::compact`]).
    pub(super) fn admit(&mut self) {
        while !self.queue.is_empty() && (self.limit == 0 || self.live.len() < self.limit as usize) {
            let slot = self.queue.pop_front().expect("not empty");
            // A change unless the policy's rotation leaves the job out: decided at the next
            // boundary ([`Engine::fast_forward`]).
            self.ff.admitted = true;
            let l = self.live.in_slot_mut(slot);
            l.at = self.now;
            let spec = &mut l.spec;
            let id = ProgramId(l.id);
            debug_assert!(
                self.programs.last().is_none_or(|p| p.id < id),
                "admitted in id order: the list stays sorted for `position`"
            );
            // The program holds the name while the job is in the system ([`Engine::finish`]
            // hands it back for the job's record): moved, not copied. Its view fields are what
            // [`Engine::show`] writes for a job that has not run: not running, a rigid job's
            // processes as its threads.
            let p = Program {
                kind: spec.kind,
                request: spec.request_in(0),
                weight: spec.weight,
                arrival: spec.arrival,
                threads: spec.kind.rigid_procs(),
                cpus: self.spare_sets.pop().unwrap_or_default(),
                ..Program::new(id.0, std::mem::take(&mut spec.name), spec.request)
            };
            let remaining = l.remaining;
            self.programs.push(p);
            self.appended += 1;
            self.load.unserved += 1;
            self.live.list(slot, Beside { held: 0, idle: false });
            let i = self.live.len() - 1;
            self.set_idle(i);
            let view = view_of(self.topology, self.cpus, self.now, self.quantum, &self.programs);
            self.policy.on_arrival(&view, id);
            // A phase of no work ends at once.
            if remaining <= 0.0 {
                self.live[i].done_at = self.now;
                self.push_end(i);
            }
        }
    }
}

/// Removes the entries at `gone` (strictly increasing indices) from `v`, keeping the others'
/// order: each stretch between two removed entries moves once, down over the gaps before it.
fn remove_sorted<T: Copy>(v: &mut Vec<T>, gone: &[usize]) {
    let Some(&first) = gone.first() else { return };
    let mut to = first;
    for (k, &g) in gone.iter().enumerate() {
        let next = gone.get(k + 1).copied().unwrap_or(v.len());
        v.copy_within(g + 1..next, to);
        to += next - g - 1;
    }
    v.truncate(to);
}

#[cfg(test)]
mod tests {
    #[test]
    fn removal_keeps_the_others_in_order() {
        let mut v: Vec<u32> = (0..10).collect();
        super::remove_sorted(&mut v, &[0, 3, 4, 9]);
        assert_eq!(v, vec![1, 2, 5, 6, 7, 8]);
        super::remove_sorted(&mut v, &[]);
        assert_eq!(v, vec![1, 2, 5, 6, 7, 8]);
        super::remove_sorted(&mut v, &[0, 1, 2, 3, 4, 5]);
        assert!(v.is_empty());
    }
}
