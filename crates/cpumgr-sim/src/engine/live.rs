//! A job in the managed engine: its record (progress, rate, the CPUs it holds, what it received),
//! brought up to date at its own events or at every step.

use std::collections::VecDeque;

use cpumgr_core::{Kind, Nanos, ProgramId};

use super::ends::end_nanos;
use super::NS;
use crate::job::JobSpec;

/// Progress counters of one job at one boundary, for fast-forwarding.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Snap {
    pub(super) done: f64,
    pub(super) run_ns: Nanos,
    pub(super) busy: f64,
    pub(super) moves: u64,
    /// Stall still to serve (a program resumed or moved late in a quantum carries some over the
    /// boundary): a jump needs it to be where it was a period before.
    pub(super) stall: f64,
}

/// What the step's walks over every job read of it, kept beside its record ([`crate::slots::Slots`]) in one
/// dense list: a long backlog's walk reads a few bytes a job, and a removal moves them with the
/// slot numbers in one pass.
#[derive(Debug, Clone, Copy)]
pub(super) struct Beside {
    /// The CPUs it ran on in the last quantum (0 if it did not run): the step's pass over the
    /// decision compares each count with it and reads nothing else.
    pub(super) held: u32,
    /// [`Live::idle`].
    pub(super) idle: bool,
}

/// A job in the system.
#[derive(Debug)]
pub(super) struct Live {
    /// Its program's id (its record's slot is reused once it has left).
    pub(super) id: u64,
    pub(super) spec: JobSpec,
    /// Whether it is still in the system (finished jobs leave at the next step).
    pub(super) alive: bool,
    /// The time its progress was last brought up to date.
    pub(super) at: Nanos,
    pub(super) phase: usize,
    pub(super) remaining: f64,
    pub(super) rate: f64,
    pub(super) stall: f64,
    pub(super) done_at: Nanos,
    /// CPUs held: its placed count while it runs, 0 while it does not.
    pub(super) held: u32,
    pub(super) threads: f64,
    pub(super) team: Option<u32>,
    pub(super) first_run: Option<Nanos>,
    pub(super) ran_last: bool,
    pub(super) run_ns: Nanos,
    pub(super) busy: f64,
    pub(super) moves: u64,
    pub(super) done: f64,
    pub(super) dedicated: f64,
    pub(super) q_work: f64,
    pub(super) q_time: f64,
    pub(super) hist: VecDeque<Snap>,
    /// Its part of the schedule's signature while it runs ([`super::fast_forward::signature`] of its id, count and
    /// CPUs), computed when its CPUs change, for the fast-forward (not kept without it).
    pub(super) sig: u64,
    /// Its kind (the description's), kept beside the counters for the step's walk.
    pub(super) kind: Kind,
    /// Whether it reports speedups in its current phase (the job does, and the phase can use
    /// more than one CPU), kept beside the counters so that the step does not read the phase.
    pub(super) reports: bool,
}

impl Snap {
    /// Adds `gain` (whole periods' progress) to these counters.
    pub(super) fn advance(&mut self, gain: &Snap) {
        self.done += gain.done;
        self.run_ns += gain.run_ns;
        self.busy += gain.busy;
        self.moves += gain.moves;
    }
}

impl Live {
    /// The record of job `id` (`spec`), arrived and waiting for admission, which sets when its
    /// progress starts. `dedicated` is its run time alone on the machine.
    pub(super) fn new(id: ProgramId, spec: JobSpec, dedicated: f64) -> Live {
        Live {
            id: id.0,
            alive: true,
            at: 0,
            phase: 0,
            remaining: spec.phases[0].simulated_work(),
            rate: 0.0,
            stall: 0.0,
            done_at: Nanos::MAX,
            held: 0,
            threads: 0.0,
            team: None,
            first_run: None,
            ran_last: false,
            run_ns: 0,
            busy: 0.0,
            moves: 0,
            done: 0.0,
            dedicated,
            q_work: 0.0,
            q_time: 0.0,
            hist: VecDeque::new(),
            sig: 0,
            reports: reports_in(&spec, 0),
            kind: spec.kind,
            spec,
        }
    }

