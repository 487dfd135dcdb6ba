//! The sliding-window time-shared DSS policies (paper 000 §4.3), which differ only in how the
//! window moves from one quantum to the next: SW-DSS jumps to the program after the window,
//! SSW-DSS drops the window's first program and refills.

use super::dss::dss_shares;
use super::window::{next_id, window, RotationMemo};
use crate::params::{ParamError, ParamKind, ParamSpec, Params};
use crate::policy::{Decision, Policy, Rotation, SimHints, View};
use crate::program::ProgramId;

/// Parameters shared by the sliding-window policies.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "k",
        help: "a gang's requests add up to at most k × P",
        kind: ParamKind::Float { default: 1.0, min: 0.01, max: 64.0 },
    },
    super::ADMIT,
];

/// How the window advances each quantum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// To the program after the window (SW-DSS).
    Window,
    /// To the program after the window's first (SSW-DSS).
    Program,
}

impl Step {
    /// Picks the member of a window (indices in window order) the next window starts after.
    pub fn advance(self) -> fn(&[usize]) -> usize {
        match self {
            Step::Window => |m| m[m.len() - 1],
            Step::Program => |m| m[0],
        }
    }
}

/// The most CPUs a gang's requests may add up to: `k × P`, at least 1.
pub fn limit(k: f64, view: &View) -> u64 {
    (k * view.cpus as f64).floor().max(1.0) as u64
}

/// A sliding-window DSS policy.
#[derive(Debug, Clone)]
pub struct Sliding {
    name: &'static str,
    step: Step,
    k: f64,
    quantum: Option<crate::program::Nanos>,
    admit: Option<u32>,
    /// Where this quantum's window starts, and where the next quantum's will.
    current: ProgramId,
    start: ProgramId,
    memo: RotationMemo,
}

impl Sliding {
    /// A policy named `name` advancing by `step`, with gangs of at most `k × P` requested CPUs,
    /// its [`PARAMS`] read from `p` and, if given, a preferred quantum.
    pub fn build(
        name: &'static str,
        step: Step,
        p: &Params,
        quantum: Option<crate::program::Nanos>,
    ) -> Result<Box<dyn SimHints>, ParamError> {
        let (k, admit) = (p.float("k")?, super::admission(p.u32("admit")?));
        Ok(Box::new(Sliding {
            name,
            step,
            k,
            quantum,
            admit,
            current: ProgramId(0),
            start: ProgramId(0),
            memo: RotationMemo::default(),
        }))
    }

    /// Runs this quantum's window, from where it starts, with DSS shares; its members (view
    /// indices), or `None` when nobody runs.
    fn run_window(&self, view: &View, out: &mut Decision) -> Option<Vec<usize>> {
        let members = window(view, self.current, limit(self.k, view));
        if members.is_empty() {
            return None;
        }
        dss_shares(view, &members, view.cpus, out);
        Some(members)
    }
}

impl Policy for Sliding {
    fn name(&self) -> &'static str {
        self.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        self.current = self.start;
        if let Some(members) = self.run_window(view, out) {
            self.start = next_id(view, self.step.advance()(&members));
        }
    }

    fn refit(&mut self, view: &View, out: &mut Decision) {
        // Where the next window starts was set at the boundary: programs a refit brings into
        // this window (one of it left) still have their own quantum next.
        self.run_window(view, out);
    }

    fn time_sharing(&self) -> bool {
        true
    }
}

impl SimHints for Sliding {
    fn preferred_quantum(&self) -> Option<crate::program::Nanos> {
        self.quantum
    }

    fn preferred_mpl(&self) -> Option<u32> {
        self.admit
    }

    fn rotation(&self, view: &View, max: u32) -> Option<Rotation> {
        self.memo.rotation(view, self.start, limit(self.k, view), self.step.advance(), max)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::policies;
    use crate::policy::{Decision, Policy, View};
    use crate::program::Program;
    use crate::topology::Topology;

    /// Decides one quantum of `policy` (kept between calls, so a test can change the programs'
    /// requests between quanta) on `cpus` flat CPUs; each program's count, 0 when it does not run.
    pub(crate) fn step(policy: &mut dyn Policy, cpus: u32, progs: &[Program]) -> Vec<u32> {
        let t = Topology::flat(cpus);
        let view = View { now: 0, quantum: 1, topology: &t, cpus, programs: progs };
        let mut d = Decision::default();
        d.reset(progs.len());
        policy.decide(&view, &mut d);
        d.allocations.iter().map(|a| a.granted()).collect()
    }

    /// One step of `policy` on `cpus` flat CPUs: a decision at a boundary, else a refit; the
    /// names of the programs that run.
    pub(crate) fn runners(policy: &mut dyn Policy, cpus: u32, progs: &[Program], boundary: bool) -> Vec<String> {
        let t = Topology::flat(cpus);
        let view = View { now: 0, quantum: 1, topology: &t, cpus, programs: progs };
        let mut d = Decision::default();
        d.reset(progs.len());
        policy.decide_at(boundary, &view, &mut d);
        progs.iter().zip(&d.allocations).filter(|(_, a)| a.running).map(|(p, _)| p.name.to_string()).collect()
    }

    /// Runs `quanta` quanta of `spec` and returns, per quantum, the names of the running
    /// programs with their counts.
    pub(crate) fn running(spec: &str, cpus: u32, progs: &[Program], quanta: usize) -> Vec<Vec<(String, u32)>> {
        let t = Topology::flat(cpus);
        let mut p = policies::build(spec).unwrap();
        let mut d = Decision::default();
        (0..quanta)
            .map(|q| {
                let view = View { now: q as u64, quantum: 1, topology: &t, cpus, programs: progs };
                d.reset(progs.len());
                p.decide(&view, &mut d);
                progs
                    .iter()
                    .zip(&d.allocations)
                    .filter(|(_, a)| a.running)
                    .map(|(p, a)| (p.name.to_string(), a.count))
                    .collect()
            })
            .collect()
    }
}
