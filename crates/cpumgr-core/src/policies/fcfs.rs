//! First come, first served space sharing (the batch baseline of papers 000 and 002): in arrival
//! order, a program starts when its whole request fits in the free CPUs, and then keeps its CPUs
//! until it ends; nobody is preempted. Strict order by default (a big program at the head makes
//! the ones behind it wait); `backfill=true` lets later programs that fit start meanwhile.
//!
//! Good at: no interference at all between programs; predictable. Bad at: waiting times and
//! fragmentation (idle CPUs while the head of the queue waits for room).

use super::started::{Started, Waiting};
use super::PolicyInfo;
use crate::params::{ParamKind, ParamSpec};
use crate::policy::{Decision, Policy, View};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "fcfs",
    paper: "baseline (002 §4)",
    summary: "batch space sharing in arrival order: a program starts when its whole request fits, never preempted",
    params: &[ParamSpec { key: "backfill", help: "let later programs that fit start while the head waits", kind: ParamKind::Bool { default: false } }],
    build: |p| Ok(Box::new(Fcfs { backfill: p.bool("backfill")?, started: Started::default() })),
};

/// The FCFS policy.
#[derive(Debug, Clone, Default)]
pub struct Fcfs {
    backfill: bool,
    /// Programs started, with the CPUs they started on.
    started: Started<u32>,
}

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let mut free = view.cpus;
        self.started.keep(view, |i, c| {
            let p = &view.programs[i];
            let c = if p.kind.rigid_procs().is_some() { c } else { c.min(p.wants()).max(1) };
            out.give(i, c);
            free -= c;
        });
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

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::running;
    use crate::testing::programs;

    #[test]
    fn the_head_blocks_without_backfill_and_nobody_is_preempted() {
        let progs = programs(&[3, 4, 1]);
        let r = running("fcfs", 4, &progs, 2);
        assert_eq!(r[0], vec![("p1".to_string(), 3)], "p2 does not fit, p3 waits behind it");
        assert_eq!(r[1], r[0], "never preempted");
        let r = running("fcfs:backfill=true", 4, &progs, 1);
        assert_eq!(r[0], vec![("p1".to_string(), 3), ("p3".to_string(), 1)]);
    }
}
