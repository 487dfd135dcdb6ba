//! Performance-Driven Processor Allocation (paper 000 §4.4, Figure 1): a search, per program,
//! for the number of CPUs it uses well, driven by the speedup the program measures at run time.
//!
//! Each program starts at `base` CPUs in state NO_REF. Its first speedup report sends it to P_INC
//! (efficiency ≥ `min_eff`: add `step`) or P_DEC (remove `step`). P_INC keeps adding while the
//! speedup grows and the efficiency holds, then settles in P_STABLE on the last allocation that
//! was efficient; P_DEC removes until the efficiency is met. When CPUs are left free, a stable
//! program is probed with two more (P_TEST, up to `tests` times; the only case where a program may
//! get more than its request) and keeps them only if its speedup improves efficiently.
//!
//! PDPA also advises the long-term scheduler on the multiprogramming level: when the programs
//! cannot use the machine, more can be admitted; when their efficient sizes exceed it, fewer.
//! The advice counts every program the machine holds, rigid ones included (they run whole or
//! wait, [`super::reserve_rigid`], outside the search): every program plus one per `base` free
//! CPUs when CPUs are free, else the rigid programs that run plus the others that fit at their
//! sizes, in arrival order.
//!
//! Good at: programs that scale differently (it gives CPUs to those that use them), and it frees
//! CPUs for more programs. Bad at: programs that report no speedup (they stay at `base`), and
//! noisy measurements, which can settle a program too small.

use std::collections::HashMap;

use super::equipartition::water_fill;
use super::{reserve_rigid, PolicyInfo, Reserved};
use crate::params::{ParamError, ParamKind, ParamSpec, Params};
use crate::policy::{Decision, Policy, SimHints, View};
use crate::program::ProgramId;

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "pdpa",
    paper: "000 §4.4",
    summary: "per-program search driven by measured speedup (NO_REF/P_INC/P_DEC/P_STABLE/P_TEST), MPL advice",
    params: &[
        ParamSpec {
            key: "base",
            help: "CPUs a new program starts with",
            kind: ParamKind::Int { default: 4, min: 1, max: 4096 },
        },
        ParamSpec {
            key: "step",
            help: "CPUs added or removed per move",
            kind: ParamKind::Int { default: 2, min: 1, max: 4096 },
        },
        ParamSpec {
            key: "min_eff",
            help: "efficiency (speedup / CPUs) a program must keep",
            kind: ParamKind::Float { default: 0.7, min: 0.0, max: 1.0 },
        },
        ParamSpec {
            key: "tests",
            help: "probes with two more CPUs when CPUs are free",
            kind: ParamKind::Int { default: 3, min: 0, max: 100 },
        },
    ],
    build: |p| Ok(Box::new(Pdpa::new(p)?)),
};

/// A program's place in the search (Figure 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No speedup measured yet.
    NoRef,
    /// Performing well: growing by `step`.
    Inc,
    /// Performing badly: shrinking by `step`.
    Dec,
    /// Settled.
    Stable,
    /// Probing two more CPUs because some are free.
    Test,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Search {
    state: State,
    alloc: u32,
    /// The last allocation whose efficiency met `min_eff`.
    good: u32,
    last_speedup: f64,
    tests_left: u32,
    /// Whether the allocation changed since the last report was taken: a report moves the
    /// search once per allocation.
    awaiting: bool,
    /// Just settled: run one quantum at the stable size before a probe.
    rest: bool,
}

/// The PDPA policy.
#[derive(Debug, Clone)]
pub struct Pdpa {
    base: u32,
    step: u32,
    min_eff: f64,
    tests: u32,
    programs: HashMap<ProgramId, Search>,
    /// Whether the last decision left every search as it found it ([`SimHints::settled`]).
    settled: bool,
}

impl Search {
    /// The CPUs the search gives now to a program that wants `cap`: its allocation held to the
    /// request, except a P_TEST probe. The search keeps its allocation when the request drops
    /// for a while (ltomcatv's 1-CPU I/O phase), so a settled program returns to its stable size
    /// instead of searching again (paper 000 §6.4: allocations stay put in P_STABLE).
    fn given(&self, cap: u32) -> u32 {
        if self.state == State::Test {
            self.alloc
        } else {
            self.alloc.min(cap).max(1)
        }
    }
}

impl Pdpa {
    /// Builds the policy from its checked parameters (the catalog's `build`; the property tests
    /// use it to keep the concrete type and ask for each program's state).
    pub fn new(p: &Params) -> Result<Pdpa, ParamError> {
        Ok(Pdpa {
            base: p.u32("base")?,
            step: p.u32("step")?,
            min_eff: p.float("min_eff")?,
            tests: p.u32("tests")?,
            programs: HashMap::new(),
            settled: false,
        })
    }

