//! Gangs for the time-shared DSS variants (paper 000 §4.3): a window of consecutive programs, in
//! arrival order and wrapping around, whose requests add up to at most `k × P`.

use crate::policy::View;
use crate::program::ProgramId;

/// The window that starts at the first program with an id at or after `start` (wrapping to the
/// first program), taking programs while their requests add up to at most `limit`; always at
/// least one program. Returns indices into `view.programs`, in window order.
pub fn window(view: &View, start: ProgramId, limit: u64) -> Vec<usize> {
    let n = view.programs.len();
    if n == 0 {
        return Vec::new();
    }
    let first = view.programs.partition_point(|p| p.id < start) % n;
    let mut members = Vec::new();
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
    members
}

/// The id of the program after index `i` in arrival order, wrapping around.
pub fn next_id(view: &View, i: usize) -> ProgramId {
    view.programs[(i + 1) % view.programs.len()].id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::programs;
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
}
