//! Gangs for the time-shared DSS variants (paper 000 §4.3): a window of consecutive programs, in
//! arrival order and wrapping around, whose requests add up to at most `k × P`.

use std::cell::RefCell;

use crate::policy::{Rotation, View};
use crate::program::ProgramId;

/// The window that starts at the first program with an id at or after `start` (wrapping to the
/// first program), taking programs while their requests add up to at most `limit`; always at
/// least one program. Returns indices into `view.programs`, in window order.
pub fn window(view: &View, start: ProgramId, limit: u64) -> Vec<usize> {
    let mut members = Vec::new();
    window_into(view, start, limit, &mut members);
    members
}

/// [`window`], written into `members` (cleared first), so that a caller walking many windows
/// reuses one buffer.
fn window_into(view: &View, start: ProgramId, limit: u64, members: &mut Vec<usize>) {
    members.clear();
    let n = view.programs.len();
    if n == 0 {
        return;
    }
    let first = view.programs.partition_point(|p| p.id < start) % n;
    let mut sum = 0u64;
    for k in 0..n {
        let i = (first + k) % n;
        let w = view.programs[i].wants().min(view.cpus) as u64;
        if !members.is_empty() && sum + w > limit {
            break;
        }
        sum += w;
        members.push(i);
    }
}

/// The id of the program after index `i` in arrival order, wrapping around.
pub fn next_id(view: &View, i: usize) -> ProgramId {
    view.programs[(i + 1) % view.programs.len()].id
}

/// The rotation of windows from the one at `start`, when each next window starts at the program
/// after the member `advance` picks from a window (its last for SW-DSS, its first for SSW-DSS):
/// its length is how many windows it takes to come back to `start`, if at most `max`, and its
/// fingerprint covers every window's members. `None` when `start` is not on its own cycle (it
/// names no program, or a window skips over it).
pub fn rotation(
    view: &View,
    start: ProgramId,
    limit: u64,
    advance: fn(&[usize]) -> usize,
    max: u32,
) -> Option<Rotation> {
    let mut at = start;
    let mut r = Rotation::new(0);
    let mut members = Vec::new();
    for p in 1..=max {
        window_into(view, at, limit, &mut members);
        if members.is_empty() {
            return None;
        }
        r.mix(u64::MAX);
        for &i in &members {
            r.mix(view.programs[i].id.0);
        }
        at = next_id(view, advance(&members));
        if at == start {
            r.quanta = p;
            return Some(r);
        }
    }
    None
}

/// The rotations a policy walked for one view, by start: a time-sharing policy is asked for its
/// rotation at every quantum boundary ([`crate::SimHints::rotation`]), each time from the next
/// window's start, while the view (the programs and what they want) rarely changes from one
/// boundary to the next. Walking a rotation takes up to `max` windows; once each start of a
/// cycle has been walked, a boundary costs a comparison of the view with the one remembered.
/// Interior mutability, since [`crate::SimHints::rotation`] takes the policy by shared reference;
/// a policy's clone starts with an empty memo.
#[derive(Debug, Default)]
pub struct RotationMemo(RefCell<Memo>);

#[derive(Debug, Default)]
struct Memo {
    /// What the remembered rotations were walked for: the machine's CPUs, the gang limit, the
    /// bound, and each program's id and request.
    cpus: u32,
    limit: u64,
    max: u32,
    programs: Vec<(ProgramId, u32)>,
    /// Walked rotations, by start.
    by_start: Vec<(ProgramId, Option<Rotation>)>,
}

impl Clone for RotationMemo {
    fn clone(&self) -> Self {
        RotationMemo::default()
    }
}