    /// The state of a program's search, if it has one.
    pub fn state(&self, id: ProgramId) -> Option<State> {
        self.programs.get(&id).map(|s| s.state)
    }

    fn advance(&self, s: &mut Search, cpus: u32, speedup: f64) {
        let efficient = speedup >= self.min_eff * cpus as f64;
        let c = cpus;
        match s.state {
            State::NoRef if efficient => (s.state, s.good, s.alloc) = (State::Inc, c, c + self.step),
            State::NoRef => (s.state, s.alloc) = (State::Dec, c.saturating_sub(self.step).max(1)),
            State::Inc if efficient && speedup > s.last_speedup => (s.good, s.alloc) = (c, c + self.step),
            State::Inc => (s.state, s.alloc) = (State::Stable, s.good.max(1)),
            State::Dec if efficient || c <= 1 => (s.state, s.good, s.alloc) = (State::Stable, c, c),
            State::Dec => s.alloc = c.saturating_sub(self.step).max(1),
            State::Test if efficient && speedup > s.last_speedup => (s.state, s.good, s.alloc) = (State::Stable, c, c),
            State::Test => (s.state, s.alloc) = (State::Stable, s.good.max(1)),
            State::Stable => return,
        }
        s.last_speedup = speedup;
    }

    /// Decides a quantum: each program at the size its search holds, a new one at the base.
    /// At a quantum `boundary`, the searches take in the reports measured at the sizes they
    /// asked for and stable programs may start a probe; a refit within the quantum does
    /// neither, or it would take one measurement in twice and probe before the quantum ends.
    fn fit(&mut self, view: &View, out: &mut Decision, boundary: bool) {
        let searches = self.programs.len();
        self.programs.retain(|id, _| view.index_of(*id).is_some());
        // A search started, ended, moved or probed at this decision: not settled.
        let mut moved = self.programs.len() != searches;
        let Reserved { left, served, .. } = reserve_rigid(view, out);
        let open: Vec<usize> =
            (0..view.programs.len()).filter(|&i| view.programs[i].kind.rigid_procs().is_none()).collect();
        let mut desired = Vec::with_capacity(open.len());
        for &i in &open {
            let p = &view.programs[i];
            let (base, tests) = (self.base.max(1), self.tests);
            let found = self.programs.remove(&p.id);
            let mut s = found.unwrap_or(Search {
                state: State::NoRef,
                alloc: base,
                good: base,
                last_speedup: 0.0,
                tests_left: tests,
                awaiting: true,
                rest: false,
            });
            let cap = p.wants();
            if let Some(r) = p.speedup.filter(|r| {
                boundary && s.awaiting && r.cpus.get() == s.given(cap) && r.speedup.is_finite() && r.speedup > 0.0
            }) {
                let before = s.state;
                self.advance(&mut s, r.cpus.get(), r.speedup);
                // Still searching, moved, or just settled: the next report counts too.
                s.awaiting = s.state != State::Stable || s.given(cap) != r.cpus.get() || s.state != before;
                s.rest = s.state == State::Stable && before != State::Stable;
            }
            desired.push(s.given(cap).min(view.cpus));
            moved |= found != Some(s);
            self.programs.insert(p.id, s);
        }
        let total: u64 = desired.iter().map(|&d| d as u64).sum();
        let counts = if total <= left as u64 {
            // Free CPUs: probe stable programs with two more, in arrival order.
            let mut free = left - total as u32;
            for (k, &i) in open.iter().enumerate() {
                let s = self.programs.get_mut(&view.programs[i].id).expect("inserted above");
                if boundary && s.state == State::Stable && !s.rest && s.tests_left > 0 && free >= 2 {
                    s.state = State::Test;
                    s.tests_left -= 1;
                    desired[k] += 2;
                    s.alloc = desired[k];
                    s.awaiting = true;
                    free -= 2;
                    moved = true;
                }
            }
            out.mpl_advice = Some((view.programs.len() as u32 + free / self.base.max(1)).max(1));
            desired
        } else {
            let mut sum = 0u64;
            let fit = desired.iter().take_while(|&&d| {
                sum += d as u64;
                sum <= left as u64
            });
            out.mpl_advice = Some(((served + fit.count()) as u32).max(1));
            water_fill(left, &desired)
        };
        for (&i, c) in open.iter().zip(counts) {
            out.give(i, c);
        }
        self.settled = !moved;
    }
}

impl Policy for Pdpa {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn on_exit(&mut self, id: ProgramId) {
        self.programs.remove(&id);
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        self.fit(view, out, true);
    }

