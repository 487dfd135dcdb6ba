//! The job model: a job arrives at a time, has a kind (how its parallelism can change), and runs
//! a list of phases, each with an amount of work in CPU-seconds (its run time on one CPU), the
//! CPUs it wants while in that phase, and a speedup model.
//!
//! Request changes come from the phases: a malleable or evolving job asks for each phase's CPUs
//! (1 in a serial phase: the cooperative runtime gives CPUs back), a rigid or moldable job keeps
//! its request for its whole life. [`epd`] and [`ltomcatv`] build the evolving patterns of paper
//! 000.

use std::ops::Deref;
use std::sync::Arc;

use cpumgr_core::{Kind, Name, Nanos, Request};

use crate::speedup::SpeedupModel;

/// One phase of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Work in CPU-seconds: the phase's run time on one CPU.
    pub work: f64,
    /// CPUs the phase can use (and a malleable or evolving job asks for while in it).
    pub request: u32,
    /// How the phase speeds up with CPUs.
    pub speedup: SpeedupModel,
}

/// The share of a phase's work the simulator leaves undone ([`Phase::simulated_work`]): far above
/// the rounding of a long job's progress (about 1e-12 of its work after millions of quanta, or a
/// fast-forward over them), far below anything a job does (9 µs of a job that runs for a day).
const DONE_FRACTION: f64 = 1e-10;

impl Phase {
    /// The work the simulator runs for this phase: all but [`DONE_FRACTION`] of it. Its progress
    /// is a sum over many spans, or a fast-forward's product, and either rounds; an end that
    /// exact arithmetic puts on a quantum boundary (or at a time-shared slice's end) then fell a
    /// few nanoseconds before or after that decision as the rounding went, and a fast-forwarded
    /// run and a quantum-by-quantum one scheduled differently from there. Every engine, and the dedicated time a slowdown divides by,
    /// run this much.
    pub(crate) fn simulated_work(&self) -> f64 {
        self.work * (1.0 - DONE_FRACTION)
    }

    /// A serial phase of `work` seconds: wants one CPU and gains nothing from more.
    pub fn serial(work: f64) -> Phase {
        Phase { work, request: 1, speedup: SpeedupModel::SERIAL }
    }

    /// A parallel phase of `work` CPU-seconds that can use `request` CPUs.
    pub fn parallel(work: f64, request: u32, speedup: SpeedupModel) -> Phase {
        Phase { work, request, speedup }
    }
}

/// A job's phases, run in order. Most jobs (every generated or traced one) have a single phase:
/// it is held in place, so building and dropping such a job allocates nothing for it. Reads and
/// changes of a phase go through the slice ([`Deref`], [`std::ops::DerefMut`]); a job's number of
/// phases is set when it is built. Written here rather than as `smallvec`'s `SmallVec<[Phase; 1]>`,
/// which cost the events benchmark 2 % more instructions (2.5 % without its `union` feature:
/// 1.0267 G against 1.0473 G and 1.0524 G, `valgrind --tool=cachegrind` of the `--bench` events
/// workload).
#[derive(Clone)]
pub struct Phases(Held);

/// Where [`Phases`] keeps its phases.
#[derive(Clone)]
enum Held {
    One(Phase),
    Many(Vec<Phase>),
}

impl Deref for Phases {
    type Target = [Phase];

    fn deref(&self) -> &[Phase] {
        match &self.0 {
            Held::One(p) => std::slice::from_ref(p),
            Held::Many(v) => v,
        }
    }
}

impl std::ops::DerefMut for Phases {
    fn deref_mut(&mut self) -> &mut [Phase] {
        match &mut self.0 {
            Held::One(p) => std::slice::from_mut(p),
            Held::Many(v) => v,
        }
    }
}

impl<'a> IntoIterator for &'a Phases {
    type Item = &'a Phase;
    type IntoIter = std::slice::Iter<'a, Phase>;