impl RotationMemo {
    /// [`rotation`] of `view` from `start`, walked once per start while the view, `limit` and
    /// `max` stay the same (`advance` must be the same function at every call).
    pub fn rotation(
        &self,
        view: &View,
        start: ProgramId,
        limit: u64,
        advance: fn(&[usize]) -> usize,
        max: u32,
    ) -> Option<Rotation> {
        let mut m = self.0.borrow_mut();
        let same = m.cpus == view.cpus
            && m.limit == limit
            && m.max == max
            && m.programs.len() == view.programs.len()
            && m.programs.iter().zip(view.programs).all(|(&(id, wants), p)| id == p.id && wants == p.wants());
        if !same {
            m.cpus = view.cpus;
            m.limit = limit;
            m.max = max;
            m.programs.clear();
            m.programs.extend(view.programs.iter().map(|p| (p.id, p.wants())));
            m.by_start.clear();
        } else if let Some(&(_, r)) = m.by_start.iter().find(|(s, _)| *s == start) {
            return r;
        }
        let r = rotation(view, start, limit, advance, max);
        m.by_start.push((start, r));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::testing::programs;
    use crate::topology::Topology;

    #[test]
    fn windows_wrap_and_respect_the_limit() {
        let t = Topology::flat(8);
        let progs = programs(&[4, 4, 4, 2]);
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 8, programs: &progs };
        assert_eq!(window(&view, ProgramId(1), 8), vec![0, 1]);
        assert_eq!(window(&view, ProgramId(3), 8), vec![2, 3]);
        assert_eq!(window(&view, ProgramId(4), 8), vec![3, 0], "wraps around");
        assert_eq!(window(&view, ProgramId(9), 4), vec![0], "past the last id starts again");
        assert_eq!(window(&view, ProgramId(1), 1), vec![0], "at least one member");
        assert_eq!(next_id(&view, 3), ProgramId(1));
    }

    #[test]
    fn rotations_come_back_to_their_start() {
        let t = Topology::flat(8);
        let progs = programs(&[4, 4, 4, 2]);
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 8, programs: &progs };
        let last = |m: &[usize]| *m.last().unwrap();
        let first = |m: &[usize]| m[0];
        assert_eq!(rotation(&view, ProgramId(1), 8, last, 32).map(|r| r.quanta), Some(2), "{{p1, p2}}, {{p3, p4}}");
        assert_eq!(rotation(&view, ProgramId(1), 8, first, 32).map(|r| r.quanta), Some(4), "one window per program");
        assert_eq!(rotation(&view, ProgramId(1), 8, first, 3), None, "longer than the bound");
        assert_eq!(rotation(&view, ProgramId(9), 8, last, 32), None, "no program has that id");
        // From p2 the windows are {p2, p3}, {p4, p1}, {p2, p3}: p2 is on its own cycle of 2.
        let from2 = rotation(&view, ProgramId(2), 8, last, 32).unwrap();
        assert_eq!(from2.quanta, 2);
        let from1 = rotation(&view, ProgramId(1), 8, last, 32).unwrap();
        assert_ne!(from1.fingerprint, from2.fingerprint, "other windows");
    }

    #[test]
    fn the_memo_gives_what_a_walk_gives_and_forgets_a_changed_view() {
        let t = Topology::flat(8);
        let last = |m: &[usize]| *m.last().unwrap();
        let memo = RotationMemo::default();
        let mut progs = programs(&[4, 4, 4, 2]);
        for round in 0..3 {
            if round == 2 {
                // A request changes: the rotations change with it.
                progs[3].request.wanted = 4;
                progs[3].request.max = 4;
            }
            let view = View { now: 0, quantum: 1, topology: &t, cpus: 8, programs: &progs };
            for start in 0..6 {
                for (limit, max) in [(8, 32), (8, 1), (12, 32)] {
                    let want = rotation(&view, ProgramId(start), limit, last, max);
                    assert_eq!(
                        memo.rotation(&view, ProgramId(start), limit, last, max),
                        want,
                        "round {round}, start {start}, limit {limit}, max {max}"
                    );
                }
            }
        }
        assert!(memo.clone().0.borrow().by_start.is_empty(), "a clone starts afresh");
    }
}
