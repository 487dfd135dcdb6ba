//! The discrete-event engine.
//!
//! Events are arrivals, phase changes (which change a job's request), completions, quantum ticks
//! and policy wake-ups ([`cpumgr_core::Decision::wake_at`]). At equal times they are handled in
//! that order — completions, arrivals, admissions, then the scheduler — and within each kind in
//! job-id order, so a run is a pure function of its inputs.
//!
//! At each tick the engine builds the [`View`] the live manager would build: per program its
//! request (from its current phase), kind, weight, CPU time received, newest speedup report (the
//! work it did per second in the last quantum, for the CPUs it held), its CPU set, whether it ran,
//! and its thread count. It then runs the policy and the [`Placer`] — the same code as the live
//! manager — and sets every job's progress rate from its speedup model and the
//! [`CostModel`]. Work at a tick follows the jobs whose allocation changes: an unchanged one
//! keeps its rate and end, and, when neither the policy ([`cpumgr_core::SimHints::reads_usage`])
//! nor the snapshot fast-forward of a time-sharing policy's schedule (below) needs the
//! per-quantum usage figures, its progress is brought up to date only at its own events. An
//! `os` policy ([`cpumgr_core::Policy::oversubscribes`]) is not placed and not ticked: every job
//! runs its threads on every CPU, shared in proportion to its threads, and the run goes to a
//! processor-sharing model with virtual clocks (`sharing.rs`).
//!
//! **Records.** The program list the policy sees is in id order and loses the finished programs
//! at every tick, closing the gaps from whichever side moves fewer programs (`list::List`: with
//! a backlog the oldest programs finish, near the front); each job's record stays in a stable
//! slot (`slots::Slots`), which it gets on arrival (the admission queue holds slots) and which is
//! listed in program order on admission. A phase end carries its job's slot, to tell whether it
//! still applies, and finds the job's position by a binary search of the id-ordered list:
//! admission is first come, first served, so ids increase along the list. What the tick's pass
//! over the decision reads (the CPUs each job holds, whether it is idle) is kept beside each slot
//! number, in the one list that orders them.
//!
//! **Fast-forward.** Long traces span months at a 100 ms quantum. A lazy run (a policy that
//! neither time-shares nor reads usage: every space-sharing policy but PDPA) skips the quanta in
//! which nothing can change: once a schedule was decided at `REPEATS` (3) boundaries in a row,
//! it moves the next tick to the boundary after the next event (`Engine::skip_quiet`), which
//! costs nothing per job and gives the quantum-by-quantum run's results. Other runs take
//! snapshots: when the schedule repeats —
//! the same decision (counts, running flags and CPU sets) with period `p ≤ 32` quanta, three
//! times over, with no event in between — the engine jumps over whole periods, adding each job's
//! progress per period, up to just before the next completion or arrival, and then resumes
//! quantum by quantum. This assumes a policy in a repeating schedule keeps repeating while nothing
//! changes; a policy whose own state still moves says so ([`cpumgr_core::SimHints::settled`]:
//! PDPA while a search moves or probes), and only the schedule since it settled counts; set
//! [`SimConfig::fast_forward`] to `false` for a quantum-by-quantum run. A policy's wake-ups
//! between boundaries (VTQ-DSS's member expiries) count in the next boundary's signature, and a
//! jump moves the pending wake-up and tells the policy ([`cpumgr_core::SimHints::skip`]), so that
//! its absolute times stay at the same point of its rotation.
//!
//! **The jobs' feed.** What a job needs before it arrives (generated or cloned from a trace,
//! checked against the machine, its run time alone worked out) depends on nothing in the run:
//! a second thread does it ahead, in order, in bounded batches (`feed.rs`), and the engine's
//! thread takes the jobs ready. Results are those of the input taken in order.
//!
//! **Decisions brought up to date.** In a lazy run the engine keeps the policy's last decision,
//! takes the finished programs out of it as it takes them out of the list, and asks the policy to
//! bring it up to date for the programs admitted since ([`SimHints::update`]) before deciding afresh:
//! a rigid-first policy whose last decision served every program, all rigid (a trace's jobs, while
//! none waits), serves the newcomers from what the others leave, and the engine compares only the
//! newcomers' counts with what they hold. A quantum then costs the programs that changed, not a
//! pass over every program in the policy, the decision's reset and the engine's scan.
//!
//! **Admission.** Jobs beyond the multiprogramming level ([`SimConfig::mpl`], else the policy's
//! [`cpumgr_core::SimHints::preferred_mpl`]) wait in arrival order and are admitted at ticks.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use cpumgr_core::placer::{validate, PlacementError};
use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{
    Allocation, CpuSet, Decision, Kind, Nanos, Placer, Program, ProgramId, Rotation, SimHints, SpeedupReport, Topology,
    View,
};

use crate::cost::CostModel;
use crate::feed::{self, Checked, Feed};
use crate::job::{JobSpec, Phase};
use crate::limits::HORIZON;
use crate::list::{List, Removal};
use crate::metrics::{JobRecord, RunSummary};
use crate::slots::Slots;
use crate::tally::{Ran, Tally};

const NS: f64 = 1e9;
/// Longest schedule period the fast-forward recognises, in quanta.
const MAX_PERIOD: usize = 32;
/// How many times a period must repeat before the engine trusts it.
const REPEATS: usize = 3;
/// Consecutive quanta in which no job progresses and nothing can arrive before a run is declared
/// starved.
const STARVED_QUANTA: u64 = 1_000;

/// How a simulation runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The scheduler quantum; `None`: the policy's preferred quantum, or 100 ms.
    pub quantum: Option<Nanos>,
    /// The cost-of-sharing model.
    pub cost: CostModel,
    /// Most jobs admitted at once (the multiprogramming level); 0 for the policy's preferred
    /// level ([`SimHints::preferred_mpl`]), or no limit if it has none. Jobs beyond it queue in
    /// arrival order (a FCFS long-term scheduler).
    pub mpl: u32,
    /// Whether the admission limit follows the policy's MPL advice (PDPA) when it gives one.
    pub follow_mpl_advice: bool,
    /// Whether repeating schedules are skipped over (see the module documentation).
    pub fast_forward: bool,
    /// Whether every placement is checked for overlaps and sizes (cheap; on by default).
    pub check_placement: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            quantum: None,
            cost: CostModel::default(),
            mpl: 0,
            follow_mpl_advice: true,
            fast_forward: true,
            check_placement: true,
        }
    }
}

/// Receives what a run produces as it happens: trace events and finished jobs.
pub trait Observer {
    /// Whether to build trace events at all (building them costs time).
    fn wants_events(&self) -> bool {
        false
    }

    /// One trace event, in time order.
    fn event(&mut self, _event: &Event) {}

    /// One finished job.
    fn job(&mut self, _record: &JobRecord) {}

    /// Whether the run should stop now (asked at every scheduler tick): a caller whose policy
    /// failed, or whose user gave up, ends the run with [`SimError::Stopped`] instead of letting
    /// it go on.
    fn stop(&self) -> bool {
        false
    }
}

impl Observer for () {}

