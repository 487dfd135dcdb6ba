//! Self Co-Scheduling (paper 002 §3.1) for rigid jobs (MPI): a job gets
//! `initial = processes / mpl` CPUs (`mpl`: processes per CPU) and runs all its processes on
//! them, time-sharing only with itself. Jobs start in arrival order when their initial allocation
//! fits in the free CPUs, otherwise they wait (FCFS). While no job waits, the free CPUs are shared
//! equally among the running jobs (`re-allocation = initial + free / running`, never more than a
//! job's processes); as soon as a job waits, everyone shrinks back to `initial`.
//!
//! Malleable programs are treated as jobs with as many processes as they request.
//!
//! Good at: rigid jobs (they always run, never stopped by others), fair shares, little
//! fragmentation. Bad at: a job squeezed below its process count pays for it in context switches
//! if its processes spin instead of blocking (paper 002 measures block-immediately vs spin-block).

use super::equipartition::water_fill;
use super::started::{Started, Waiting};
use super::PolicyInfo;
use crate::params::{ParamKind, ParamSpec};
use crate::policy::{Decision, Policy, SimHints, View};

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "scs",
    paper: "002 §3.1",
    summary: "self co-scheduling: processes/MPL CPUs per job, free CPUs shared equally while nobody waits",
    params: &[ParamSpec {
        key: "mpl",
        help: "processes per CPU in a job's initial allocation",
        kind: ParamKind::Int { default: 4, min: 1, max: 64 },
    }],
    build: |p| Ok(Box::new(Scs { mpl: p.u32("mpl")?, started: Started::default() })),
};

/// The Self Co-Scheduling policy.
#[derive(Debug, Clone, Default)]
pub struct Scs {
    mpl: u32,
    /// The jobs started (they run until they end), each with the initial allocation it started
    /// with: it keeps up to that many CPUs whatever its request does later (an evolving job's
    /// grows and shrinks), so the started jobs' initial allocations never sum past the machine.
    started: Started<u32>,
}

/// Paper 002's equation (1): the CPUs a job of `procs` processes starts with.
pub fn initial_allocation(procs: u32, mpl: u32, cpus: u32) -> u32 {
    (procs / mpl.max(1)).clamp(1, cpus.max(1))
}

impl Policy for Scs {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        let mpl = self.mpl;
        let initial = |i: usize| initial_allocation(view.programs[i].wants(), mpl, view.cpus);
        let mut free = view.cpus;
        let mut running = Vec::new();
        self.started.keep(view, |i, &mut start| {
            // No more than it wants now (an evolving job in a serial phase gives CPUs back until
            // it grows again), nor than is left: the machine may have shrunk since (the live
            // manager's offered CPUs), and the decision must stay within it.
            let init = start.min(view.programs[i].wants()).min(free);
            free -= init;
            running.push((i, init));
        });
        let mut waiting = false;
        self.started.admit(view, |i, _| {
            let init = initial(i);
            if init <= free {
                free -= init;
                running.push((i, init));
                Waiting::Start(init)
            } else {
                waiting = true;
                Waiting::Stop
            }
        });
        running.sort_unstable();
        let extra = if waiting {
            vec![0; running.len()]
        } else {
            let room: Vec<u32> =
                running.iter().map(|&(i, init)| view.programs[i].wants().min(view.cpus).saturating_sub(init)).collect();
            water_fill(free, &room)
        };
        for (&(i, init), e) in running.iter().zip(extra) {
            out.give(i, init + e);
        }
    }
}

impl SimHints for Scs {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::sliding::tests::running;
    use crate::program::{Kind, Program};

    fn rigid(requests: &[u32]) -> Vec<Program> {
        let mut progs = crate::policies::testing::programs(requests);
        for p in &mut progs {
            p.kind = Kind::Rigid(p.request.wanted);
        }
        progs
    }

    #[test]
    fn initial_allocation_is_processes_over_mpl() {
        // Paper 002: 64 CPUs, MPL 4, jobs of 64 processes start on 16 CPUs each.
        assert_eq!(initial_allocation(64, 4, 64), 16);
        assert_eq!(initial_allocation(30, 4, 64), 7);
        assert_eq!(initial_allocation(2, 4, 64), 1, "at least one CPU");
    }

    #[test]
    fn a_started_job_whose_request_grows_keeps_its_initial_allocation() {
        // 8 CPUs, MPL 1: p1 starts wanting 2 (its initial allocation), p2 wanting 6. Then p1's
        // request grows to 8 (an evolving job's parallel phase). Its initial allocation stays 2:
        // recomputed from the request it was 8, so the started jobs held 14 of 8 CPUs (and the
        // count of free CPUs underflowed).
        let topology = crate::topology::Topology::flat(8);
        let mut progs = crate::policies::testing::programs(&[2, 6]);
        let mut policy = crate::policies::build("scs:mpl=1").unwrap();
        let mut out = Decision::default();
        let mut decide = |progs: &[Program]| {
            let view = View { now: 0, quantum: 100_000_000, topology: &topology, cpus: 8, programs: progs };
            out.reset(progs.len());
            policy.decide(&view, &mut out);
            out.allocations.iter().map(|a| a.count).collect::<Vec<_>>()
        };
        assert_eq!(decide(&progs), vec![2, 6]);
        progs[0].request = crate::program::Request::upto(8);
        assert_eq!(decide(&progs), vec![2, 6], "nothing is free for p1 to grow into");
        progs[1].request = crate::program::Request::upto(1);
        assert_eq!(decide(&progs), vec![7, 1], "p2 keeps what it still wants of its start, p1 grows into the rest");
        progs[1].request = crate::program::Request::upto(6);
        assert_eq!(decide(&progs), vec![2, 6], "p2 gets its start back before anyone grows");
    }

    #[test]
    fn free_cpus_are_shared_while_nobody_waits() {
        // 64 CPUs, MPL 4: two 64-process jobs start on 16 each; nobody waits, so the 32 free CPUs
        // are shared: 32 each.
        let r = running("scs", 64, &rigid(&[64, 64]), 1);
        assert_eq!(r[0], vec![("p1".into(), 32), ("p2".into(), 32)]);
        // Five such jobs: four fit at 16, the fifth waits, so nobody grows.
        let r = running("scs", 64, &rigid(&[64, 64, 64, 64, 64]), 1);
        assert_eq!(r[0].iter().map(|x| x.1).collect::<Vec<_>>(), vec![16, 16, 16, 16]);
    }
}
