//! The programs a start-once policy (FCFS, SCS) has started: a program starts when it fits and
//! then keeps what it started with until it ends. The list is kept in id order, as the view is,
//! so a quantum merges the two in one pass: no lookup per program, and a backlog of thousands of
//! waiting programs costs one comparison each (an ordered map with a lookup per started and per
//! waiting program made these policies the slowest space-sharing ones on long traces).

use crate::policy::View;
use crate::program::{Program, ProgramId};

/// What a policy does with a waiting program ([`Started::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting<T> {
    /// It starts, keeping this value (FCFS: the CPUs it started on).
    Start(T),
    /// It goes on waiting; look at the next one (backfilling).
    Skip,
    /// It goes on waiting, and so does everyone behind it (strict arrival order).
    Stop,
}

/// Started programs in id order, each with the value it keeps from its start.
#[derive(Debug, Clone)]
pub struct Started<T> {
    list: Vec<(ProgramId, T)>,
    /// Scratch: the programs started at this quantum.
    new: Vec<(ProgramId, T)>,
}

impl<T> Default for Started<T> {
    fn default() -> Self {
        Started { list: Vec::new(), new: Vec::new() }
    }
}

impl<T: Copy> Started<T> {
    /// Forgets the started programs no longer in `view` (they ended), and calls `f(index, value)`
    /// for each one still there, in id order (`index` is its position in the view); `f` may change
    /// the value a program keeps (FCFS: the CPUs it holds, when its request changes).
    pub fn keep(&mut self, view: &View, mut f: impl FnMut(usize, &mut T)) {
        let mut i = 0;
        self.list.retain_mut(|(id, value)| {
            while view.programs.get(i).is_some_and(|p| p.id < *id) {
                i += 1;
            }
            let here = view.programs.get(i).is_some_and(|p| p.id == *id);
            if here {
                f(i, value);
            }
            here
        });
    }

    /// Shows `f` the programs of `view` not started, in order, as `(index, program)`, until it
    /// says [`Waiting::Stop`]; those it starts join the list.
    pub fn admit(&mut self, view: &View, mut f: impl FnMut(usize, &Program) -> Waiting<T>) {
        let mut new = std::mem::take(&mut self.new);
        new.clear();
        let mut s = 0;
        for (i, p) in view.programs.iter().enumerate() {
            while self.list.get(s).is_some_and(|&(id, _)| id < p.id) {
                s += 1;
            }
            if self.list.get(s).is_some_and(|&(id, _)| id == p.id) {
                continue;
            }
            match f(i, p) {
                Waiting::Start(value) => new.push((p.id, value)),
                Waiting::Skip => {}
                Waiting::Stop => break,
            }
        }
        // Programs start in arrival order, after the ones started before, unless a backfilled
        // one went ahead of an earlier one still waiting.
        let in_order = matches!((self.list.last(), new.first()), (Some(last), Some(first)) if last.0 < first.0);
        self.list.extend(new.iter().copied());
        if !in_order {
            self.list.sort_unstable_by_key(|&(id, _)| id);
        }
        self.new = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::testing::programs;
    use crate::topology::Topology;

    fn view<'v>(t: &'v Topology, progs: &'v [Program]) -> View<'v> {
        View { now: 0, quantum: 1, topology: t, cpus: 8, programs: progs }
    }

    #[test]
    fn started_programs_are_found_in_the_view_and_forgotten_when_gone() {
        let t = Topology::flat(8);
        let all = programs(&[1, 2, 3, 4, 5]);
        let mut s = Started::default();
        // Start every other one (ids 1, 3, 5), then the view loses ids 1 and 4.
        s.admit(&view(&t, &all), |_, p| if p.id.0 % 2 == 1 { Waiting::Start(p.request.wanted) } else { Waiting::Skip });
        let left: Vec<Program> = all.iter().filter(|p| ![1, 4].contains(&p.id.0)).cloned().collect();
        let mut kept = Vec::new();
        s.keep(&view(&t, &left), |i, v| kept.push((left[i].id.0, *v)));
        assert_eq!(kept, vec![(3, 3), (5, 5)]);
        // The waiting ones are shown in order, the started skipped; Stop ends the walk.
        let mut shown = Vec::new();
        s.admit(&view(&t, &left), |_, p| {
            shown.push(p.id.0);
            Waiting::Stop
        });
        assert_eq!(shown, vec![2]);
    }

    #[test]
    fn a_program_started_ahead_of_an_earlier_one_keeps_the_list_in_id_order() {
        let t = Topology::flat(8);
        let all = programs(&[1, 1, 1, 1]);
        let mut s = Started::default();
        s.admit(&view(&t, &all), |_, p| if p.id.0 == 3 { Waiting::Start(()) } else { Waiting::Skip });
        s.admit(&view(&t, &all), |_, p| if p.id.0 == 1 { Waiting::Start(()) } else { Waiting::Skip });
        let mut kept = Vec::new();
        s.keep(&view(&t, &all), |i, _| kept.push(i));
        assert_eq!(kept, vec![0, 2]);
    }
}