    fn refit(&mut self, view: &View, out: &mut Decision) {
        self.fit(view, out, false);
    }
}

impl SimHints for Pdpa {
    /// Its searches move on the speedup reports.
    fn reads_usage(&self) -> bool {
        true
    }

    fn settled(&self) -> bool {
        self.settled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Program, SpeedupReport};
    use crate::topology::Topology;

    /// Drives one program through `quanta` quanta on `cpus` CPUs with the default parameters;
    /// after each quantum the program reports `curve(count)`. Returns (count, state, whether the
    /// policy says it settled) per quantum.
    fn drive(cpus: u32, request: u32, curve: impl Fn(u32) -> f64, quanta: usize) -> Vec<(u32, State, bool)> {
        let t = Topology::flat(cpus);
        let mut pdpa = Pdpa { base: 4, step: 2, min_eff: 0.7, tests: 3, programs: HashMap::new(), settled: false };
        let mut progs = vec![Program::new(1, "app", request)];
        let mut d = Decision::default();
        let mut out = Vec::new();
        for q in 0..quanta {
            let view = View { now: q as u64, quantum: 1, topology: &t, cpus, programs: &progs };
            d.reset(1);
            pdpa.decide(&view, &mut d);
            let count = d.allocations[0].count;
            out.push((count, pdpa.state(ProgramId(1)).expect("tracked"), pdpa.settled()));
            progs[0].speedup = SpeedupReport::new(count, curve(count));
        }
        out
    }

    #[test]
    fn climbs_settles_and_probes_as_figure_1() {
        // Speedup 3.6 on 4 (eff 0.9), 5.1 on 6 (0.85), 5.2 on 8 (0.65 < 0.7), flat after.
        let curve = |c: u32| match c {
            0..=4 => c as f64 * 0.9,
            5..=6 => 5.1,
            _ => 5.2,
        };
        let r = drive(16, 16, curve, 11);
        let counts: Vec<u32> = r.iter().map(|x| x.0).collect();
        // base 4 → P_INC 6 → P_INC 8 → P_STABLE back to 6 → three P_TEST probes at 8 (CPUs are
        // free), each rejected, with a stable quantum between; then stable at 6 for good.
        assert_eq!(counts, vec![4, 6, 8, 6, 8, 6, 8, 6, 8, 6, 6]);
        // Its decisions repeat (8, 6, 8, 6) while probes are left, but its state moves: it says
        // it is settled only once its search stood still, after the last probe.
        let settled: Vec<bool> = drive(16, 16, curve, 14).iter().map(|x| x.2).collect();
        assert!(settled[..10].iter().all(|&s| !s) && settled[12..].iter().all(|&s| s), "{settled:?}");
        let states: Vec<State> = r.iter().map(|x| x.1).collect();
        assert_eq!(&states[..4], &[State::NoRef, State::Inc, State::Inc, State::Stable]);
        assert_eq!(states[4], State::Test, "stable at 6 with 10 CPUs free: probe 8");
        assert_eq!(states[10], State::Stable);
    }

    #[test]
    fn the_probe_may_exceed_the_request() {
        // Figure 1: P_STABLE goes to P_TEST with `alloc = current + 2` whenever processors are
        // free; the paper puts no request bound on the probe (it asks whether the program can
        // use more than it settled on). A program requesting 6 that scales perfectly settles at
        // its request, then is probed at 8 on a 16-CPU machine; outside P_TEST it is held to 6.
        let r = drive(16, 6, |c| c as f64 * 0.9, 8);
        let counts: Vec<u32> = r.iter().map(|x| x.0).collect();
        // Each probe at 8 is efficient, but outside P_TEST the request bounds it again; the next probe
        // follows one quantum later, up to `tests` (3) probes.
        assert_eq!(counts, vec![4, 6, 6, 6, 8, 6, 8, 6]);
        assert_eq!(r[4].1, State::Test, "the probe above the request is P_TEST's");
        assert!(r.iter().all(|&(c, s, _)| c <= 6 || s == State::Test), "{r:?}");
    }