    /// The phases in order, as a `Vec`'s reference iterates (`for p in &job.phases`).
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Phase> for Phases {
    fn from(p: Phase) -> Phases {
        Phases(Held::One(p))
    }
}

impl From<Vec<Phase>> for Phases {
    fn from(v: Vec<Phase>) -> Phases {
        Phases(Held::Many(v))
    }
}

impl FromIterator<Phase> for Phases {
    fn from_iter<I: IntoIterator<Item = Phase>>(phases: I) -> Phases {
        Phases(Held::Many(phases.into_iter().collect()))
    }
}

impl PartialEq for Phases {
    fn eq(&self, other: &Phases) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A job of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Its name (trace and per-job results).
    pub name: Name,
    /// Its class (benchmark name): the unit of the per-class CV and of paper tables. Shared:
    /// the jobs of a class (every job of a generator) hold one string.
    pub class: Arc<str>,
    /// When it is submitted.
    pub arrival: Nanos,
    /// How its parallelism can change.
    pub kind: Kind,
    /// Most CPUs it can use (its request when it starts).
    pub request: u32,
    /// Fewest CPUs it can run on.
    pub min: u32,
    /// Relative share under weighted policies.
    pub weight: f64,
    /// How much it synchronises, 0 (independent threads) to 1 (barrier-heavy, communication-bound):
    /// scales the cost of running more threads than CPUs ([`crate::cost::CostModel`]).
    pub sync: f64,
    /// Whether it reports measured speedups (paper 000's SelfAnalyzer), which PDPA needs.
    pub reports_speedup: bool,
    /// Its phases, run in order.
    pub phases: Phases,
}

impl JobSpec {
    /// A malleable job of one parallel phase.
    pub fn malleable(name: impl Into<Name>, arrival: Nanos, request: u32, work: f64, speedup: SpeedupModel) -> JobSpec {
        let name = name.into();
        JobSpec {
            class: name.as_str().into(),
            name,
            arrival,
            kind: Kind::Malleable,
            request,
            min: 1,
            weight: 1.0,
            sync: 0.5,
            reports_speedup: true,
            phases: Phase::parallel(work, request, speedup).into(),
        }
    }

    /// A rigid job of `procs` processes and one parallel phase.
    pub fn rigid(name: impl Into<Name>, arrival: Nanos, procs: u32, work: f64, speedup: SpeedupModel) -> JobSpec {
        JobSpec { kind: Kind::Rigid(procs), min: procs, ..JobSpec::malleable(name, arrival, procs, work, speedup) }
    }

    /// The same job with synchronisation intensity `sync`.
    pub fn with_sync(mut self, sync: f64) -> JobSpec {
        self.sync = sync;
        self
    }

    /// What the job asks for while in phase `phase`.
    pub fn request_in(&self, phase: usize) -> Request {
        let wanted = match self.kind {
            Kind::Malleable | Kind::Evolving => {
                self.phases.get(phase).map_or(self.request, |p| p.request.min(self.request))
            }
            Kind::Moldable | Kind::Rigid(_) => self.request,
        };
        Request { wanted: wanted.max(self.min.min(wanted.max(1))), min: self.min.min(self.request), max: self.request }
    }

    /// The threads the job runs with no manager (`os`): a rigid job's processes, a malleable or
    /// evolving job's current request, a moldable job's largest team.
    pub fn natural_threads(&self, phase: usize) -> u32 {
        match self.kind {
            Kind::Rigid(n) => n,
            Kind::Moldable => self.request,
            Kind::Malleable | Kind::Evolving => self.request_in(phase).wanted,
        }
        .max(1)
    }

    /// Total work in CPU-seconds.
    pub fn total_work(&self) -> f64 {
        self.phases.iter().map(|p| p.work).sum()
    }

    /// Why the job's arrival is past [`crate::limits::MAX_SECONDS`], as (field, message).
    pub fn check_arrival(&self) -> Result<(), (&'static str, String)> {
        if self.arrival > crate::limits::MAX_NANOS {
            let s = self.arrival as f64 / 1e9;
            return Err((
                "arrival",
                format!("{s} s is beyond the simulator's limit of {:e} s", crate::limits::MAX_SECONDS),
            ));
        }
        Ok(())
    }