/// Why a run could not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The policy gives no job any CPU and nothing else can happen.
    #[error("at t = {at:.3} s the policy gives none of the {jobs} jobs in the system a CPU it can progress on and no job can arrive: the run would never end")]
    Starved {
        /// Simulated time, seconds.
        at: f64,
        /// Jobs in the system.
        jobs: usize,
    },
    /// The placer broke an invariant (a bug in the policy or the placer).
    #[error("at t = {at:.3} s the placement is invalid: {error}")]
    Placement {
        /// Simulated time, seconds.
        at: f64,
        /// What broke.
        error: PlacementError,
    },
    /// Simulated time passed [`crate::limits::HORIZON`]: some job's work is far too large for
    /// the share it gets, or the backlog grows faster than the machine drains it (`os` at a high
    /// load: each job more it runs beside slows every other through the cost of
    /// oversubscription).
    #[error("at t = {at:.3e} s the run passed the simulator's horizon with {jobs} jobs unfinished: their work is too large for the shares they get (one job far too large for its share, or a backlog that grows faster than the machine drains it, as under os when oversubscription's cost outgrows the spare capacity)")]
    Horizon {
        /// Simulated time, seconds.
        at: f64,
        /// Jobs in the system.
        jobs: usize,
    },
    /// The observer asked the run to stop ([`Observer::stop`]).
    #[error("at t = {at:.3} s the run was stopped")]
    Stopped {
        /// Simulated time, seconds.
        at: f64,
    },
    /// A job cannot run on this machine.
    #[error("job {name:?}: field `{field}`: {message}")]
    Job {
        /// The job.
        name: String,
        /// The field at fault.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Progress counters of one job at one tick, for fast-forwarding.
#[derive(Debug, Clone, Copy, Default)]
struct Snap {
    done: f64,
    run_ns: Nanos,
    busy: f64,
    moves: u64,
    /// Stall still to serve (a program resumed or moved late in a quantum carries some over the
    /// boundary): a jump needs it to be where it was a period before.
    stall: f64,
}

/// What the tick's walks over every job read of it, kept beside its record ([`Slots`]) in one
/// dense list: a long backlog's walk reads a few bytes a job, and a removal moves them with the
/// slot numbers in one pass.
#[derive(Debug, Clone, Copy)]
struct Beside {
    /// The CPUs it ran on in the last quantum (0 if it did not run): the tick's pass over the
    /// decision compares each count with it and reads nothing else.
    held: u32,
    /// [`Live::idle`].
    idle: bool,
}

/// A job in the system.
#[derive(Debug)]
struct Live {
    /// Its program's id (its record's slot is reused once it has left).
    id: u64,
    spec: JobSpec,
    /// Whether it is still in the system (finished jobs leave at the next tick).
    alive: bool,
    /// The time its progress was last brought up to date.
    at: Nanos,
    phase: usize,
    remaining: f64,
    rate: f64,
    stall: f64,
    done_at: Nanos,
    /// CPUs held.
    share: f64,
    threads: f64,
    team: Option<u32>,
    first_run: Option<Nanos>,
    ran_last: bool,
    run_ns: Nanos,
    busy: f64,
    moves: u64,
    done: f64,
    dedicated: f64,
    q_work: f64,
    q_time: f64,
    hist: VecDeque<Snap>,
    /// Its part of the schedule's signature while it runs ([`signature`] of its id, count and
    /// CPUs), computed when its CPUs change, for the fast-forward (not kept without it).
    sig: u64,
    /// Its kind (the description's), kept beside the counters for the tick's walk.
    kind: Kind,
    /// Whether it reports speedups in its current phase (the job does, and the phase can use
    /// more than one CPU), kept beside the counters so that the tick does not read the phase.
    reports: bool,
}

impl Snap {
    /// Adds `step` (whole periods' progress) to these counters.
    fn advance(&mut self, step: &Snap) {
        self.done += step.done;
        self.run_ns += step.run_ns;
        self.busy += step.busy;
        self.moves += step.moves;
    }
}

impl Live {
    /// The record of job `id` (`spec`), arrived and waiting for admission, which sets when its
    /// progress starts. `dedicated` is its run time alone on the machine.
    fn new(id: ProgramId, spec: JobSpec, dedicated: f64) -> Live {
        Live {
            id: id.0,
            alive: true,
            at: 0,
            phase: 0,
            remaining: spec.phases[0].simulated_work(),
            rate: 0.0,
            stall: 0.0,
            done_at: Nanos::MAX,
            share: 0.0,
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

    /// Adds `step` (whole periods' progress) to its counters.
    fn advance(&mut self, step: &Snap) {
        let mut s = self.snap();
        s.advance(step);
        (self.done, self.run_ns, self.busy, self.moves) = (s.done, s.run_ns, s.busy, s.moves);
    }

    /// Records whether it runs this quantum. A job that stops drops the stall it has not served
    /// yet: the cache it was warming is gone when it runs again, which costs the resume anew
    /// ([`CostModel::resume_ms`]), so a stall never outlasts the slice it was paid in (slices
    /// shorter than the resume cost make no progress, and leave no debt for later slices).
    fn set_running(&mut self, running: bool) {
        if self.ran_last && !running {
            self.stall = 0.0;
        }
        self.ran_last = running;
    }

    fn snap(&self) -> Snap {
        Snap { done: self.done, run_ns: self.run_ns, busy: self.busy, moves: self.moves, stall: self.stall }
    }

    /// The CPUs it holds. `share` is always a placement's whole count of CPUs (or 0), so the
    /// conversion is exact: no rounding call on the tick's path.
    fn held(&self) -> u32 {
        self.share as u32
    }

    /// Whether it has never run and has work to do: nothing about it can change at a tick unless
    /// the decision runs it (its view fields are written on admission and at phase changes, and
    /// its usage figures are zero). Its progress counters are all zero, so its history (for the
    /// fast-forward) is a run of zero snapshots and need not be kept. A backlog of waiting jobs
    /// then costs the tick almost nothing.
    fn idle(&self) -> bool {
        self.first_run.is_none() && self.remaining > 0.0
    }

    /// Its progress counters now and `p` ticks ago. A job that has not been seen for that long
    /// was idle then (its counters were zero).
    fn period_ends(&self, p: usize) -> (Snap, Snap) {
        let n = self.hist.len();
        let now = self.hist.back().copied().unwrap_or_default();
        (now, if n > p { self.hist[n - 1 - p] } else { Snap::default() })
    }

    /// Brings its progress up to `t` (rates are constant between its events), converting the
    /// time passed with `seconds`.
    fn progress(&mut self, t: Nanos, seconds: &mut Seconds) {
        if t <= self.at {
            return;
        }
        let dt_ns = t - self.at;
        self.at = t;
        if self.share <= 0.0 {
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
        self.busy += self.share * dt;
    }

    fn set_done_at(&mut self, now: Nanos) {
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

/// Converts nanoseconds to seconds, remembering the last conversion: at a tick every running job
/// has progressed by the same span (a quantum), and the division was the longest step of the
/// tick's walk over the jobs. The result is the division's, bit for bit.
#[derive(Debug, Default)]
struct Seconds {
    ns: Nanos,
    secs: f64,
}

impl Seconds {
    /// `ns` in seconds.
    fn of(&mut self, ns: Nanos) -> f64 {
        if ns != self.ns {
            self.ns = ns;
            self.secs = crate::limits::seconds(ns);
        }
        self.secs
    }
}

struct Engine<'a, 'o> {
    topology: &'a Topology,
    managed: CpuSet,
    cpus: u32,
    policy: Box<dyn SimHints>,
    spec: String,
    cfg: SimConfig,
    quantum: Nanos,
    tally: Tally<'o>,
    now: Nanos,
    next_tick: Nanos,
    wake_at: Option<Nanos>,
    limit: u32,
    /// The jobs waiting for admission, in arrival order: the slots of their records, which they
    /// get on arrival (so that a job's description moves once, into its record).
    queue: VecDeque<u32>,
    programs: List<Program>,
    /// Per program, its job (indexed like `programs`, stored in stable slots), and beside it
    /// what the tick's walks over every job read.
    live: Slots<Live, Beside>,
    /// The indices of the jobs that are not idle, in order, when `active_stale` is false: the
    /// tick's walks go through these only, not through a long backlog's flags.
    active: Vec<usize>,
    /// Whether an idle flag or the job list changed since `active` was built.
    active_stale: bool,
    placer: Placer,
    decision: Decision,
    /// Whether `decision` is the policy's last, for the program list as it was then (the
    /// programs finished since are still listed until [`Engine::compact`] takes them out of
    /// both), and the policy may bring it up to date ([`SimHints::may_update`]): a lazy run then
    /// asks it to ([`SimHints::update`]).
    decided: bool,
    /// Programs admitted since the last decision (at the end of the list).
    appended: usize,
    sets: Vec<CpuSet>,
    /// Empty CPU sets with room, from finished programs, for admitted ones: a set that has held
    /// a placement has the words of its machine, and a program's first placement would allocate
    /// them again.
    spare_sets: Vec<CpuSet>,
    /// Scratch: the programs whose count changed at this tick.
    changed_jobs: Vec<usize>,
    /// The last span converted to seconds (for [`Live::progress`]).
    seconds: Seconds,
    /// CPUs held by running jobs (Σ share), kept up to date as shares change.
    held: f64,
    /// Alive jobs that hold CPUs, and alive jobs that progress (rate above zero), kept up to date
    /// as shares and rates change.
    served: usize,
    rated: usize,
    /// Alive jobs that held no CPU after the last tick.
    unserved: usize,
    /// Whether jobs are brought up to date only at their own events: a policy that does not read
    /// the per-quantum usage figures ([`SimHints::reads_usage`]), and no snapshot fast-forward
    /// (which takes every job's snapshot at every boundary). A tick then costs the jobs whose
    /// allocation changes, not every job; a job's progress over quanta of one allocation is
    /// added in one step instead of one per quantum (equal up to rounding).
    lazy: bool,
    /// Whether the policy reads the usage figures ([`SimHints::reads_usage`]): a run that is not
    /// lazy for the snapshots' sake leaves them as a lazy run does.
    usage: bool,
    /// The indices of the finished jobs still in `live` (removed at the next tick), in the
    /// order they finished.
    dead: Vec<usize>,
    /// Phase ends: every alive job's `done_at` is here (pushed when it changes), beside entries
    /// that no longer apply, dropped when they reach the top.
    ends: BinaryHeap<End>,
    global_hist: VecDeque<(f64, f64)>,
    /// Per quantum boundary since the last change, the signature of the running programs and
    /// that of every program's CPUs (running or last run: a stopped program's set is where it
    /// will want to resume).
    sigs: VecDeque<(u64, u64)>,
    /// The signatures of the wake-up decisions since the last quantum boundary, folded into the
    /// next boundary's.
    wake_sig: u64,
    /// Whether a job was admitted since the last boundary's fast-forward check.
    admitted: bool,
    /// The policy's rotation at the last boundary ([`SimHints::rotation`]).
    rotation: Option<Rotation>,
    quiet: usize,
    idle_quanta: u64,
}

/// Runs `jobs` (in arrival order; a job listed before an earlier arrival arrives when it is
/// reached) under `policy` on the `topology`'s CPUs, streaming trace events and finished jobs to
/// `obs`, and returns the run's figures. `spec` names the policy in the results.
/// The jobs are produced ahead, on a thread of their own (`feed.rs`).
pub fn run(
    topology: &Topology,
    spec: &str,
    policy: Box<dyn SimHints>,
    jobs: impl IntoIterator<Item = JobSpec, IntoIter: Send>,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
) -> Result<RunSummary, SimError> {
    let started = Instant::now();
    let cpus = topology.cpus().len() as u32;
    feed::ahead(jobs.into_iter(), cpus, &cfg.cost, |jobs| run_fed(topology, spec, policy, jobs, cfg, obs, started))
}

/// [`run`], on the jobs from the feed.
fn run_fed(
    topology: &Topology,
    spec: &str,
    policy: Box<dyn SimHints>,
    mut pending: Feed,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
    started: Instant,
) -> Result<RunSummary, SimError> {
    let max_quantum = (crate::limits::MAX_QUANTUM_SECONDS * NS) as Nanos;
    let quantum = cfg.quantum.or(policy.preferred_quantum()).unwrap_or(100_000_000).clamp(1, max_quantum);
    let managed = topology.cpus().clone();
    let cpus = managed.len() as u32;
    let mpl = if cfg.mpl > 0 { cfg.mpl } else { policy.preferred_mpl().unwrap_or(0) };
    if obs.wants_events() {
        let kind = EventKind::Start { source: "sim".into(), cpus: managed.clone(), policy: spec.to_string(), quantum };
        obs.event(&Event { t: 0, program: None, kind });
    }
    if policy.oversubscribes() {
        return crate::sharing::run(managed, spec, quantum, pending, &SimConfig { mpl, ..cfg.clone() }, obs, started);
    }
    // Every job is brought up to date every quantum for a policy that reads the usage figures,
    // and for the snapshots that learn a time-sharing policy's rotating schedule. A space-sharing
    // policy's schedule that repeats has period one: a lazy run skips its quiet quanta.
    let usage = policy.reads_usage();
    let eager = usage || (cfg.fast_forward && policy.time_sharing());
    let lazy = !eager;
    let mut e = Engine {
        topology,
        managed,
        cpus,
        policy,
        spec: spec.to_string(),
        cfg: cfg.clone(),
        quantum,
        tally: Tally::new(cpus, obs),
        now: 0,
        next_tick: 0,
        wake_at: None,
        limit: mpl,
        queue: VecDeque::new(),
        programs: List::default(),
        live: Slots::default(),
        active: Vec::new(),
        active_stale: false,
        placer: Placer::new(),
        decision: Decision::default(),
        decided: false,
        appended: 0,
        sets: Vec::new(),
        spare_sets: Vec::new(),
        changed_jobs: Vec::new(),
        seconds: Seconds::default(),
        held: 0.0,
        served: 0,
        rated: 0,
        unserved: 0,
        lazy,
        usage,
        dead: Vec::new(),
        ends: BinaryHeap::new(),
        global_hist: VecDeque::new(),
        sigs: VecDeque::new(),
        wake_sig: 0,
        admitted: false,
        rotation: None,
        quiet: 0,
        idle_quanta: 0,
    };
    loop {
        let next_arrival = pending.next_arrival(e.now)?;
        if e.live.len() == e.dead.len() && e.queue.is_empty() {
            match next_arrival {
                None => break,
                // An empty machine: nothing happens until the first tick at or after the arrival.
                Some(a) if a > e.next_tick => {
                    e.next_tick = a.div_ceil(quantum) * quantum;
                    e.wake_at = None;
                }
                Some(_) => {}
            }
        }
        let done = e.next_end();
        let mut t = e.next_tick.min(done).min(next_arrival.unwrap_or(Nanos::MAX));
        if let Some(w) = e.wake_at {
            t = t.min(w);
        }
        Tally::within_horizon(t, e.live.len() - e.dead.len() + e.queue.len())?;
        e.advance_to(t);
        e.complete_phases();
        while let Some(Checked { mut spec, dedicated }) = pending.due(e.now)? {
            // Nothing the policy sees changes until the job is admitted (which starts the
            // fast-forward over): an arrival that waits for a place does not, unless it is the
            // first job to wait (idle CPUs then count as fragmentation).
            let id = e.tally.arrive(&mut spec, e.now);
            if !e.waiting() {
                e.changed();
            }
            let slot = e.live.insert(|| Live::new(id, spec, dedicated));
            e.queue.push_back(slot);
        }
        let wake = e.wake_at == Some(e.now);
        if e.now == e.next_tick || wake {
            e.tick(wake, pending.next_arrival(e.now)?)?;
        }
    }
    Ok(e.tally.summary(&e.spec, mpl, started))
}

impl Engine<'_, '_> {
    fn emit(&mut self, program: Option<ProgramId>, kind: EventKind) {
        self.tally.emit(self.now, program, kind);
    }

    /// Whether repeating schedules are skipped by snapshots ([`Engine::fast_forward`]): the
    /// fast-forward is on and the run is not lazy (a time-sharing policy, or one that reads
    /// usage). A lazy run's fast-forward skips quiet quanta instead ([`Engine::skip_quiet`]).
    fn snapshots(&self) -> bool {
        self.cfg.fast_forward && !self.lazy
    }

    /// Marks that something changed the schedule's inputs: the fast-forward starts over.
    fn changed(&mut self) {
        self.forget_schedule();
        self.idle_quanta = 0;
    }

    /// Drops what the fast-forward learnt of the schedule: it must be seen to repeat again.
    fn forget_schedule(&mut self) {
        self.quiet = 0;
        self.sigs.clear();
        self.wake_sig = 0;
    }

    /// Moves the clock to `t`, accounting the CPUs held and left idle meanwhile. Jobs are
    /// brought up to date lazily ([`Live::progress`]).
    fn advance_to(&mut self, t: Nanos) {
        if t <= self.now {
            return;
        }
        let waited = self.waiting();
        self.tally.account(t - self.now, self.held, waited);
        self.now = t;
    }

    /// Whether some job waits for CPUs (admitted without any, or queued for admission): the
    /// CPUs left idle meanwhile count as fragmentation.
    fn waiting(&self) -> bool {
        self.unserved > 0 || !self.queue.is_empty()
    }

    /// Moves every job whose phase ended to its next phase, or out of the system.
    fn complete_phases(&mut self) {
        while let Some(&end) = self.ends.peek() {
            if end.at() > self.now {
                break;
            }
            self.ends.pop();
            if !self.applies(end) {
                continue;
            }
            // An alive job is listed, in id order.
            let i = self.position(end.id());
            debug_assert_eq!(self.live.slot(i), end.slot, "the job found by its id is the end's");
            self.changed();
            let now = self.now;
            let l = self.live.in_slot_mut(end.slot);
            l.progress(now, &mut self.seconds);
            let ended = l.phase;
            l.phase += 1;
            self.tally.events += 1;
            while l.phase < l.spec.phases.len() && l.spec.phases[l.phase].work <= 0.0 {
                l.phase += 1;
            }
            if l.phase >= l.spec.phases.len() {
                self.finish(i);
                continue;
            }
            l.remaining = l.spec.phases[l.phase].simulated_work();
            l.reports = reports_in(&l.spec, l.phase);
            let request = l.spec.request_in(l.phase);
            // Only a trace reads whether the request changed.
            let traced = self.tally.trace && request.now != l.spec.request_in(ended).now;
            let (share, threads) = (l.share, l.threads);
            self.set_idle(i);
            self.set_rate(i, share, threads);
            self.live[i].set_done_at(now);
            self.push_end(i);
            self.programs[i].request = request;
            if traced {
                let id = self.programs[i].id;
                self.emit(Some(id), EventKind::Request { now: request.now });
            }
        }
    }

    /// Sets job `i`'s idle flag from its state ([`Live::idle`]).
    fn set_idle(&mut self, i: usize) {
        let idle = self.live[i].idle();
        let beside = self.live.beside_mut(i);
        if idle != beside.idle {
            beside.idle = idle;
            self.active_stale = true;
        }
    }

    /// Rebuilds the list of non-idle jobs if it is stale.
    fn refresh_active(&mut self) {
        if self.active_stale {
            self.active.clear();
            self.active.extend(self.live.besides().enumerate().filter(|(_, b)| !b.idle).map(|(i, _)| i));
            self.active_stale = false;
        }
    }

    /// The earliest phase end, dropping the heap's entries that no longer apply (so that the
    /// run does not stop at a time where nothing happens).
    fn next_end(&mut self) -> Nanos {
        while let Some(&end) = self.ends.peek() {
            if self.applies(end) {
                return end.at();
            }
            self.ends.pop();
        }
        Nanos::MAX
    }

    /// The position in the program list of the listed job `id` (the list is in id order).
    fn position(&self, id: u64) -> usize {
        self.programs.binary_search_by_key(&id, |p| p.id.0).expect("an alive job is listed")
    }

    /// Whether the phase end `end` still applies: the record in its slot is its job's (a slot is
    /// reused once its job has left), still in the system and due at its time. A job waiting for
    /// admission has a record too, which no end applies to: its id is its own (ids are unique)
    /// and it is due at no time (`done_at` is `Nanos::MAX` until admission).
    fn applies(&self, end: End) -> bool {
        let l = self.live.in_slot(end.slot);
        l.id == end.id() && l.alive && l.done_at == end.at()
    }

    /// Queues job `i`'s end, if it has one. Always inlined, as are the other steps a job's
    /// arrival, placement and end each take once ([`Engine::set_rate`], [`Engine::reschedule`],
    /// ...): the compiler kept them out of line, a call each per job.
    #[inline(always)]
    fn push_end(&mut self, i: usize) {
        let slot = self.live.slot(i);
        let l = self.live.in_slot(slot);
        if l.done_at != Nanos::MAX {
            self.ends.push(End::new(l.done_at, l.id, slot));
        }
    }

    /// Removes finished jobs from the program list (keeping id order).
    fn compact(&mut self) {
        if self.dead.is_empty() {
            return;
        }
        self.dead.sort_unstable();
        for &i in &self.dead {
            let mut set = std::mem::take(&mut self.programs[i].cpus);
            set.clear();
            self.spare_sets.push(set);
        }
        // The program list and the records' order are parallel: one plan removes from both.
        let plan = Removal::new(self.programs.len(), &self.dead);
        self.programs.remove(&plan);
        self.live.remove(&plan);
        if self.decided {
            debug_assert_eq!(
                self.decision.allocations.len(),
                self.programs.len() + self.dead.len(),
                "the last decision is for the list before"
            );
            remove_sorted(&mut self.decision.allocations, &self.dead);
        }
        self.active_stale = true;
        self.dead.clear();
    }

    fn finish(&mut self, i: usize) {
        let slot = self.live.slot(i);
        if self.live.in_slot(slot).ran_last {
            // Its CPUs are free from now on (for the next placement of the changed programs).
            self.placer.release(self.topology, &self.programs[i].cpus);
        }
        self.set_rate(i, 0.0, self.live.in_slot(slot).threads);
        self.dead.push(i);
        let (l, p) = (self.live.in_slot_mut(slot), &mut self.programs[i]);
        l.alive = false;
        l.ran_last = false;
        l.done_at = Nanos::MAX;
        // The name goes back to the job, for its record: the program leaves at the next
        // compaction, and nothing reads a finished program's name.
        std::mem::swap(&mut l.spec.name, &mut p.name);
        self.policy.on_exit(p.id);
        let ran =
            Ran { first_run: l.first_run, run_ns: l.run_ns, busy: l.busy, moves: l.moves, dedicated: l.dedicated };
        self.tally.finish(p.id, &mut l.spec, p.arrival, &ran, self.now);
    }

    /// Admits queued jobs while the multiprogramming level allows (at ticks, after
    /// [`Engine::compact`]).
    fn admit(&mut self) {
        while !self.queue.is_empty() && (self.limit == 0 || self.live.len() < self.limit as usize) {
            let slot = self.queue.pop_front().expect("not empty");
            // A change unless the policy's rotation leaves the job out: decided at the next
            // boundary ([`Engine::fast_forward`]).
            self.admitted = true;
            let l = self.live.in_slot_mut(slot);
            l.at = self.now;
            let spec = &mut l.spec;
            let id = ProgramId(l.id);
            debug_assert!(
                self.programs.last().is_none_or(|p| p.id < id),
                "admitted in id order: the list stays sorted for `position`"
            );
            // The program holds the name while the job is in the system ([`Engine::finish`]
            // hands it back for the job's record): moved, not copied. Its view fields are what
            // [`Engine::show`] writes for a job that has not run: not running, a rigid job's
            // processes as its threads.
            let p = Program {
                kind: spec.kind,
                request: spec.request_in(0),
                weight: spec.weight,
                arrival: spec.arrival,
                threads: spec.kind.rigid_procs(),
                cpus: self.spare_sets.pop().unwrap_or_default(),
                ..Program::new(id.0, std::mem::take(&mut spec.name), spec.request)
            };
            let remaining = l.remaining;
            self.programs.push(p);
            self.appended += 1;
            self.unserved += 1;
            self.live.list(slot, Beside { held: 0, idle: false });
            let i = self.live.len() - 1;
            self.set_idle(i);
            let view = view_of(self.topology, self.cpus, self.now, self.quantum, &self.programs);
            self.policy.on_arrival(&view, id);
            // A phase of no work ends at once.
            if remaining <= 0.0 {
                self.live[i].done_at = self.now;
                self.push_end(i);
            }
        }
    }

    /// Sets job `i`'s rate for holding `share` CPUs with `threads` threads.
    /// A finished job's rate is zero. The counts of CPUs held and of jobs served and
    /// progressing follow. Always inlined (see [`Engine::push_end`]).
    #[inline(always)]
    fn set_rate(&mut self, i: usize, share: f64, threads: f64) {
        let l = &mut self.live[i];
        let (old_share, old_rate) = (l.share, l.rate);
        l.share = share;
        l.threads = threads;
        l.rate = if l.phase < l.spec.phases.len() {
            let ph = &l.spec.phases[l.phase];
            self.cfg.cost.rate(&ph.speedup, ph.request as f64, share, threads, l.spec.sync, false)
        } else {
            0.0
        };
        let rate = l.rate;
        self.live.beside_mut(i).held = if l.ran_last { share as u32 } else { 0 };
        self.held += share - old_share;
        self.served = self.served + usize::from(share > 0.0) - usize::from(old_share > 0.0);
        self.rated = self.rated + usize::from(rate > 0.0) - usize::from(old_rate > 0.0);
    }

    /// Brings every job that is not idle up to now and, for a policy that reads them, writes its
    /// usage figures into its program (CPU time, the speedup over the last quantum), and, at a
    /// quantum boundary with the snapshot fast-forward on, takes its snapshot. Its request is set
    /// on admission and at each phase change ([`Engine::complete_phases`]), its running flag and
    /// threads when its allocation changes ([`Engine::show`]).
    fn view_usage(&mut self, regular: bool) {
        self.refresh_active();
        let snapshots = self.snapshots() && regular;
        for &i in &self.active {
            let (p, l) = (&mut self.programs[i], &mut self.live[i]);
            l.progress(self.now, &mut self.seconds);
            if self.usage {
                p.cpu_time = (l.busy * NS) as Nanos;
                if l.reports && l.q_time > 0.0 && l.share > 0.0 {
                    p.speedup = SpeedupReport::new(l.held(), l.q_work / l.q_time);
                }
            }
            l.q_work = 0.0;
            l.q_time = 0.0;
            if snapshots {
                if l.hist.len() > MAX_PERIOD {
                    l.hist.pop_front();
                }
                l.hist.push_back(l.snap());
            }
        }
    }

    /// One scheduler step: build the view, decide, place, and set every job's rate.
    fn tick(&mut self, wake: bool, next_arrival: Option<Nanos>) -> Result<(), SimError> {
        if self.tally.stop() {
            return Err(SimError::Stopped { at: self.now as f64 / NS });
        }
        self.tally.events += 1;
        let regular = self.now == self.next_tick;
        if regular {
            self.next_tick = self.now + self.quantum;
        }
        if wake {
            // A wake-up is part of the policy's schedule (VTQ-DSS's member expiries): it repeats
            // with the quanta around it, so it does not start the fast-forward over.
            self.wake_at = None;
        }
        self.compact();
        self.admit();
        let now = self.now;
        // The view, as the live manager builds it. When lazy, nothing the policy reads changes
        // between a job's own events, which write it.
        if !self.lazy {
            self.view_usage(regular);
        }
        // A lazy run's policy may bring its last decision up to date for the programs admitted
        // since (those gone were taken out of it with them); the others it kept are then as
        // they were, and so are the CPUs they hold: only the appended ones are compared.
        let n = self.programs.len();
        let view = view_of(self.topology, self.cpus, self.now, self.quantum, &self.programs);
        let updated = self.lazy && self.decided && {
            self.decision.allocations.resize(n, Allocation::default());
            self.policy.update(&view, &mut self.decision, self.appended)
        };
        if !updated {
            self.decision.reset(n);
            // A wake-up between boundaries decides within the quantum, as the live manager's
            // kicked steps do.
            self.policy.decide_at(regular, &view, &mut self.decision);
        }
        let kept = if updated { n - self.appended } else { 0 };
        // Kept in step with the list only when the policy may bring it up to date (a pass over
        // it at every compaction: a trace's backlog of thousands of waiting jobs).
        (self.decided, self.appended) = (self.lazy && self.policy.may_update(), 0);
        if let Some(w) = self.decision.wake_at.filter(|&w| w > self.now) {
            self.wake_at = Some(w);
        }
        if self.cfg.follow_mpl_advice {
            if let Some(m) = self.decision.mpl_advice {
                if m != self.limit && m > 0 {
                    self.limit = m;
                }
            }
        }
        let (mut sig, mut held_sig) = (0, 0);
        self.apply_placed(kept, &mut sig, &mut held_sig)?;
        if !self.lazy {
            // Every job progressed to now for the view: its end is computed from there (a job
            // whose allocation changed was rescheduled when it was applied).
            self.refresh_active();
            for k in 0..self.active.len() {
                self.reschedule(self.active[k]);
            }
        }
        self.unserved = self.live.len() - self.served;
        // Nothing progresses and nothing can arrive or wake the policy: no job can end, so none
        // queued behind the admission limit can be admitted either.
        if self.rated == 0 && next_arrival.is_none() && self.wake_at.is_none() {
            self.idle_quanta += 1;
            if self.idle_quanta >= STARVED_QUANTA {
                return Err(SimError::Starved { at: now as f64 / NS, jobs: self.live.len() + self.queue.len() });
            }
        }
        if self.snapshots() {
            if !regular {
                // A wake-up's decision counts in the signature of the next quantum boundary, so
                // that a repeating sequence of boundaries repeats what happens between them.
                self.wake_sig = self.wake_sig.rotate_left(7).wrapping_add(sig);
            } else {
                // A boundary that is also a wake-up (a gang that started between boundaries) is a
                // boundary: its snapshots were taken, so its signatures are too.
                let sig = sig.wrapping_add(std::mem::take(&mut self.wake_sig).rotate_left(17));
                // Whether a job waits decides what idle CPUs count as: part of the schedule.
                let sig = if self.waiting() { sig ^ 0x2545_f491_4f6c_dd1d } else { sig };
                self.fast_forward((sig, held_sig), next_arrival);
            }
        } else if self.cfg.fast_forward && regular {
            // A lazy run's fast-forward.
            let quiet = !std::mem::take(&mut self.admitted) && self.changed_jobs.is_empty();
            self.skip_quiet(quiet, next_arrival);
        }
        Ok(())
    }

    /// Applies a space-sharing or gang decision through the placer: only the programs whose
    /// count changed, and those they take CPUs back from, are placed ([`Placer::place_changed`]);
    /// every program is at the first placement. With the fast-forward on, `sig` gets the
    /// schedule's signature (the sum of the running programs' parts) and `held_sig` that of
    /// every program's set (running, or where a stopped one will resume). The first `kept`
    /// programs keep the counts they hold (the policy brought its last decision up to date).
    fn apply_placed(&mut self, kept: usize, sig: &mut u64, held_sig: &mut u64) -> Result<(), SimError> {
        debug_assert!(
            self.decision.allocations[..kept].iter().zip(self.live.besides()).all(|(a, b)| a.granted() == b.held),
            "a decision brought up to date keeps what the programs listed before hold"
        );
        // One pass over the decision: the programs whose count differs from what they hold, and
        // whether every program given CPUs ran last quantum and holds exactly its count.
        let mut changed = std::mem::take(&mut self.changed_jobs);
        changed.clear();
        let mut holds = true;
        for (i, (a, b)) in (kept..).zip(self.decision.allocations[kept..].iter().zip(self.live.besides_from(kept))) {
            let want = a.granted();
            if want != b.held {
                changed.push(i);
                holds &= want == 0;
            }
        }
        if holds {
            // Every running program keeps the CPUs it holds: the placer would return them (its
            // first step keeps held CPUs, and nothing is left to grow), so it and its check are
            // skipped, as in most quanta of a settled schedule. What changes is only that the
            // programs in `changed` stop (each got nothing and held CPUs).
            for &i in &changed {
                self.stop(i);
            }
        } else {
            for &i in &changed {
                if self.live[i].ran_last {
                    self.placer.release(self.topology, &self.programs[i].cpus);
                }
            }
            if self.sets.len() < self.programs.len() {
                // Never shrunk: a set dropped when the list is shorter would be allocated again,
                // and grown word by word, when it is longer.
                self.sets.resize(self.programs.len(), CpuSet::new());
            }
            let only_changed =
                self.placer.place_changed(self.topology, &self.programs, &self.decision, &mut changed, &mut self.sets);
            if !only_changed {
                self.placer.place(self.topology, &self.managed, &self.programs, &self.decision, &mut self.sets);
                changed.clear();
                changed.extend(0..self.programs.len());
            }
            if self.cfg.check_placement && !only_changed {
                validate(&self.managed, &self.decision, &self.sets)
                    .map_err(|error| SimError::Placement { at: self.now as f64 / NS, error })?;
            }
            for &i in &changed {
                let placed = self.placer.placed(i);
                debug_assert_eq!(placed, self.sets[i].len(), "the placer's count of program {i}'s set");
                if self.cfg.check_placement && only_changed {
                    self.check_size(i, placed)?;
                }
                self.apply_one(i, placed as u32);
            }
        }
        self.changed_jobs = changed;
        if self.snapshots() {
            self.refresh_active();
            for &i in &self.active {
                if self.live[i].ran_last {
                    *sig = sig.wrapping_add(self.live[i].sig);
                }
                *held_sig = held_sig.wrapping_add(self.live[i].sig);
            }
        }
        Ok(())
    }

    /// Checks that program `i`'s new set, of `placed` CPUs ([`Placer::placed`]), is as large as
    /// its count: after placing only the changed programs, what remains to check (the placer took
    /// their CPUs from the free map, which holds none of the others'; a full placement is checked
    /// whole).
    fn check_size(&self, i: usize, placed: usize) -> Result<(), SimError> {
        let count = self.decision.allocations[i].granted();
        if placed != count as usize {
            let error = PlacementError::WrongSize { program: i, count, got: placed };
            return Err(SimError::Placement { at: self.now as f64 / NS, error });
        }
        Ok(())
    }

    /// Applies program `i`'s new set (in `sets`, `placed` CPUs) from the placer: moves and their
    /// reload, a resumed program's stall, its rate, and the trace.
    fn apply_one(&mut self, i: usize, placed: u32) {
        let a = self.decision.allocations[i];
        let running = a.running && placed > 0;
        let count = if running { placed } else { 0 };
        if !running && self.live.beside(i).idle {
            return;
        }
        let snapshots = self.snapshots();
        let l = &mut self.live[i];
        l.progress(self.now, &mut self.seconds);
        let p = &mut self.programs[i];
        if running {
            if snapshots {
                l.sig = signature(p.id, count, &self.sets[i]);
            }
            let moved: u32 = if p.cpus.is_empty() {
                0
            } else {
                // Counted only in the words with a new CPU (no `popcnt` on the baseline target: a
                // count is a dozen instructions).
                let old = p.cpus.as_words();
                self.sets[i]
                    .as_words()
                    .iter()
                    .enumerate()
                    .map(|(k, w)| w & !old.get(k).copied().unwrap_or(0))
                    .filter(|&new| new != 0)
                    .map(u64::count_ones)
                    .sum()
            };
            if moved > 0 {
                // A program that gained no CPU it had not held (every newcomer) reloads nothing.
                l.moves += u64::from(moved);
                l.stall += self.cfg.cost.reload(moved, count);
            }
            if !l.ran_last && l.first_run.is_some() {
                l.stall += self.cfg.cost.resume_ms * 1e-3;
            }
            l.first_run.get_or_insert(self.now);
            if l.kind == Kind::Moldable && l.team.is_none() {
                l.team = Some(count);
            }
        }
        // Only a trace reads whether the allocation changed (comparing sets costs a pass over
        // the machine's words).
        let changed = self.tally.trace && (running != l.ran_last || (running && self.sets[i] != p.cpus));
        if running {
            std::mem::swap(&mut p.cpus, &mut self.sets[i]);
        }
        l.set_running(running);
        if running {
            // It has run: no longer idle.
            self.set_idle(i);
        }
        self.set_placed_rate(i, count);
        if changed {
            let id = self.programs[i].id;
            let cpus = if running { self.programs[i].cpus.clone() } else { CpuSet::new() };
            self.emit(Some(id), EventKind::Allocate { count, cpus, running });
        }
    }

    /// Stops program `i`, which ran last quantum and gets nothing now: it gives its CPUs back
    /// (no placement needed, nobody else changes).
    fn stop(&mut self, i: usize) {
        let l = &mut self.live[i];
        debug_assert!(l.ran_last, "only a running program stops");
        l.progress(self.now, &mut self.seconds);
        self.placer.release(self.topology, &self.programs[i].cpus);
        self.live[i].set_running(false);
        self.set_placed_rate(i, 0);
        if self.tally.trace {
            let id = self.programs[i].id;
            self.emit(Some(id), EventKind::Allocate { count: 0, cpus: CpuSet::new(), running: false });
        }
    }

    /// Sets job `i`'s rate for `count` placed CPUs (its threads follow its kind), shows its
    /// allocation in its program's view fields and reschedules its end. Always inlined (see
    /// [`Engine::push_end`]).
    #[inline(always)]
    fn set_placed_rate(&mut self, i: usize, count: u32) {
        let l = &self.live[i];
        let threads = match l.kind {
            Kind::Rigid(n) => n,
            Kind::Moldable => l.team.unwrap_or(count),
            Kind::Malleable | Kind::Evolving => count,
        };
        self.set_rate(i, count as f64, threads as f64);
        self.show(i);
        self.reschedule(i);
    }

    /// Writes the view fields that change only with job `i`'s allocation: whether it runs, and
    /// its threads (a rigid job's processes, a moldable job's team once formed, else its CPUs
    /// once it has run). Always inlined (see [`Engine::push_end`]).
    #[inline(always)]
    fn show(&mut self, i: usize) {
        let (p, l) = (&mut self.programs[i], &self.live[i]);
        p.running = l.ran_last;
        p.threads = match l.kind {
            Kind::Rigid(n) => Some(n),
            Kind::Moldable => l.team,
            Kind::Malleable | Kind::Evolving => l.first_run.map(|_| l.held()),
        };
    }

    /// Recomputes job `i`'s end from its progress and rate now, queueing it if it moved. Always
    /// inlined (see [`Engine::push_end`]).
    #[inline(always)]
    fn reschedule(&mut self, i: usize) {
        let l = &mut self.live[i];
        let before = l.done_at;
        l.set_done_at(self.now);
        if l.done_at != before {
            self.push_end(i);
        }
    }

    /// The period of the schedule since the last change, if it repeats. When the policy states
    /// its rotation of `p` quanta ([`SimHints::rotation`]), one repetition is proof: if after the
    /// last boundary but one the policy is where it was `p` boundaries before (its rotation, all
    /// since the change) and so is every program's set (running, or where a stopped one will
    /// resume), then the last `p` quanta, and the moves and stalls their decisions caused,
    /// repeat for as long as nothing changes. Otherwise the running sets must have repeated
    /// [`REPEATS`] times over.
    fn period(&self, rotation: Option<Rotation>) -> Option<usize> {
        let len = self.sigs.len();
        if let Some(r) = rotation {
            let p = r.quanta as usize;
            let repeated = |back: usize| self.sigs[len - 1 - back] == self.sigs[len - 1 - back - p];
            return (self.quiet > p + 1 && repeated(1) && repeated(0)).then_some(p);
        }
        (1..=MAX_PERIOD.min(self.quiet / REPEATS)).find(|&p| {
            len >= REPEATS * p
                && (0..(REPEATS - 1) * p).all(|j| self.sigs[len - 1 - j].0 == self.sigs[len - 1 - j - p].0)
        })
    }

    /// A lazy run's fast-forward: once the same schedule was decided at [`REPEATS`] boundaries
    /// in a row (the one that set it, then quanta that changed no allocation and admitted no
    /// job, as the snapshot fast-forward trusts a period of one), with a policy that says its
    /// state stands still ([`SimHints::settled`]), the quanta up to the boundary at or after the
    /// next event (a phase end, an arrival, a wake-up) are skipped. Nothing a lazy run does at
    /// such a quantum reaches a job (each one's progress is added at its own events) or the
    /// policy's view, so skipping them gives the quantum-by-quantum run's results, as long as the
    /// policy decides the same on an unchanged view (the snapshot fast-forward's assumption, for a
    /// period of one quantum). With nothing left to happen, quanta go on one by one to the
    /// starvation check.
    fn skip_quiet(&mut self, quiet: bool, next_arrival: Option<Nanos>) {
        if !quiet || !self.policy.settled() {
            self.quiet = 0;
            return;
        }
        self.quiet += 1;
        if self.quiet < REPEATS - 1 {
            return;
        }
        let mut next = self.next_end().min(next_arrival.unwrap_or(Nanos::MAX)).min(self.wake_at.unwrap_or(Nanos::MAX));
        if self.rated > 0 {
            // Jobs progress, but the next event is past the horizon (an end too far for a `u64`
            // of nanoseconds saturates): the run jumps past the horizon, where the main loop
            // stops it with the horizon's error, instead of ticking there. With nothing
            // progressing, quanta go on one by one to the starvation check.
            next = next.min(HORIZON + 1);
        }
        // Ticks stay on multiples of the quantum (the first one at 0, an empty machine's at the
        // boundary after an arrival); past the horizon the main loop stops the run either way.
        let Some(boundary) = next.div_ceil(self.quantum).checked_mul(self.quantum) else { return };
        if boundary > self.next_tick {
            self.tally.skipped += (boundary - self.next_tick) / self.quantum;
            self.next_tick = boundary;
        }
    }

    /// Jumps over whole periods of a repeating schedule (module documentation).
    fn fast_forward(&mut self, sigs: (u64, u64), next_arrival: Option<Nanos>) {
        let view = view_of(self.topology, self.cpus, self.now, self.quantum, &self.programs);
        let rotation = self.policy.rotation(&view, MAX_PERIOD as u32);
        // A job admitted since the last boundary changed nothing if the rotation is the one
        // before (the policy leaves it out: a gang row it does not fit in): the schedule, and
        // every job's progress in it, go on.
        if std::mem::take(&mut self.admitted) && (rotation.is_none() || rotation != self.rotation) {
            self.changed();
        }
        // A policy whose own state moved (PDPA's searches and probes) makes no promise that what
        // repeated so far goes on: only the schedule since it settled counts.
        if !self.policy.settled() {
            self.forget_schedule();
        }
        self.rotation = rotation;
        self.quiet += 1;
        if self.global_hist.len() > MAX_PERIOD {
            self.global_hist.pop_front();
        }
        self.global_hist.push_back((self.tally.busy, self.tally.frag));
        if self.sigs.len() >= REPEATS * MAX_PERIOD {
            self.sigs.pop_front();
        }
        self.sigs.push_back(sigs);
        let Some(p) = self.period(rotation) else { return };
        if self.global_hist.len() <= p {
            return;
        }
        let cycle = p as u64 * self.quantum;
        // Idle jobs (never run) have no progress to add and nothing to reschedule: the walks go
        // through the active ones (current since the tick's last refresh).
        let mut n = Nanos::MAX;
        for &i in &self.active {
            let l = &self.live[i];
            let (now, then) = l.period_ends(p);
            let d = now.done - then.done;
            if d > 1e-12 {
                // Progress within a period never exceeds the period's, so after `n` periods with
                // `n × d < remaining` the job has not ended. A policy that states its rotation
                // decides the same wherever the jump lands in it, so it may land in the job's
                // last period; any other lands a whole period earlier, so that the decisions
                // before an end are made as the quantum-by-quantum run makes them (PDPA's state
                // moves with each one).
                let periods = l.remaining / d;
                // An end at the landing itself would come after the landing's tick, which the
                // quantum-by-quantum run makes after it: the landing stays a millionth of a
                // period clear of every end (an exact multiple, as computed, may be one in fact).
                let whole = if rotation.is_some() { periods.ceil() } else { periods.floor() };
                n = n.min((whole as Nanos).saturating_sub(1));
            }
            // A stall is part of the state that must repeat: a stopped program drops what it has
            // not served ([`Live::set_running`]), so only one running across boundaries carries
            // some, and one that differs from a period before is not periodic yet.
            if (now.stall - then.stall).abs() > 1e-15 {
                return;
            }
        }
        if let Some(a) = next_arrival {
            // Land strictly before the arrival: the tick at the arrival's time must see it.
            n = n.min((a - self.now).saturating_sub(1) / cycle);
        }
        if n == Nanos::MAX && self.held <= 0.0 {
            // Nothing runs and nothing will arrive: the starvation check ends the run.
            return;
        }
        // Never jump far past the horizon (the run stops there), so the jump cannot overflow. A
        // schedule in which programs run but none progresses (every slice shorter than the
        // resume cost) and nothing arrives jumps there, and the run ends with the horizon's
        // error instead of ticking towards it.
        n = n.min(HORIZON.saturating_sub(self.now) / cycle + 1);
        if n == 0 {
            return;
        }
        let g = self.global_hist.len();
        let (gb, gf) = (
            self.global_hist[g - 1].0 - self.global_hist[g - 1 - p].0,
            self.global_hist[g - 1].1 - self.global_hist[g - 1 - p].1,
        );
        let k = n as f64;
        for &i in &self.active {
            let l = &mut self.live[i];
            let (now, then) = l.period_ends(p);
            let step = Snap {
                done: k * (now.done - then.done),
                run_ns: n * (now.run_ns - then.run_ns),
                busy: k * (now.busy - then.busy),
                moves: n * (now.moves - then.moves),
                stall: 0.0,
            };
            l.remaining -= step.done;
            l.advance(&step);
            // The snapshots move with the clock, so that the schedule, which goes on repeating
            // after the landing, can be jumped again without being learnt again.
            for h in &mut l.hist {
                h.advance(&step);
            }
        }
        self.tally.busy += k * gb;
        self.tally.frag += k * gf;
        for g in &mut self.global_hist {
            *g = (g.0 + k * gb, g.1 + k * gf);
        }
        let jump = n * cycle;
        if self.tally.trace {
            self.emit(None, EventKind::Repeat { period: cycle, until: self.now + jump });
        }
        self.now += jump;
        self.next_tick += jump;
        // The policy and its pending wake-up land at the same point of the rotation.
        self.wake_at = self.wake_at.map(|w| w + jump);
        self.policy.skip(jump);
        self.tally.skipped += n * p as u64;
        let now = self.now;
        self.ends.clear();
        for k in 0..self.active.len() {
            let i = self.active[k];
            self.live[i].at = now;
            self.live[i].set_done_at(now);
            self.push_end(i);
        }
    }
}

/// A phase end in the engine's queue: a job's id and the time it is due, packed into one key that
/// orders ends by time, then by id (as the module documentation says ties go), and the slot of
/// its record, which finds it without a search. Ids are unique, so the slot never decides the
/// order: one integer comparison does, where a tuple of the three took a branch per field, at
/// every step of every push and pop.
#[derive(Debug, Clone, Copy)]
struct End {
    /// `at << 64 | id`.
    key: u128,
    slot: u32,
}

impl End {
    fn new(at: Nanos, id: u64, slot: u32) -> End {
        End { key: (u128::from(at) << 64) | u128::from(id), slot }
    }

    /// When it is due.
    fn at(self) -> Nanos {
        (self.key >> 64) as Nanos
    }

    /// Its job's id.
    fn id(self) -> u64 {
        self.key as u64
    }
}

impl Ord for End {
    /// Reversed, so that the standard max-heap pops the earliest end first.
    fn cmp(&self, other: &End) -> Ordering {
        other.key.cmp(&self.key)
    }
}

impl PartialEq for End {
    fn eq(&self, other: &End) -> bool {
        self.key == other.key
    }
}

impl Eq for End {}

impl PartialOrd for End {
    fn partial_cmp(&self, other: &End) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The run time of `spec` alone on a machine of `cpus` CPUs with its request. Inlined: every
/// arrival asks it once (the compiler kept it out of line, a call per job).
#[inline]
pub(crate) fn dedicated_time(cost: &CostModel, cpus: u32, spec: &JobSpec) -> f64 {
    let phase = |(k, ph): (usize, &Phase)| {
        let t = spec.natural_threads(k).min(cpus) as f64;
        if ph.work <= 0.0 {
            0.0
        } else {
            ph.simulated_work() / cost.rate(&ph.speedup, ph.request as f64, t, t, spec.sync, false)
        }
    };
    match &spec.phases[..] {
        // Every generated and traced job: its one phase's time, which is the sum's (no phase's
        // time is -0, the one number that adding to the sum's start would change).
        [one] => phase((0, one)),
        phases => phases.iter().enumerate().map(phase).sum(),
    }
}

/// Whether `spec` reports speedups in phase `phase`: it does, and the phase can use more than one
/// CPU (a speedup on one CPU says nothing).
fn reports_in(spec: &JobSpec, phase: usize) -> bool {
    spec.reports_speedup && spec.phases[phase].request > 1
}

/// `x.ceil() as Nanos`, exactly, without the software `ceil` (the baseline x86-64 target has no
/// rounding instruction, so `f64::ceil` is a library call, 3 % of a run that ticks every quantum).
/// For `0 < x < 2^63` truncation gives `floor(x)`, a double itself, so comparing it with `x` says
/// whether to add one (at most 2^63 results: no overflow); both conversions are signed ones, one
/// instruction each on that target, where the unsigned ones are sequences. From 2^63 up `x` is a
/// whole number, its own ceiling, and the cast saturates from 2^64. Zero, negative and NaN give
/// 0, as the cast of their ceiling does.
fn ceil_nanos(x: f64) -> Nanos {
    /// 2^63, the first double past `i64::MAX`.
    const SIGNED_END: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    if x >= SIGNED_END {
        return x as Nanos;
    }
    let t = x as i64;
    t as Nanos + Nanos::from((t as f64) < x)
}

/// The nanoseconds from now to an end `x` nanoseconds away, computed in floating point: the
/// ceiling, except that an `x` a millionth of a nanosecond or less above a whole nanosecond is
/// that nanosecond. Work added up in steps (a fast-forward's periods, a quantum's progress) is
/// off by a few units in the last place, and an end that falls on a quantum boundary must stay
/// on it: one nanosecond after it, it comes after the boundary's tick, and a request change it
/// brings waits a quantum.
fn end_nanos(x: f64) -> Nanos {
    ceil_nanos(x - 1e-6)
}

/// Removes the entries at `gone` (strictly increasing indices) from `v`, keeping the others'
/// order: each stretch between two removed entries moves once, down over the gaps before it.
fn remove_sorted<T: Copy>(v: &mut Vec<T>, gone: &[usize]) {
    let Some(&first) = gone.first() else { return };
    let mut to = first;
    for (k, &g) in gone.iter().enumerate() {
        let next = gone.get(k + 1).copied().unwrap_or(v.len());
        v.copy_within(g + 1..next, to);
        to += next - g - 1;
    }
    v.truncate(to);
}

/// The view the policy decides on at `now` (with `cpus` managed CPUs), as the live manager builds
/// it.
fn view_of<'v>(topology: &'v Topology, cpus: u32, now: Nanos, quantum: Nanos, programs: &'v [Program]) -> View<'v> {
    View { now, quantum, topology, cpus, programs }
}

/// A running program's part of a schedule's signature, a hash of its id, count and CPUs. The
/// signature is the wrapping sum of the running programs' parts: the same schedule gives the
/// same sum whatever the order, and programs that do not run (a long backlog) cost nothing.
/// Collisions only cost a missed skip.
fn signature(id: ProgramId, count: u32, cpus: &CpuSet) -> u64 {
    // The order-sensitive fold of a rotation's fingerprint, over the id, count and CPU words.
    let mut fold = Rotation::new(0);
    fold.mix(id.0 ^ ((count as u64) << 32));
    for w in cpus.as_words() {
        fold.mix(*w);
    }
    let mut h = fold.fingerprint;
    // A full avalanche (MurmurHash3's finaliser) before summing: the multiply-xor steps alone
    // are nearly linear, and sums of them collide (two programs on complementary CPU sets
    // summed like two others on a different split).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_nanos_is_the_cast_ceiling() {
        let small = [0.0, -0.0, -0.5, -1.5, 1e-300, 0.2, 1.0, 1.5, 99_999_999.5, 4503599627370495.5];
        let large = [
            9007199254740992.0,
            9223372036854774784.0,
            9223372036854775808.0,
            1.8446744073709552e19,
            1e30,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for x in small.into_iter().chain(large) {
            assert_eq!(ceil_nanos(x), x.ceil() as Nanos, "{x}");
        }
    }

    #[test]
    fn an_end_within_float_noise_of_a_nanosecond_is_that_nanosecond() {
        assert_eq!(end_nanos(100_000_000.000_000_01), 100_000_000);
        assert_eq!(end_nanos(100_000_000.01), 100_000_001);
        assert_eq!(end_nanos(0.5), 1);
        assert_eq!(end_nanos(1e-9), 0);
    }

    #[test]
    fn removal_keeps_the_others_in_order() {
        let mut v: Vec<u32> = (0..10).collect();
        super::remove_sorted(&mut v, &[0, 3, 4, 9]);
        assert_eq!(v, vec![1, 2, 5, 6, 7, 8]);
        super::remove_sorted(&mut v, &[]);
        assert_eq!(v, vec![1, 2, 5, 6, 7, 8]);
        super::remove_sorted(&mut v, &[0, 1, 2, 3, 4, 5]);
        assert!(v.is_empty());
    }

    #[test]
    fn signatures_of_different_schedules_differ() {
        // Two gang rows of pdpa-ltomcatv on 64 CPUs whose sums collided before the finaliser:
        // programs 8 and 9 on complementary sets, then 6 and 7 on another split.
        let set = |s: &str| CpuSet::parse(s).unwrap();
        let sum = |a: (u64, &str), b: (u64, &str)| {
            signature(ProgramId(a.0), 32, &set(a.1)).wrapping_add(signature(ProgramId(b.0), 32, &set(b.1)))
        };
        let one = sum((8, "2,33-63"), (9, "0-1,3-32"));
        assert_ne!(one, sum((6, "0,33-63"), (7, "1-32")));
        assert_eq!(one, sum((9, "0-1,3-32"), (8, "2,33-63")), "the order of the programs does not matter");
        assert_ne!(signature(ProgramId(1), 2, &set("0-1")), signature(ProgramId(1), 2, &set("2-3")), "the CPUs count");
    }
}
