//! What both engines (the managed one in `engine/`, processor sharing in `sharing.rs`) share
//! besides the jobs' feed (`feed.rs`): the run's bookkeeping ([`Tally`]): job ids,
//! arrivals and exits with their trace events, the job records streamed to the observer, the
//! CPU-second sums and the end-of-run summary.

use std::time::Instant;

use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{Nanos, ProgramId};

use crate::error::SimError;
use crate::job::JobSpec;
use crate::limits::{seconds, HORIZON};
use crate::metrics::{Accumulator, JobRecord, RunSummary, RunTotals, BOUNDED_SLOWDOWN_TAU};
use crate::observer::Observer;

const NS: f64 = 1e9;

/// What a job received over its life, for its [`JobRecord`].
pub(crate) struct Ran {
    /// When it first ran.
    pub first_run: Option<Nanos>,
    /// Time it held CPUs.
    pub run_ns: Nanos,
    /// CPU-seconds it held.
    pub busy: f64,
    /// CPUs it gained that it had not held.
    pub moves: u64,
    /// Its run time alone on the machine, seconds.
    pub dedicated: f64,
}

impl Ran {
    /// The record of job `id` (`spec`, arrived at `arrival`) that ended at `end`. The record
    /// takes the job's name and class: the job has left, so they are moved, not copied.
    fn record(&self, id: u64, spec: &mut JobSpec, arrival: Nanos, end: Nanos) -> JobRecord {
        let turnaround = seconds(end - arrival);
        let start = self.first_run.unwrap_or(end);
        let dedicated = self.dedicated;
        JobRecord {
            id,
            name: std::mem::take(&mut spec.name),
            class: std::mem::take(&mut spec.class),
            arrival: seconds(arrival),
            response: seconds(start - arrival),
            wait: (turnaround - seconds(self.run_ns)).max(0.0),
            run: seconds(end - start),
            turnaround,
            dedicated,
            slowdown: if dedicated > 0.0 { turnaround / dedicated } else { 1.0 },
            bounded_slowdown: (turnaround / dedicated.max(BOUNDED_SLOWDOWN_TAU)).max(1.0),
            cpu_seconds: self.busy,
            moves: self.moves,
        }
    }
}

/// A run's bookkeeping: ids, events, sums, the observer.
pub(crate) struct Tally<'o> {
    obs: &'o mut dyn Observer,
    /// Whether the observer wants trace events.
    pub trace: bool,
    /// CPUs of the machine.
    pub cpus: u32,
    acc: Accumulator,
    next_id: u64,
    /// Events processed (see docs/EXPERIMENTS.md, Speed).
    pub events: u64,
    /// CPU-seconds held by jobs.
    pub busy: f64,
    /// CPU-seconds left idle while a job waited.
    pub frag: f64,
    /// Quanta skipped (proved to change nothing).
    pub skipped: u64,
    first_arrival: Option<Nanos>,
    last_end: Nanos,
}

impl<'o> Tally<'o> {
    /// Whether the observer asks the run to stop ([`Observer::stop`]).
    pub fn stop(&self) -> bool {
        self.obs.stop()
    }

    /// The bookkeeping of a run on `cpus` CPUs reporting to `obs`.
    pub fn new(cpus: u32, obs: &'o mut dyn Observer) -> Self {
        let trace = obs.wants_events();
        Tally {
            obs,
            trace,
            cpus,
            acc: Accumulator::default(),
            next_id: 1,
            events: 0,
            busy: 0.0,
            frag: 0.0,
            skipped: 0,
            first_arrival: None,
            last_end: 0,
        }
    }

    /// Hands a trace event at `t` to the observer.
    pub fn emit(&mut self, t: Nanos, program: Option<ProgramId>, kind: EventKind) {
        self.obs.event(&Event { t, program, kind });
    }

    /// Accounts `dt_ns` of time with `held` CPUs held, and the CPUs left idle if a job
    /// `waited` meanwhile.
    pub fn account(&mut self, dt_ns: Nanos, held: f64, waited: bool) {
        let dt = seconds(dt_ns);
        self.busy += held * dt;
        if waited {
            self.frag += (self.cpus as f64 - held).max(0.0) * dt;
        }
    }

    /// Takes in a job arriving at `now` (its arrival moved up to now if it was listed late), which
    /// was checked against the machine (`feed.rs`): numbers it, counts the event and traces it.
    /// Returns its id (the job is changed in place: it is large, and moved once, into its queue).
    pub fn arrive(&mut self, j: &mut JobSpec, now: Nanos) -> ProgramId {
        j.arrival = j.arrival.max(now);
        self.first_arrival.get_or_insert(j.arrival);
        let id = ProgramId(self.next_id);
        self.next_id += 1;
        self.events += 1;
        if self.trace {
            let kind = EventKind::Arrive { name: j.name.to_string(), request: j.request_in(0).wanted };
            self.emit(now, Some(id), kind);
        }
        id
    }

    /// Job `id` (`spec`, arrived at `arrival`) ended at `end` having received `ran`: traces its
    /// exit and streams its record to the observer and into the run's sums. The record takes
    /// the spec's name and class ([`Ran::record`]).
    pub fn finish(&mut self, id: ProgramId, spec: &mut JobSpec, arrival: Nanos, ran: &Ran, end: Nanos) {
        self.last_end = self.last_end.max(end);
        let record = ran.record(id.0, spec, arrival, end);
        if self.trace {
            self.emit(end, Some(id), EventKind::Exit { status: Some(0) });
        }
        self.obs.job(&record);
        self.acc.add(&record);
    }

    /// An error if `t` is past the simulator's horizon, with `jobs` unfinished.
    pub fn within_horizon(t: Nanos, jobs: usize) -> Result<(), SimError> {
        if t > HORIZON {
            return Err(SimError::Horizon { at: t as f64 / NS, jobs });
        }
        Ok(())
    }

    /// The run's figures, under the policy named `policy` with admission limit `mpl`, for a run
    /// started at `started`.
    pub fn summary(self, policy: &str, mpl: u32, started: Instant) -> RunSummary {
        let makespan = self.first_arrival.map_or(0.0, |f| seconds(self.last_end.saturating_sub(f)));
        self.acc.finish(RunTotals {
            policy: policy.to_string(),
            cpus: self.cpus,
            events: self.events,
            makespan,
            busy_cpu_seconds: self.busy,
            fragmented_cpu_seconds: self.frag,
            skipped_quanta: self.skipped,
            mpl,
            wall_seconds: started.elapsed().as_secs_f64(),
        })
    }
}