    /// Adds `gain` (whole periods' progress) to its counters.
    pub(super) fn advance(&mut self, gain: &Snap) {
        let mut s = self.snap();
        s.advance(gain);
        (self.done, self.run_ns, self.busy, self.moves) = (s.done, s.run_ns, s.busy, s.moves);
    }

    /// Starts its current phase: all of the phase's work is to do, and whether it reports
    /// speedups follows the phase.
    pub(super) fn start_phase(&mut self) {
        self.remaining = self.spec.phases[self.phase].simulated_work();
        self.reports = reports_in(&self.spec, self.phase);
    }

    /// Records whether it runs this quantum. A job that stops drops the stall it has not served
    /// yet: the cache it was warming is gone when it runs again, which costs the resume anew
    /// ([`crate::CostModel::resume_ms`]), so a stall never outlasts the slice it was paid in (slices
    /// shorter than the resume cost make no progress, and leave no debt for later slices).
    pub(super) fn set_running(&mut self, running: bool) {
        if self.ran_last && !running {
            self.stall = 0.0;
        }
        self.ran_last = running;
    }

    pub(super) fn snap(&self) -> Snap {
        Snap { done: self.done, run_ns: self.run_ns, busy: self.busy, moves: self.moves, stall: self.stall }
    }

    /// Whether it has never run and has work to do: nothing about it can change at a step unless
    /// the decision runs it (its view fields are written on admission and at phase changes, and
    /// its usage figures are zero). Its progress counters are all zero, so its history (for the
    /// fast-forward) is a run of zero snapshots and need not be kept. A backlog of waiting jobs
    /// then costs the step almost nothing.
    pub(super) fn idle(&self) -> bool {
        self.first_run.is_none() && self.remaining > 0.0
    }

    /// Its progress counters now and `p` quanta ago. A job that has not been seen for that long
    /// was idle then (its counters were zero).
    pub(super) fn period_ends(&self, p: usize) -> (Snap, Snap) {
        let n = self.hist.len();
        let now = self.hist.back().copied().unwrap_or_default();
        (now, if n > p { self.hist[n - 1 - p] } else { Snap::default() })
    }

    /// Brings its progress up to `t` (rates are constant between its events), converting the
    /// time passed with `seconds`.
    pub(super) fn progress(&mut self, t: Nanos, seconds: &mut Seconds) {
        if t <= self.at {
            return;
        }
        let dt_ns = t - self.at;
        self.at = t;
        if self.held == 0 {
            return;
        }
        let dt = seconds.of(dt_ns);
        let mut d = dt;
        if self.stall > 0.0 {
            let s = self.stall.min(d);
            self.stall -= s;
            d -= s;
        }
        let w = self.rate * d;
        self.remaining -= w;
        self.done += w;
        self.q_work += w;
        self.q_time += dt;
        self.run_ns += dt_ns;
        self.busy += f64::from(self.held) * dt;
    }

    pub(super) fn set_done_at(&mut self, now: Nanos) {
        // A job that is not alive is past its last phase.
        self.done_at = if !self.alive || self.remaining <= 0.0 {
            now
        } else if self.rate > 0.0 {
            now.saturating_add(end_nanos((self.stall + self.remaining / self.rate) * NS))
        } else {
            Nanos::MAX
        };
    }
}

/// Converts nanoseconds to seconds, remembering the last conversion: at a step every running job
/// has progressed by the same span (a quantum), and the division was the longest part of the
/// step's walk over the jobs. The result is the division's, bit for bit.
#[derive(Debug, Default)]
pub(super) struct Seconds {
    pub(super) ns: Nanos,
    pub(super) secs: f64,
}

impl Seconds {
    /// `ns` in seconds.
    pub(super) fn of(&mut self, ns: Nanos) -> f64 {
        if ns != self.ns {
            self.ns = ns;
            self.secs = crate::limits::seconds(ns);
        }
        self.secs
    }
}

/// Whether `spec` reports speedups in phase `phase`: it does, and the phase can use more than one
/// CPU (a speedup on one CPU says nothing).
fn reports_in(spec: &JobSpec, phase: usize) -> bool {
    spec.reports_speedup && spec.phases[phase].request > 1
}