    #[test]
    fn a_settled_program_returns_to_its_size_after_an_io_phase() {
        // ltomcatv (paper 000 §6.4): 1 CPU for an I/O phase, then 32 again. Once stable, the
        // program gets its stable size back as soon as it asks for 32 again, without a new search.
        let t = Topology::flat(64);
        let mut pdpa = Pdpa { base: 4, step: 2, min_eff: 0.7, tests: 0, programs: HashMap::new(), settled: false };
        let mut progs = vec![Program::new(1, "ltomcatv", 32)];
        let curve = |c: u32| if c <= 8 { c as f64 * 0.9 } else { 6.5 };
        let mut d = Decision::default();
        let mut counts = Vec::new();
        for q in 0..12 {
            let request = if (6..8).contains(&q) { 1 } else { 32 };
            progs[0].request = crate::program::Request { wanted: request, min: 1, max: 32 };
            let view = View { now: q, quantum: 1, topology: &t, cpus: 64, programs: &progs };
            d.reset(1);
            pdpa.decide(&view, &mut d);
            let count = d.allocations[0].count;
            counts.push(count);
            progs[0].speedup = SpeedupReport::new(count, curve(count)).filter(|_| request > 1);
        }
        // 4 → 6 → 8 → 10 (inefficient) → stable at 8; I/O at 1; back at 8 at once.
        assert_eq!(counts, vec![4, 6, 8, 10, 8, 8, 1, 1, 8, 8, 8, 8]);
        assert_eq!(pdpa.state(ProgramId(1)), Some(State::Stable));
    }

    #[test]
    fn a_search_capped_by_the_request_settles() {
        // step 2 from 5 overshoots a request of 6: the search holds at 6 and settles there.
        let t = Topology::flat(16);
        let mut pdpa = Pdpa { base: 5, step: 2, min_eff: 0.7, tests: 0, programs: HashMap::new(), settled: false };
        let mut progs = vec![Program::new(1, "app", 6)];
        let mut d = Decision::default();
        for q in 0..5 {
            let view = View { now: q, quantum: 1, topology: &t, cpus: 16, programs: &progs };
            d.reset(1);
            pdpa.decide(&view, &mut d);
            let count = d.allocations[0].count;
            assert!(count <= 6);
            progs[0].speedup = SpeedupReport::new(count, count as f64 * 0.9);
        }
        assert_eq!((d.allocations[0].count, pdpa.state(ProgramId(1))), (6, Some(State::Stable)));
    }

    #[test]
    fn a_badly_scaling_program_shrinks_until_efficient() {
        // Efficiency 0.5 on 4, 0.9 on 2.
        let r = drive(16, 16, |c| if c >= 4 { c as f64 * 0.5 } else { c as f64 * 0.9 }, 3);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![4, 2, 2]);
        assert_eq!(r[1].1, State::Dec);
    }

    /// The MPL advice of one decision on `cpus` flat CPUs (defaults, no probes).
    fn advice(cpus: u32, progs: &[Program]) -> Option<u32> {
        let t = Topology::flat(cpus);
        let mut p = crate::policies::build("pdpa:tests=0").unwrap();
        let view = View { now: 0, quantum: 1, topology: &t, cpus, programs: progs };
        let mut d = Decision::default();
        d.reset(progs.len());
        p.decide(&view, &mut d);
        d.mpl_advice
    }

    /// A rigid program of `procs` processes.
    fn rigid(id: u64, procs: u32) -> Program {
        let mut p = Program::new(id, format!("r{id}"), procs);
        p.kind = crate::program::Kind::Rigid(procs);
        p
    }

    #[test]
    fn the_mpl_advice_counts_rigid_programs() {
        // One rigid job of 2 on 8 CPUs: it runs, 6 CPUs are free, room for one more at base 4.
        // (Counting only the malleable programs advised 0 + 6/4 = 1: rigid jobs ran one at a time.)
        assert_eq!(advice(8, &[rigid(1, 2)]), Some(2));
        // Two rigid jobs of 2 and a malleable one at base 4: every CPU in use, nobody more.
        assert_eq!(advice(8, &[rigid(1, 2), rigid(2, 2), Program::new(3, "m", 8)]), Some(3));
        // A rigid job of 6 waits behind one of 4 (it does not fit): it still counts as admitted,
        // and the 4 free CPUs make room for one more at base.
        assert_eq!(advice(8, &[rigid(1, 4), rigid(2, 6)]), Some(3));
        // Oversubscribed: the rigid job that runs and the malleable ones that fit at base.
        assert_eq!(advice(8, &[rigid(1, 4), Program::new(2, "a", 8), Program::new(3, "b", 8)]), Some(2));
    }

    #[test]
    fn advises_a_higher_mpl_when_cpus_go_unused() {
        let t = Topology::flat(32);
        let progs = crate::policies::testing::programs(&[16, 16]);
        let mut p = crate::policies::build("pdpa:tests=0").unwrap();
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 32, programs: &progs };
        let mut d = Decision::default();
        d.reset(2);
        p.decide(&view, &mut d);
        // Two programs at base 4 leave 24 CPUs: room for six more at base.
        assert_eq!(d.mpl_advice, Some(8));
    }
}