    /// Why the job cannot run on `cpus` CPUs, as (field, message).
    #[inline]
    pub fn check(&self, cpus: u32) -> Result<(), (&'static str, String)> {
        self.check_arrival()?;
        if self.request == 0 {
            return Err(("request", "a job needs at least one CPU".into()));
        }
        if self.request > cpus {
            return Err(("request", format!("the job wants {} CPUs but the machine has {cpus}", self.request)));
        }
        if let Kind::Rigid(n) = self.kind {
            if n == 0 || n > cpus {
                return Err(("procs", format!("{n} processes do not fit the machine's {cpus} CPUs")));
            }
        }
        if self.min > self.request {
            return Err(("min", format!("min {} is above the request {}", self.min, self.request)));
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(("weight", format!("{} is not a positive number", self.weight)));
        }
        if !(0.0..=1.0).contains(&self.sync) {
            return Err(("sync", format!("{} is not between 0 and 1", self.sync)));
        }
        if self.phases.is_empty() {
            return Err(("phases", "a job needs at least one phase (give `work`)".into()));
        }
        for p in self.phases.iter() {
            if !(p.work.is_finite() && p.work >= 0.0) {
                return Err(("work", format!("{} is not a non-negative number of CPU-seconds", p.work)));
            }
            if p.request == 0 {
                return Err(("request", "a phase needs at least one CPU".into()));
            }
            p.speedup.check().map_err(|m| ("speedup", m))?;
        }
        Ok(())
    }
}

/// Paper 000's EPD pattern: iterations asking 2, 4, …, `max`, `max`, …, 4, 2 CPUs (a diamond),
/// each with `work` CPU-seconds of embarrassingly parallel work.
pub fn epd(max: u32, work: f64, speedup: &SpeedupModel) -> Vec<Phase> {
    let max = max.max(2);
    let up: Vec<u32> = (1..=max / 2).map(|k| 2 * k).collect();
    up.iter().chain(up.iter().rev()).map(|&r| Phase::parallel(work, r, speedup.clone())).collect()
}

/// Paper 000's ltomcatv pattern: `iterations` × (a serial I/O phase of `io` seconds on one CPU,
/// then a parallel phase of `work` CPU-seconds asking `max`).
pub fn ltomcatv(max: u32, iterations: u32, io: f64, work: f64, speedup: &SpeedupModel) -> Vec<Phase> {
    (0..iterations).flat_map(|_| [Phase::serial(io), Phase::parallel(work, max, speedup.clone())]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epd_is_a_diamond() {
        let r: Vec<u32> = epd(8, 1.0, &SpeedupModel::LINEAR).iter().map(|p| p.request).collect();
        assert_eq!(r, vec![2, 4, 6, 8, 8, 6, 4, 2]);
    }

    #[test]
    fn ltomcatv_alternates_io_and_parallel() {
        let p = ltomcatv(32, 2, 0.5, 10.0, &SpeedupModel::LINEAR);
        assert_eq!(p.iter().map(|p| p.request).collect::<Vec<_>>(), vec![1, 32, 1, 32]);
        assert_eq!(p[0].speedup, SpeedupModel::SERIAL);
    }

    #[test]
    fn phases_read_and_change_as_a_slice_whether_one_or_many() {
        let mut one: Phases = Phase::serial(2.0).into();
        let mut many: Phases = vec![Phase::serial(1.0), Phase::serial(3.0)].into();
        for phases in [&mut one, &mut many] {
            phases[0].work = 5.0;
            assert_eq!((&*phases).into_iter().next().map(|p| p.work), Some(5.0));
        }
        assert_eq!((&many).into_iter().map(|p| p.work).collect::<Vec<_>>(), vec![5.0, 3.0]);
        let again: Phases = vec![Phase::serial(5.0)].into();
        assert_eq!(one, again, "equal phases compare equal however they are held");
    }

    #[test]
    fn requests_follow_the_kind() {
        let mut j = JobSpec::malleable("a", 0, 8, 1.0, SpeedupModel::LINEAR);
        j.phases = ltomcatv(8, 1, 1.0, 1.0, &SpeedupModel::LINEAR).into();
        assert_eq!(j.request_in(0).wanted, 1, "a malleable job gives CPUs back in a serial phase");
        assert_eq!(j.request_in(1).wanted, 8);
        j.kind = Kind::Moldable;
        assert_eq!(j.request_in(0).wanted, 8, "a moldable job keeps its request");
        let r = JobSpec::rigid("r", 0, 16, 1.0, SpeedupModel::LINEAR);
        assert_eq!(r.natural_threads(0), 16);
        assert!(r.check(8).is_err(), "16 processes on 8 CPUs is refused");
        assert!(r.check(16).is_ok());
    }
}
