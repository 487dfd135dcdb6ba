//! First come, first served space sharing (the batch baseline of papers 000 and 002): in arrival
//! order, a program starts when its whole request fits in the free CPUs, and then keeps its CPUs
//! until it ends; nobody is preempted. Strict order by default (a big program at the head makes
//! the ones behind it wait); `backfill=true` lets later programs that fit start meanwhile.
//!
//! A started program whose request changes (a malleable or evolving program's runtime asks for
//! more or fewer CPUs between phases) is still never preempted: when it asks for fewer it hands
//! the rest back, and when it asks for more it grows into the free CPUs, before any waiting
//! program starts (it arrived before them, or, with `backfill`, started ahead of them as one
//! that fits). A rigid or moldable program's request does not change: it keeps what it started
//! with.
//!
//! Good at: no interference at all between programs; predictable. Bad at: waiting times and
//! fragmentation (idle CPUs while the head of the queue waits for room).

use super::started::{Started, Waiting};
use super::PolicyInfo;
use crate::params::{ParamKind, ParamSpec};
use crate::policy::{Decision, Policy, SimHints, View};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "fcfs",
    paper: "baseline (002 §4)",
    summary: "batch space sharing in arrival order: a program starts when its whole request fits, never preempted",
    params: &[ParamSpec {
        key: "backfill",
        help: "let later programs that fit start while the head waits",
        kind: ParamKind::Bool { default: false },
    }],
    build: |p| Ok(Box::new(Fcfs { backfill: p.bool("backfill")?, started: Started::default() })),
};

/// The FCFS policy.
#[derive(Debug, Clone, Default)]
pub struct Fcfs {
    backfill: bool,
    /// Programs started, with the CPUs they hold.
    started: Started<u32>,
}

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let mut free = view.cpus;
        let mut short = false;
        self.started.keep(view, |i, held| {
            let p = &view.programs[i];
            if p.kind.rigid_procs().is_none() {
                *held = (*held).min(p.wants()).max(1);
                short |= p.wants().min(view.cpus) > *held;
            }
            out.give(i, *held);
            free -= *held;
        });
        if short && free > 0 {
            // Once every hold is counted, the programs that ask for more grow, in arrival order.
            self.started.keep(view, |i, held| {
                let more = view.programs[i].wants().min(view.cpus).saturating_sub(*held).min(free);
                *held += more;
                free -= more;
                out.give(i, *held);
            });
        }
        let backfill = self.backfill;
        self.started.admit(view, |i, p| {
            let need = p.wants().min(view.cpus).max(1);
            if need <= free {
                out.give(i, need);
                free -= need;
                Waiting::Start(need)
            } else if backfill {
                Waiting::Skip
            } else {
                Waiting::Stop
            }
        });
    }
}

impl SimHints for Fcfs {}

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::{running, step};
    use crate::policies::testing::programs;
    use crate::program::{Program, Request};

    #[test]
    fn the_head_blocks_without_backfill_and_nobody_is_preempted() {
        let progs = programs(&[3, 4, 1]);
        let r = running("fcfs", 4, &progs, 2);
        assert_eq!(r[0], vec![("p1".to_string(), 3)], "p2 does not fit, p3 waits behind it");
        assert_eq!(r[1], r[0], "never preempted");
        let r = running("fcfs:backfill=true", 4, &progs, 1);
        assert_eq!(r[0], vec![("p1".to_string(), 3), ("p3".to_string(), 1)]);
    }

    #[test]
    fn a_started_program_follows_its_request_without_preempting_anyone() {
        let mut fcfs = crate::policies::build("fcfs").unwrap();
        // 6 CPUs: p1 starts in a 1-CPU phase (it can use 4), p2 wants all 6 and waits.
        let mut progs = programs(&[4, 6]);
        progs[0].request = Request { wanted: 1, min: 1, max: 4 };
        assert_eq!(step(fcfs.as_mut(), 6, &progs), vec![1, 0]);
        // p1 asks for 4: it grows into the free CPUs, ahead of p2, which arrived after it.
        progs[0].request.wanted = 4;
        assert_eq!(step(fcfs.as_mut(), 6, &progs), vec![4, 0]);
        // Back to 1: the 3 CPUs go back (p2 still does not fit), and the hold follows.
        progs[0].request.wanted = 1;
        assert_eq!(step(fcfs.as_mut(), 6, &progs), vec![1, 0]);
        // p2 leaves, p3 (3) arrives and starts on 3 of the 5 free CPUs; p1 asks for 4 again and
        // gets the 2 left, never p3's: nobody holds a CPU twice.
        progs.truncate(1);
        progs.push(Program::new(3, "p3", 3));
        assert_eq!(step(fcfs.as_mut(), 6, &progs), vec![1, 3]);
        progs[0].request.wanted = 4;
        assert_eq!(step(fcfs.as_mut(), 6, &progs), vec![3, 3]);
        // p3 ends: p1 gets the rest of its request.
        progs.truncate(1);
        assert_eq!(step(fcfs.as_mut(), 6, &progs), vec![4]);
    }
}
